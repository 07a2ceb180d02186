//! Power-state sync (`reference/ironic.md` §6.2): reads every eligible node's power state
//! from its BMC, many at once but at most `power_sync_workers` in flight in total and
//! `power_sync_max_per_bmc` at one BMC (nodes behind one chassis manager share it), each read
//! bounded by `power_sync_timeout`, so a hung BMC holds up nobody but its own nodes. A read
//! waits for its BMC's turn before it takes a worker, so a slow BMC never sits on workers
//! other BMCs could use. The periodic run spreads its reads evenly over half of
//! `sync_power_state_interval` (a steady trickle, not a burst every period); a run asked for
//! by hand (`run_reconciler`) reads at full speed.
//!
//! A state that differs from the record is recorded (Ferric does not push the recorded state
//! back to the hardware, unlike Ironic's `force_power_state_during_sync=true`: a machine
//! someone powered on by hand stays on and the record follows it). After
//! `power_state_sync_max_retries` failed reads in a row a node goes into maintenance with
//! `fault: power failure`; when its BMC answers again the sync takes it out by itself.
//! Skipped: nodes in `enroll` (seed 003), nodes waiting for a ramdisk callback or in
//! `adopt failed`, nodes with a power action under way, and nodes a task holds.
//!
//! At 100,000 nodes (issue 26, `cargo xtask bench-scale`) a pass never holds the fleet: it
//! picks its own nodes from keyset pages of narrow heads (what the hash ring needs), reads
//! their whole rows in batches of [`ROW_BATCH`] only as the reads drain, and logs one
//! `power sync pass finished` line with the node counts and its duration.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferric_db::{NodeFilter, Page};
use ferric_drivers::interfaces::PowerInterface;
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, PowerState};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::task::Task;
use crate::{ConductorError, Inner, lock};

const POWER_FAILURE: &str = "power failure";

fn eligible(inner: &Inner, node: &Node) -> bool {
    let skipped_state = matches!(
        node.provision_state,
        ProvisionState::Enroll
            | ProvisionState::WaitCallBack
            | ProvisionState::CleanWait
            | ProvisionState::InspectWait
            | ProvisionState::RescueWait
            | ProvisionState::AdoptFailed
    );
    let maintenance_ok = !node.maintenance || node.fault.as_deref() == Some(POWER_FAILURE);
    !skipped_state
        && maintenance_ok
        && node.target_power_state.is_none()
        && !inner.is_busy(node.uuid)
}

async fn read(
    inner: Arc<Inner>,
    node: Node,
    power: Arc<dyn PowerInterface>,
) -> (Node, Result<PowerState, String>) {
    let result = match tokio::time::timeout(
        inner.config.power_sync_timeout,
        power.get_power_state(&node),
    )
    .await
    {
        Ok(result) => result.map_err(|error| error.to_string()),
        Err(_) => Err(format!(
            "the BMC did not answer within {} seconds",
            inner.config.power_sync_timeout.as_secs()
        )),
    };
    (node, result)
}

/// Node heads read per statement when a pass picks the nodes this conductor owns.
const HEAD_PAGE: u32 = 5_000;
/// Whole rows read per statement, and how far the reads may run ahead of the rows read: a
/// pass holds about this many decoded nodes plus those in flight, not the whole fleet.
const ROW_BATCH: usize = 500;

/// The ids of the nodes this conductor owns, from keyset pages of heads (id, UUID, driver,
/// conductor group: what the hash ring needs), so another conductor's nodes are never
/// decoded.
pub(super) async fn owned_ids(inner: &Arc<Inner>) -> Result<Vec<i64>, ConductorError> {
    let mut owned = Vec::new();
    let mut page = Page::first(HEAD_PAGE);
    loop {
        let heads = inner
            .store
            .node_list_heads(&NodeFilter::default(), &page)
            .await?;
        owned.extend(
            heads
                .iter()
                .filter(|head| inner.owns_head(&head.conductor_group, &head.driver, head.uuid))
                .map(|head| head.id),
        );
        match heads.last() {
            Some(last) if heads.len() == HEAD_PAGE as usize => page = page.after(last.uuid),
            _ => return Ok(owned),
        }
    }
}

/// One pass. `spread`: start the reads evenly over this long instead of all at once.
pub(crate) async fn run_once(
    inner: &Arc<Inner>,
    spread: Option<Duration>,
) -> Result<usize, ConductorError> {
    let pass_started = std::time::Instant::now();
    let owned = owned_ids(inner).await?;
    let total = Arc::new(Semaphore::new(inner.config.power_sync_workers.max(1)));
    let ahead = inner.config.power_sync_workers.max(1) + ROW_BATCH;
    let mut per_bmc: HashMap<String, Arc<Semaphore>> = HashMap::new();
    let started = tokio::time::Instant::now();
    let count = owned.len().max(1) as u32;
    let mut reads = JoinSet::new();
    let mut acted = 0;
    let mut read_count = 0usize;
    let mut index = 0u32;
    for ids in owned.chunks(ROW_BATCH) {
        // Keep the decoded nodes bounded: finish reads before fetching more rows.
        while reads.len() > ahead {
            if let Some(Ok((node, result))) = reads.join_next().await {
                acted += usize::from(apply_logged(inner, &node, result).await?);
            }
        }
        let mut nodes: Vec<Node> = inner
            .store
            .node_list_by_id(ids)
            .await?
            .into_values()
            .filter(|node| inner.owns(node) && eligible(inner, node))
            .collect();
        nodes.sort_unstable_by_key(|node| node.id);
        for node in nodes {
            let at = index;
            index += 1;
            let power = match inner.drivers.load(&node) {
                Ok(interfaces) => interfaces.power,
                Err(error) => {
                    // A node whose driver cannot even be loaded counts as a failed read.
                    acted += usize::from(apply_logged(inner, &node, Err(error.to_string())).await?);
                    continue;
                }
            };
            read_count += 1;
            let bmc_limit = power.bmc_address(&node).map(|address| {
                per_bmc
                    .entry(address)
                    .or_insert_with(|| {
                        Arc::new(Semaphore::new(inner.config.power_sync_max_per_bmc.max(1)))
                    })
                    .clone()
            });
            let start_at = spread.map(|spread| started + spread * at / count);
            let inner = inner.clone();
            let total = total.clone();
            reads.spawn(async move {
                if let Some(start_at) = start_at {
                    tokio::time::sleep_until(start_at).await;
                }
                // The BMC's turn first, then a worker: waiting for a busy BMC holds no worker.
                let _bmc = match &bmc_limit {
                    Some(limit) => limit.clone().acquire_owned().await.ok(),
                    None => None,
                };
                let _worker = total.acquire_owned().await;
                read(inner, node, power).await
            });
        }
    }
    while let Some(joined) = reads.join_next().await {
        let Ok((node, result)) = joined else {
            continue;
        };
        acted += usize::from(apply_logged(inner, &node, result).await?);
    }
    tracing::info!(
        owned = owned.len(),
        read = read_count,
        changed = acted,
        took_ms = u64::try_from(pass_started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "power sync pass finished"
    );
    Ok(acted)
}

/// [`apply`], with a node that vanished or got busy meanwhile counted as untouched.
async fn apply_logged(
    inner: &Arc<Inner>,
    node: &Node,
    result: Result<PowerState, String>,
) -> Result<bool, ConductorError> {
    match apply(inner, node, result).await {
        Ok(changed) => Ok(changed),
        Err(ConductorError::NodeLocked { .. } | ConductorError::NodeNotFound(_)) => Ok(false),
        Err(error) => Err(error),
    }
}

/// Records one read; `true` if the node was changed.
async fn apply(
    inner: &Arc<Inner>,
    seen: &Node,
    result: Result<PowerState, String>,
) -> Result<bool, ConductorError> {
    let in_power_failure = seen.maintenance && seen.fault.as_deref() == Some(POWER_FAILURE);
    match result {
        Ok(power) => {
            lock(&inner.power_failures).remove(&seen.uuid);
            if !in_power_failure && seen.power_state == Some(power) {
                return Ok(false);
            }
            let mut task = Task::acquire(inner, seen.uuid).await?;
            let before = task.node.power_state;
            let changed = if task.node.target_power_state.is_some() {
                false
            } else if task.node.maintenance && task.node.fault.as_deref() == Some(POWER_FAILURE) {
                task.node.maintenance = false;
                task.node.maintenance_reason = None;
                task.node.fault = None;
                task.node.power_state = Some(power);
                task.history(
                    "INFO",
                    "maintenance",
                    format!(
                        "The BMC answers again (power state \"{power}\"); maintenance cleared."
                    ),
                )
                .await;
                true
            } else if task.node.power_state != Some(power) {
                let before = task
                    .node
                    .power_state
                    .map_or("unknown".to_owned(), |state| state.to_string());
                task.node.power_state = Some(power);
                task.history(
                    "INFO",
                    "power",
                    format!("Power state changed outside Ferric: \"{before}\" -> \"{power}\"."),
                )
                .await;
                true
            } else {
                false
            };
            let saved = if changed { task.save().await } else { Ok(()) };
            let after = task.node.clone();
            task.release().await;
            // Nova follows a machine powered on or off behind its back (Ironic's
            // `power_update` from the sync).
            if changed && saved.is_ok() && before != Some(power) {
                inner.power_events.announce(&after).await;
            }
            saved.map(|()| changed)
        }
        Err(reason) => {
            if in_power_failure {
                return Ok(false);
            }
            let failures = {
                let mut counts = lock(&inner.power_failures);
                let count = counts.entry(seen.uuid).or_insert(0);
                *count += 1;
                *count
            };
            tracing::warn!(node = %seen.uuid, failures, error = %reason, "power state read failed");
            if failures < inner.config.power_state_sync_max_retries {
                return Ok(false);
            }
            let mut task = Task::acquire(inner, seen.uuid).await?;
            let message = format!(
                "During sync_power_state, max retries exceeded for node {}, node state {} does \
                 not match expected state 'None'. Updating DB state to 'None' Switching node to \
                 maintenance mode. Error: {reason}",
                seen.uuid,
                seen.power_state
                    .map_or("None".to_owned(), |state| state.to_string()),
            );
            task.node.maintenance = true;
            task.node.fault = Some(POWER_FAILURE.to_owned());
            task.node.maintenance_reason = Some(message.clone());
            task.node.last_error = Some(message.clone());
            task.node.power_state = None;
            let saved = task.save().await;
            task.history("ERROR", "maintenance", message).await;
            task.release().await;
            lock(&inner.power_failures).remove(&seen.uuid);
            saved.map(|()| true)
        }
    }
}
