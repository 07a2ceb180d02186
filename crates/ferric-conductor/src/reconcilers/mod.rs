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
mod registry;
pub(crate) mod switch_drift;
pub(crate) mod timeouts;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

pub use registry::ReconcilerStatus;
pub(crate) use registry::{
    CALLBACK_TIMEOUTS, HEARTBEAT, INSPECTOR_STATUS, POWER_SYNC, RECOVERY, Registry, SWITCH_DRIFT,
};

use crate::{ConductorError, Inner};

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
        SWITCH_DRIFT => (SWITCH_DRIFT, Instant::now()),
        other => {
            return Err(ConductorError::Invalid(format!(
                "There is no reconciler named \"{other}\"; known: {POWER_SYNC}, \
                 {CALLBACK_TIMEOUTS}, {RECOVERY}, {HEARTBEAT}, {INSPECTOR_STATUS}, \
                 {SWITCH_DRIFT}."
            )));
        }
    };
    let result = match name {
        POWER_SYNC => power_sync::run_once(inner, spread).await,
        CALLBACK_TIMEOUTS => timeouts::run_once(inner, now).await,
        RECOVERY => recovery::run_once(inner).await,
        INSPECTOR_STATUS => crate::inspection::poll_service(inner).await,
        SWITCH_DRIFT => switch_drift::run_once(inner).await,
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
        (SWITCH_DRIFT, inner.config.switch_drift_check_interval),
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
