//! Ferric's conductor: the only code that changes a node's provision and power state.
//!
//! Theory of operation: the API validates a request and calls the conductor
//! ([`Conductor::provision`], [`Conductor::set_power`], …). The conductor takes a worker slot
//! (none free → [`ConductorError::NoFreeWorker`], HTTP 503), takes the node's lease (held →
//! [`ConductorError::NodeLocked`], 409), re-checks the request against the node as it is now,
//! and takes the first transition — saved, with a history entry — before it returns. Only
//! then does the API answer 202, so an accepted request is never lost: if the process dies
//! right after, the node sits in a transient state with nobody's live lease on it, and the
//! recovery reconciler moves it to the matching failed state with a `last_error` that says
//! what happened. The rest of the work runs in a spawned worker that holds the lease (renewed
//! in the background) until the node reaches a stable, waiting or failed state.
//!
//! Waiting states (`wait call-back`, `clean wait`, …) hold no lease: the node waits for a
//! callback ([`Conductor::continue_node`], called for agent heartbeats) or for its deadline,
//! which the timeout reconciler enforces. Reconcilers ([`reconcilers`]) are periodic,
//! idempotent, can be woken early, and keep a status an operator can read.
//!
//! Tests step this machine instead of sleeping: [`Conductor::wait_idle`] waits for running
//! workers, and every reconciler has a `run_once`.
//!
//! At start the conductor takes its name's liveness lock (`ferric_db::ConductorLock`: refused at
//! once, naming the holder, when another live process has it) and then registers; it checks the
//! lock every second (`check_liveness`) and gives it up last at shutdown. Metrics:
//! [`Conductor::metrics`] is the registry taken from its `Drivers`, and [`Conductor::worker_pool`]
//! reports the worker slots.

mod abort_signal;
pub mod agent;
pub mod allocations;
mod autodetect;
mod catalog;
mod config;
mod console;
mod console_hub;
mod console_relay;
mod error;
mod flows;
mod hardware_data;
mod inspection;
mod mutex;
mod networking;
mod power;
pub mod power_events;
mod priority_override;
mod provision;
pub mod reconcilers;
mod requests;
pub mod ring;
mod shared;
mod steps;
mod task;
mod templates;
mod vendor;
mod view;
mod vmedia;

use std::sync::Arc;
use std::time::Duration;

use ferric_db::Store;
use ferric_drivers::Drivers;

pub use agent::{AgentToken, Heartbeat};
pub use config::{ConductorConfig, default_hostname};
pub use console_hub::{ConsoleHub, ConsoleInfo, ConsoleSettings};
pub use error::ConductorError;
pub use power::{NodeValidation, ValidationResult};
pub use power_events::PowerEvents;
pub use priority_override::PriorityOverride;
pub use provision::ProvisionArgs;
pub use reconcilers::ReconcilerStatus;
pub use requests::Handoff;
pub use ring::{HashRing, Membership, Rings};
pub use shared::Conductor;
pub use vendor::VendorReply;

pub(crate) use mutex::lock;
pub(crate) use shared::{Busy, Inner};

/// Checks this conductor's lock and the others' every [`ring::LIVENESS_INTERVAL`] until
/// shutdown.
fn spawn_liveness(inner: Arc<Inner>) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = inner.shutdown.cancelled() => return,
                () = tokio::time::sleep(ring::LIVENESS_INTERVAL) => {}
            }
            if let Err(error) = inner.check_liveness().await {
                tracing::warn!(%error, "could not check which conductors are alive");
            }
        }
    });
}

impl Conductor {
    /// A conductor over `store` driving the hardware types in `drivers`. Nothing runs until
    /// [`Conductor::start`].
    pub fn new(store: Store, drivers: Drivers, config: ConductorConfig) -> Self {
        Self {
            inner: Arc::new(Inner::new(store, drivers, config)),
        }
    }

    /// Installs the receiver of power changes of nodes that hold an instance (Nova's
    /// `power-update`); without one, nobody is told.
    pub fn set_power_events(&self, events: Arc<dyn PowerEvents>) {
        self.inner.power_events.set(events);
    }

    pub fn hostname(&self) -> &str {
        &self.inner.config.hostname
    }

    pub fn drivers(&self) -> &Drivers {
        &self.inner.drivers
    }

    pub fn config(&self) -> &ConductorConfig {
        &self.inner.config
    }

    /// This process's view of the alive conductors (shared with its API, see [`Handoff`]).
    pub fn membership(&self) -> &Membership {
        &self.inner.membership
    }

    /// Registers this conductor, recovers what a previous incarnation left behind (its
    /// leases, nodes stuck in transient states) and, unless `periodic` is off, starts the
    /// heartbeat and the reconcilers.
    pub async fn start(&self) -> Result<(), ConductorError> {
        let inner = &self.inner;
        // First the name: the leases under it are another live conductor's if it is taken.
        inner.register_at_start().await?;
        inner
            .store
            .node_lease_release_all(&inner.config.hostname)
            .await?;
        inner.membership.refresh().await?;
        reconcilers::recovery::run_once(inner).await?;
        // Allocations a previous life was matching are matched again.
        allocations::recover(inner, true).await?;
        // Consoles enabled before a restart come back (Ironic's `_start_consoles`).
        if let Err(error) = console::sync_once(inner).await {
            tracing::warn!(%error, "could not restore the enabled consoles");
        }
        if inner.config.periodic {
            reconcilers::spawn_all(inner.clone());
            // On SQLite this process is the only conductor, and its file lock cannot be lost:
            // nothing to look at every second (and the idle server's connections may close).
            if inner.store.is_shared() {
                spawn_liveness(inner.clone());
            }
            console::spawn_sync(inner.clone());
        }
        if inner.store.is_shared() {
            requests::spawn_server(inner.clone()).await?;
        }
        Ok(())
    }

    /// Leaves the hash ring and stops taking work (new requests go to the other conductors),
    /// waits up to `grace` for running workers, then releases this conductor's leases. Work
    /// still running after `grace` is recovered (failed with `last_error`) by the node's new
    /// owner once the released lease is seen.
    pub async fn shutdown(&self, grace: Duration) {
        let inner = &self.inner;
        inner.shutdown.cancel();
        inner.consoles.stop_all();
        inner.unregister().await;
        inner.tracker.close();
        if tokio::time::timeout(grace, inner.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                running = inner.tracker.len(),
                "conductor workers still running at shutdown; their nodes will be recovered at \
                 the next start"
            );
        }
        if let Err(error) = inner
            .store
            .node_lease_release_all(&inner.config.hostname)
            .await
        {
            tracing::warn!(error = %error, "could not release leases at shutdown");
        }
        // Again: a heartbeat that was under way at the first call may have set it online.
        inner.unregister().await;
        let held = lock(&inner.lock).take();
        if let Some(held) = held.and_then(Arc::into_inner) {
            held.release().await;
        }
    }

    /// Waits until no worker runs (tests use this to step the conductor).
    pub async fn wait_idle(&self) {
        loop {
            if self.inner.tracker.is_empty() {
                return;
            }
            self.inner.tracker.close();
            self.inner.tracker.wait().await;
            self.inner.tracker.reopen();
        }
    }

    /// The status of every reconciler.
    pub fn reconciler_status(&self) -> Vec<ReconcilerStatus> {
        self.inner.reconcilers.statuses()
    }

    /// Runs the reconciler `name` once, now (tests, and `ferric` operators poking one).
    pub async fn run_reconciler(&self, name: &str) -> Result<usize, ConductorError> {
        reconcilers::run_named(&self.inner, name, self.inner.store.now()).await
    }

    /// Runs the reconciler `name` once as if the clock read `now` (tests of deadlines).
    pub async fn run_reconciler_at(
        &self,
        name: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<usize, ConductorError> {
        reconcilers::run_named(&self.inner, name, now).await
    }

    /// Wakes the reconciler `name` before its next period (e.g. after an operator fixed a
    /// BMC and wants the power sync to notice now).
    pub fn wake_reconciler(&self, name: &str) {
        self.inner.reconcilers.wake(name);
    }

    /// How many workers are free.
    pub fn free_workers(&self) -> usize {
        self.inner.workers.available_permits()
    }

    /// The process's metrics (the registry its drivers were given).
    pub fn metrics(&self) -> &ferric_metrics::Metrics {
        &self.inner.metrics
    }

    /// The worker pool, for `GET /metrics`.
    pub fn worker_pool(&self) -> ferric_metrics::WorkerPool {
        let free = self.free_workers();
        ferric_metrics::WorkerPool {
            in_use: self.inner.config.workers.saturating_sub(free),
            free,
        }
    }
}
