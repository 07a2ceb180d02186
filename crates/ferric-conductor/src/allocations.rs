//! Allocations in the background (`reference/ironic.md` §2.7): the API stores a new
//! allocation as `allocating` and answers 201 at once; the matching runs here, as Ironic's
//! conductor runs `do_allocate`, and moves it to `active` or `error`. Clients poll.
//!
//! Theory of operation: [`process`] lists the free available nodes of the resource class,
//! keeps those with every requested trait (and among the candidates, and of the owner), and
//! claims one with a revision-guarded node write that also copies the allocation's traits
//! into the node's `instance_info.traits` (so deploy templates chosen by trait apply, as
//! Ironic's database layer does). Two allocations racing for a node cannot both win; the
//! loser tries the next match. The allocation is then written over the revision it was read
//! at, so two processors of one allocation (a re-run racing the first run) cannot both
//! finish it: the loser gives its node back. Nothing here holds a transaction across
//! anything, and no provision state changes: allocations only reserve.
//!
//! An allocation left `allocating` by a process that died is found by [`recover`], which the
//! recovery reconciler runs at start and periodically, and processed again: re-running is
//! safe for the reasons above.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use ferric_db::{AllocationFilter, AllocationSortKey, NodeFilter, NodeSortKey, Page, Store};
use ferric_model::ProvisionState;
use ferric_model::resources::{Allocation, AllocationState, Ident, Node};
use serde_json::Value;

use crate::{Conductor, ConductorError, Inner, lock};

/// How old an `allocating` allocation must be before a periodic recovery run processes it
/// again: one being processed right now (by this or another process) is normally done well
/// within it. At start every one is taken: nothing of this process runs yet.
const STALE_AFTER: Duration = Duration::from_secs(30);

impl Conductor {
    /// Processes a freshly stored `allocating` allocation in the background; its state shows
    /// the outcome.
    pub fn allocate(&self, allocation: Allocation) {
        spawn(&self.inner, allocation);
    }
}

fn spawn(inner: &Arc<Inner>, allocation: Allocation) {
    let uuid = allocation.uuid;
    if !lock(&inner.allocating).insert(uuid) {
        return;
    }
    let worker = inner.clone();
    inner.tracker.spawn(async move {
        if let Err(error) = process(&worker.store, allocation).await {
            tracing::error!(allocation = %uuid, %error, "could not process the allocation");
        }
        lock(&worker.allocating).remove(&uuid);
    });
}

/// Finds and claims a node for `allocation`, which must be stored and `allocating`; returns
/// it `active` or `error` (with `last_error`), or as it is when someone else finished it.
pub async fn process(
    store: &Store,
    allocation: Allocation,
) -> Result<Allocation, ferric_db::Error> {
    let filter = NodeFilter {
        provision_state: Some(ProvisionState::Available),
        maintenance: Some(false),
        associated: Some(false),
        allocated: Some(false),
        resource_class: allocation.resource_class.clone(),
        ..NodeFilter::default()
    };
    // A node named as the allocation is tried first, as Ironic's conductor does (API 1.79
    // documents it; the conductor does it whatever the request's version).
    if let Some(named) = named_node(store, &allocation).await?
        && let Some(done) = claim(store, &allocation, &named).await?
    {
        return Ok(done);
    }
    let mut page = Page::<NodeSortKey>::first(1000);
    let mut saw_any = false;
    loop {
        let nodes = store.node_list(&filter, &page).await?;
        saw_any |= !nodes.is_empty();
        for node in nodes.iter().filter(|node| matches(&allocation, node)) {
            if let Some(done) = claim(store, &allocation, node).await? {
                return Ok(done);
            }
        }
        match nodes.last() {
            Some(last) if nodes.len() == 1000 => page = page.after(last.uuid),
            _ => break,
        }
    }
    let resource_class = allocation.resource_class.clone().unwrap_or_default();
    let why = if !saw_any {
        format!("no available nodes match the resource class {resource_class}")
    } else if !allocation.candidate_nodes.is_empty() {
        format!(
            "none of the requested nodes are available and match the resource class \
             {resource_class}"
        )
    } else {
        format!(
            "no available nodes match the requested traits {}",
            allocation.traits.join(", ")
        )
    };
    let message = format!("Failed to process allocation {}: {why}.", allocation.uuid);
    fail(store, allocation, message).await
}

/// The node whose name is the allocation's, when it is free, available and matches it.
async fn named_node(
    store: &Store,
    allocation: &Allocation,
) -> Result<Option<Node>, ferric_db::Error> {
    let Some(name) = allocation.name.as_deref() else {
        return Ok(None);
    };
    let node = match store.node_get(&Ident::Name(name.to_owned())).await {
        Ok(node) => node,
        Err(ferric_db::Error::NotFound { .. }) => return Ok(None),
        Err(other) => return Err(other),
    };
    let free = node.provision_state == ProvisionState::Available
        && !node.maintenance
        && node.instance_uuid.is_none()
        && node.allocation_uuid.is_none()
        && (allocation.resource_class.is_none()
            || node.resource_class == allocation.resource_class);
    Ok((free && matches(allocation, &node)).then_some(node))
}

/// Records that `allocation` failed, unless someone else finished it first.
async fn fail(
    store: &Store,
    allocation: Allocation,
    message: String,
) -> Result<Allocation, ferric_db::Error> {
    let mut failed = allocation.clone();
    failed.state = AllocationState::Error;
    failed.node_uuid = None;
    failed.last_error = Some(message);
    match store.allocation_update(&failed, allocation.version).await {
        Err(ferric_db::Error::StaleRevision { .. }) => {
            store.allocation_get(&Ident::Uuid(allocation.uuid)).await
        }
        other => other,
    }
}

/// Whether `node` satisfies `allocation` beyond what the store filtered (traits, candidates,
/// owner).
pub fn matches(allocation: &Allocation, node: &Node) -> bool {
    let traits = allocation
        .traits
        .iter()
        .all(|wanted| node.traits.contains(wanted));
    let candidate = allocation.candidate_nodes.is_empty()
        || allocation.candidate_nodes.contains(&node.uuid.to_string());
    let owner = allocation.owner.as_ref().is_none_or(|owner| {
        node.owner.as_ref() == Some(owner) || node.lessee.as_ref() == Some(owner)
    });
    traits && candidate && owner
}

/// Claims `node` for `allocation` (node first, guarded by its revision), then marks the
/// allocation `active` over the revision it was read at. `None` when someone else changed
/// the node first: the caller tries the next one.
async fn claim(
    store: &Store,
    allocation: &Allocation,
    node: &Node,
) -> Result<Option<Allocation>, ferric_db::Error> {
    let mut claimed = node.clone();
    claimed.allocation_uuid = Some(allocation.uuid);
    claimed.instance_uuid = Some(allocation.uuid);
    // Ironic writes the allocation's traits (an empty list when it asked for none).
    claimed
        .instance_info
        .insert("traits".to_owned(), Value::from(allocation.traits.clone()));
    let claimed = match store.node_update(&claimed, node.version).await {
        Ok(claimed) => claimed,
        Err(
            ferric_db::Error::StaleRevision { .. }
            | ferric_db::Error::NotFound { .. }
            | ferric_db::Error::Duplicate { .. },
        ) => return Ok(None),
        Err(other) => return Err(other),
    };
    let mut active = allocation.clone();
    active.state = AllocationState::Active;
    active.node_uuid = Some(node.uuid);
    active.last_error = None;
    match store.allocation_update(&active, allocation.version).await {
        Ok(active) => Ok(Some(active)),
        Err(error) => {
            // Finished by someone else, deleted meanwhile, or a failed write: the node goes
            // back as it was, so no node points at an allocation that does not point back.
            let mut freed = claimed.clone();
            freed.allocation_uuid = node.allocation_uuid;
            freed.instance_uuid = node.instance_uuid;
            freed.instance_info = node.instance_info.clone();
            if let Err(undo) = store.node_update(&freed, claimed.version).await {
                tracing::warn!(node = %node.uuid, allocation = %allocation.uuid, error = %undo, "could not give back a node claimed for an allocation");
            }
            match error {
                ferric_db::Error::StaleRevision { .. } | ferric_db::Error::NotFound { .. } => store
                    .allocation_get(&Ident::Uuid(allocation.uuid))
                    .await
                    .map(Some),
                other => Err(other),
            }
        }
    }
}

/// Processes again the allocations left `allocating` (by a process that died while it
/// matched them): those older than [`STALE_AFTER`], or all of them when `at_start`. Returns
/// how many it started.
pub(crate) async fn recover(inner: &Arc<Inner>, at_start: bool) -> Result<usize, ConductorError> {
    let filter = AllocationFilter {
        state: Some(AllocationState::Allocating),
        ..AllocationFilter::default()
    };
    let stale_before = Utc::now() - STALE_AFTER;
    let mut started = 0;
    let mut page = Page::<AllocationSortKey>::first(1000);
    let mut seen = HashSet::new();
    loop {
        let allocations = inner.store.allocation_list(&filter, &page).await?;
        let last = allocations.last().map(|allocation| allocation.uuid);
        let full = allocations.len() == 1000;
        for allocation in allocations {
            let stale =
                at_start || allocation.updated_at.unwrap_or(allocation.created_at) < stale_before;
            if !stale || !seen.insert(allocation.uuid) {
                continue;
            }
            tracing::info!(allocation = %allocation.uuid, "processing an allocation left allocating");
            spawn(inner, allocation);
            started += 1;
        }
        match last {
            Some(last) if full => page = page.after(last),
            _ => break,
        }
    }
    Ok(started)
}
