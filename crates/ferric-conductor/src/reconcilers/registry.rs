//! The reconcilers' registry: their names, the status an operator reads of each, and the
//! signal that wakes one early. Below everything else, as the conductor's shared state holds it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::Notify;

use crate::config::ConductorConfig;
use crate::error::ConductorError;
use crate::mutex::lock;

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
pub(crate) const SWITCH_DRIFT: &str = "switch_drift";

pub(crate) struct Registry {
    statuses: Mutex<BTreeMap<&'static str, ReconcilerStatus>>,
    pub(super) wake: BTreeMap<&'static str, Arc<Notify>>,
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
            (
                SWITCH_DRIFT,
                "Reads back every switch port the ironic-networking interface manages; reports \
                 a port found on another VLAN (node history, metric) and repairs it \
                 (switch_drift_repair) or puts the node into maintenance (fault \"switch port \
                 drift\").",
                config.switch_drift_check_interval,
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

    pub(super) fn record(
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
