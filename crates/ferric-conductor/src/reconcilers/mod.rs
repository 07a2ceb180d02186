//! The conductor's reconcilers: background loops that bring nodes back to where they should
//! be — power-state sync, callback deadlines, recovery of work a dead conductor left — plus
//! the conductor's own heartbeat.
//!
//! Each one is periodic and can also be woken early; each run is idempotent (it looks at the
//! nodes as they are now and acts only on what needs it) and takes the node's lease for any
//! change, so reconcilers never fight the workers or each other. Each keeps a
//! [`ReconcilerStatus`] an operator can read (`GET /health` shows them).

pub(crate) mod power_sync;
pub(crate) mod recovery;
pub(crate) mod timeouts;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::Notify;

use crate::{ConductorConfig, ConductorError, Inner, lock};

/// What an operator can read about one reconciler.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReconcilerStatus {
    pub name: &'static str,
    pub description: &'static str,
    /// Seconds between runs; `None` when it only runs at start or is disabled.
    pub interval_seconds: Option<u64>,
    pub runs: u64,
    pub last_started_at: Option<DateTime<Utc>>,
    pub last_duration_ms: Option<u64>,
    /// Nodes the last run acted on.
    pub last_acted_on: usize,
    /// Why the last run failed, if it did.
    pub last_error: Option<String>,
}

pub(crate) const POWER_SYNC: &str = "power_sync";
pub(crate) const CALLBACK_TIMEOUTS: &str = "callback_timeouts";
pub(crate) const RECOVERY: &str = "recovery";
pub(crate) const HEARTBEAT: &str = "conductor_heartbeat";
pub(crate) const INSPECTOR_STATUS: &str = "inspector_status";

pub(crate) struct Registry {
    statuses: Mutex<BTreeMap<&'static str, ReconcilerStatus>>,
    wake: BTreeMap<&'static str, Arc<Notify>>,
}

impl Registry {
    pub(crate) fn new(config: &ConductorConfig) -> Self {
        let entries = [
            (
                POWER_SYNC,
                "Reads every node's power state from its BMC; puts nodes whose BMC keeps \
                 failing into maintenance (fault \"power failure\") and takes them out when it \
                 answers again.",
                config.sync_power_state_interval,
            ),
            (
                CALLBACK_TIMEOUTS,
                "Fails nodes that waited longer than their deadline for a callback (deploy, \
                 clean, inspect, rescue, service).",
                Some(config.check_provision_state_interval),
            ),
            (
                RECOVERY,
                "Fails nodes left in a transient state or with a pending power action by a \
                 conductor that died (its lease expired).",
                Some(config.check_provision_state_interval),
            ),
            (
                HEARTBEAT,
                "Records that this conductor is alive.",
                Some(config.heartbeat_interval),
            ),
            (
                INSPECTOR_STATUS,
                "Asks the inspection service about nodes it inspects (inspector interface) and \
                 moves finished ones to manageable or inspect failed.",
                config.inspector_status_interval,
            ),
        ];
        let mut statuses = BTreeMap::new();
        let mut wake = BTreeMap::new();
        for (name, description, interval) in entries {
            statuses.insert(
                name,
                ReconcilerStatus {
                    name,
                    description,
                    interval_seconds: interval.map(|interval| interval.as_secs()),
                    runs: 0,
                    last_started_at: None,
                    last_duration_ms: None,
                    last_acted_on: 0,
                    last_error: None,
                },
            );
            wake.insert(name, Arc::new(Notify::new()));
        }
        Self {
            statuses: Mutex::new(statuses),
            wake,
        }
    }

    pub(crate) fn statuses(&self) -> Vec<ReconcilerStatus> {
        lock(&self.statuses).values().cloned().collect()
    }

    fn record(
        &self,
        name: &'static str,
        started_at: DateTime<Utc>,
        took: Duration,
        result: &Result<usize, ConductorError>,
    ) {
        if let Some(status) = lock(&self.statuses).get_mut(name) {
            status.runs += 1;
            status.last_started_at = Some(started_at);
            status.last_duration_ms = Some(u64::try_from(took.as_millis()).unwrap_or(u64::MAX));
            match result {
                Ok(acted) => {
                    status.last_acted_on = *acted;
                    status.last_error = None;
                }
                Err(error) => status.last_error = Some(error.to_string()),
            }
        }
    }

    /// Wakes the reconciler `name` before its next period.
    pub(crate) fn wake(&self, name: &str) {
        if let Some(notify) = self.wake.get(name) {
            notify.notify_one();
        }
    }
}

/// Runs `name` once, recording its status.
pub(crate) async fn run_named(
    inner: &Arc<Inner>,
    name: &str,
    now: DateTime<Utc>,
) -> Result<usize, ConductorError> {
    run_paced(inner, name, now, None).await
}

/// [`run_named`]; `spread` lets the power sync start its reads evenly over that long.
async fn run_paced(
    inner: &Arc<Inner>,
    name: &str,
    now: DateTime<Utc>,
    spread: Option<Duration>,
) -> Result<usize, ConductorError> {
    let (name, started) = match name {
        POWER_SYNC => (POWER_SYNC, Instant::now()),
        CALLBACK_TIMEOUTS => (CALLBACK_TIMEOUTS, Instant::now()),
        RECOVERY => (RECOVERY, Instant::now()),
        HEARTBEAT => (HEARTBEAT, Instant::now()),
        INSPECTOR_STATUS => (INSPECTOR_STATUS, Instant::now()),
        other => {
            return Err(ConductorError::Invalid(format!(
                "There is no reconciler named \"{other}\"; known: {POWER_SYNC}, \
                 {CALLBACK_TIMEOUTS}, {RECOVERY}, {HEARTBEAT}, {INSPECTOR_STATUS}."
            )));
        }
    };
    let result = match name {
        POWER_SYNC => power_sync::run_once(inner, spread).await,
        CALLBACK_TIMEOUTS => timeouts::run_once(inner, now).await,
        RECOVERY => recovery::run_once(inner).await,
        INSPECTOR_STATUS => crate::inspection::poll_service(inner).await,
        _ => heartbeat(inner).await,
    };
    inner
        .reconcilers
        .record(name, Utc::now(), started.elapsed(), &result);
    if let Err(error) = &result {
        tracing::warn!(reconciler = name, error = %error, "reconciler run failed");
    }
    result
}

/// Records that this conductor is alive, then re-reads who else is (the hash ring) and drops
/// conductor requests nobody waits for any more.
async fn heartbeat(inner: &Inner) -> Result<usize, ConductorError> {
    match inner
        .store
        .conductor_heartbeat(&inner.config.hostname)
        .await
    {
        Ok(_) => {}
        // Deleted as stale while we were away (or never registered): register again.
        Err(ferric_db::Error::NotFound { .. }) => inner.register().await?,
        Err(error) => return Err(error.into()),
    }
    inner.refresh_membership().await?;
    crate::requests::purge(inner).await;
    Ok(1)
}

/// Starts every enabled reconciler's loop; they stop when the conductor shuts down.
pub(crate) fn spawn_all(inner: Arc<Inner>) {
    let periods = [
        (HEARTBEAT, Some(inner.config.heartbeat_interval)),
        (POWER_SYNC, inner.config.sync_power_state_interval),
        (
            CALLBACK_TIMEOUTS,
            Some(inner.config.check_provision_state_interval),
        ),
        (RECOVERY, Some(inner.config.check_provision_state_interval)),
        (INSPECTOR_STATUS, inner.config.inspector_status_interval),
    ];
    for (name, period) in periods {
        let Some(period) = period.filter(|period| !period.is_zero()) else {
            continue;
        };
        let inner = inner.clone();
        let Some(wake) = inner.reconcilers.wake.get(name).cloned() else {
            continue;
        };
        tokio::spawn(async move {
            loop {
                let woken = tokio::select! {
                    () = inner.shutdown.cancelled() => return,
                    () = tokio::time::sleep(period) => false,
                    () = wake.notified() => true,
                };
                // The periodic power sync spreads its reads over half the period (see
                // power_sync.rs); one woken on purpose answers at once.
                let spread = (name == POWER_SYNC && !woken).then(|| period / 2);
                let _ = run_paced(&inner, name, inner.store.now(), spread).await;
            }
        });
    }
}
