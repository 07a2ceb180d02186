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

mod abort;
pub mod agent;
pub mod allocations;
mod autodetect;
mod catalog;
mod console;
mod console_relay;
mod error;
mod hardware_data;
mod inspection;
mod power;
pub mod power_events;
mod priority_override;
mod provision;
pub mod reconcilers;
mod requests;
pub mod ring;
mod steps;
mod task;
mod templates;
mod vendor;
mod view;
mod vmedia;
mod worker;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferric_db::{ConductorLock, Store};
use ferric_drivers::Drivers;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

pub use agent::{AgentToken, Heartbeat};
pub use console::{ConsoleHub, ConsoleInfo, ConsoleSettings};
pub use error::ConductorError;
pub use power::{NodeValidation, ValidationResult};
pub use power_events::PowerEvents;
pub use priority_override::PriorityOverride;
pub use provision::ProvisionArgs;
pub use reconcilers::ReconcilerStatus;
pub use requests::Handoff;
pub use ring::{HashRing, Membership, Rings};
pub use vendor::VendorReply;

/// The conductor's settings (`reference/ironic.md` §6.4 for the defaults mirrored here).
#[derive(Debug, Clone)]
pub struct ConductorConfig {
    /// This conductor's name in leases, history and `GET /v1/conductors`; unique per process.
    pub hostname: String,
    pub conductor_group: String,
    /// How many tasks may run at once; more requests get 503.
    pub workers: usize,
    /// How long a lease lasts without renewal; a dead conductor's nodes are taken over after it.
    pub lease_ttl: Duration,
    /// How often the conductor records that it is alive.
    pub heartbeat_interval: Duration,
    /// How old a conductor's last heartbeat may be before the others count it dead and drop
    /// it from the hash ring (its nodes move to the remaining conductors).
    pub heartbeat_timeout: Duration,
    /// How long an API process waits for another conductor to answer a request it handed
    /// over before it answers 503.
    pub request_timeout: Duration,
    /// The hand-off version this process sends to other conductors: its own, or an older
    /// one it is pinned to while a rolling upgrade runs (`pin_handoff_version`).
    pub handoff: ferric_model::action::HandoffVersion,
    /// Whether `provide` and undeploy run automated cleaning (a node's own
    /// `automated_clean=false` also skips it).
    pub automated_clean: bool,
    /// Power-state sync period; `None` disables it.
    pub sync_power_state_interval: Option<Duration>,
    /// Failed power reads in a row before a node goes into maintenance (`fault: power failure`).
    pub power_state_sync_max_retries: u32,
    /// How many power reads the power sync has in flight at once, in total (they are
    /// asynchronous requests, not threads: hundreds cost little).
    pub power_sync_workers: usize,
    /// How many of them may go to one BMC at once.
    pub power_sync_max_per_bmc: usize,
    /// How long one BMC may take to answer a power read before it counts as failed.
    pub power_sync_timeout: Duration,
    /// Period of the callback-timeout and recovery reconcilers.
    pub check_provision_state_interval: Duration,
    pub deploy_callback_timeout: Option<Duration>,
    pub clean_callback_timeout: Option<Duration>,
    pub inspect_wait_timeout: Option<Duration>,
    pub rescue_callback_timeout: Option<Duration>,
    pub service_callback_timeout: Option<Duration>,
    /// Whether [`Conductor::start`] runs the reconcilers periodically (tests step them).
    pub periodic: bool,
    /// Fast track (§3): agents may look nodes up and heartbeat in resting states, and a node
    /// whose agent is up skips the reboot into the ramdisk.
    pub fast_track: bool,
    /// How long an agent may stay silent; it heartbeats at 30–60 % of this.
    pub agent_heartbeat_timeout: Duration,
    /// Ironic's `[agent]require_tls`: heartbeats whose callback URL is not `https://` are
    /// refused, so no agent token is sent to an agent in clear text.
    pub agent_require_tls: bool,
    /// Ironic's `[agent]enable_bios_bootloader_install`, sent to agents at lookup: whether an
    /// agent may run a deployed image's own `grub-install` to make a BIOS node bootable.
    pub agent_enable_bios_bootloader_install: bool,
    /// The oldest TLS version (`1.2` or `1.3`) and the cipher suites (IANA names; empty: the
    /// library's defaults) agents are told to accept on their own HTTPS API, at lookup.
    pub tls_min_version: String,
    pub tls_cipher_suites: Vec<String>,
    /// How the `agent` inspect interface's data is processed (`add_ports`, overwriting).
    pub inspection: ferric_inspector::ProcessingConfig,
    /// How often nodes inspected through the inspection service are polled; `None`: never.
    pub inspector_status_interval: Option<Duration>,
    /// Ironic's `[conductor]clean_step_priority_override`: automated cleaning runs these
    /// steps, the driver's or the agent's, at these priorities (0: not at all).
    pub clean_step_priority_override: Vec<PriorityOverride>,
    /// Serial consoles: output kept per node, where the TCP relays listen.
    pub console: ConsoleSettings,
}

impl Default for ConductorConfig {
    fn default() -> Self {
        let half_hour = Some(Duration::from_secs(1800));
        Self {
            hostname: default_hostname(),
            conductor_group: String::new(),
            workers: 300,
            lease_ttl: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(10),
            heartbeat_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            handoff: ferric_model::action::HandoffVersion::default(),
            automated_clean: true,
            sync_power_state_interval: Some(Duration::from_secs(120)),
            power_state_sync_max_retries: 3,
            power_sync_workers: 256,
            power_sync_max_per_bmc: 2,
            power_sync_timeout: Duration::from_secs(60),
            check_provision_state_interval: Duration::from_secs(60),
            deploy_callback_timeout: half_hour,
            clean_callback_timeout: half_hour,
            inspect_wait_timeout: half_hour,
            rescue_callback_timeout: half_hour,
            service_callback_timeout: half_hour,
            periodic: true,
            fast_track: false,
            agent_heartbeat_timeout: Duration::from_secs(300),
            agent_require_tls: false,
            agent_enable_bios_bootloader_install: false,
            tls_min_version: "1.3".to_owned(),
            tls_cipher_suites: Vec::new(),
            inspection: ferric_inspector::ProcessingConfig::default(),
            inspector_status_interval: Some(Duration::from_secs(60)),
            clean_step_priority_override: Vec::new(),
            console: ConsoleSettings::default(),
        }
    }
}

/// The machine's host name, or `ferric` when it cannot be read.
pub fn default_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "ferric".to_owned())
}

/// A handle on the conductor; cheap to clone.
#[derive(Clone)]
pub struct Conductor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Conductor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conductor")
            .field("hostname", &self.inner.config.hostname)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) drivers: Drivers,
    pub(crate) config: ConductorConfig,
    workers: Arc<Semaphore>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Nodes a task of this process works on right now, each with the token that tells that
    /// task an abort was accepted (`abort.rs`).
    busy: Mutex<HashMap<Uuid, BusyMark>>,
    /// Allocations this process is matching (`allocations.rs`).
    pub(crate) allocating: allocations::Allocating,
    /// Inspection data posted to `/v1/continue_inspection`, handed to the worker that
    /// processes it (in this process: the API calls the conductor directly).
    pub(crate) inspection_data: Mutex<HashMap<Uuid, serde_json::Value>>,
    /// Failed power reads in a row, per node (the power-sync reconciler's memory).
    pub(crate) power_failures: Mutex<HashMap<Uuid, u32>>,
    /// Who is told when a node holding an instance changes power (`power_events.rs`).
    pub(crate) power_events: power_events::Receiver,
    pub(crate) reconcilers: reconcilers::Registry,
    /// Transitions, failures and time per state are counted here (the drivers' registry).
    pub(crate) metrics: ferric_metrics::Metrics,
    /// Which conductors are alive, and so which nodes are this conductor's (`ring.rs`).
    pub(crate) membership: Membership,
    /// The consoles this conductor relays (`console.rs`).
    pub(crate) consoles: console::Consoles,
    /// The lock that proves this conductor alive (`ferric_db::ConductorLock`), from start
    /// until shutdown.
    lock: Mutex<Option<Arc<ConductorLock>>>,
}

/// Locks a mutex whose data stays consistent even if a holder panicked (plain sets and maps).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A node a task of this process works on (`Inner::busy`).
struct BusyMark {
    /// Tells the task an abort was accepted (`abort.rs`).
    abort: CancellationToken,
    /// The task's last write, which gives the lease back, is committing or committed: the
    /// mark goes next (`task.rs`).
    ending: bool,
}

/// What [`Inner::mark_busy`] found.
pub(crate) enum Busy {
    /// The node is marked for the caller now; its abort token.
    Marked(CancellationToken),
    /// A task here works on the node.
    Working,
    /// A task here has given the node's lease back with its last write and is about to unmark
    /// it: worth a moment's wait.
    Ending,
}

impl Inner {
    /// Marks `node` busy, unless a task here already works on it.
    pub(crate) fn mark_busy(&self, node: Uuid) -> Busy {
        let mut busy = lock(&self.busy);
        if let Some(mark) = busy.get(&node) {
            return if mark.ending {
                Busy::Ending
            } else {
                Busy::Working
            };
        }
        let token = CancellationToken::new();
        busy.insert(
            node,
            BusyMark {
                abort: token.clone(),
                ending: false,
            },
        );
        Busy::Marked(token)
    }

    /// Says whether the task marking `node` is giving its lease back with its last write.
    pub(crate) fn mark_ending(&self, node: Uuid, ending: bool) {
        if let Some(mark) = lock(&self.busy).get_mut(&node) {
            mark.ending = ending;
        }
    }

    pub(crate) fn unmark_busy(&self, node: Uuid) {
        lock(&self.busy).remove(&node);
    }

    pub(crate) fn is_busy(&self, node: Uuid) -> bool {
        lock(&self.busy).contains_key(&node)
    }

    /// Tells the task working on `node` in this process, if any, that an abort was accepted.
    pub(crate) fn signal_abort(&self, node: Uuid) {
        if let Some(mark) = lock(&self.busy).get(&node) {
            mark.abort.cancel();
        }
    }

    /// Whether `node` is this conductor's by the hash ring, so its reconcilers look after
    /// it. Before the first membership read (a conductor that was never started, as unit
    /// tests build them) every node is: there is nobody else.
    pub(crate) fn owns(&self, node: &ferric_model::resources::Node) -> bool {
        self.owns_head(&node.conductor_group, &node.driver, node.uuid)
    }

    /// [`Inner::owns`] from the three fields the ring needs (a `NodeHead`'s), so a reconciler
    /// can pick its nodes before reading whole rows.
    pub(crate) fn owns_head(&self, group: &str, driver: &str, uuid: uuid::Uuid) -> bool {
        let rings = self.membership.rings();
        !rings.is_loaded()
            || rings.owner_of(group, driver, uuid) == Some(self.config.hostname.as_str())
    }

    /// Re-reads the alive conductors; when the ring changed, wakes the reconcilers that take
    /// over nodes (recovery, callback deadlines) so a dead conductor's nodes move at once.
    pub(crate) async fn refresh_membership(&self) -> Result<bool, ConductorError> {
        let changed = self.membership.refresh().await?;
        if changed {
            self.reconcilers.wake(reconcilers::RECOVERY);
            self.reconcilers.wake(reconcilers::CALLBACK_TIMEOUTS);
        }
        Ok(changed)
    }

    /// A worker slot for a request, or why there is none (503).
    pub(crate) fn take_worker(&self) -> Result<OwnedSemaphorePermit, ConductorError> {
        if self.shutdown.is_cancelled() {
            return Err(ConductorError::ShuttingDown);
        }
        self.workers
            .clone()
            .try_acquire_owned()
            .map_err(|_| ConductorError::NoFreeWorker {
                workers: self.config.workers,
            })
    }

    /// Registers (or re-registers) this conductor, under its lock, with the hardware types
    /// it serves, and tells the other processes to rebuild their rings now rather than at
    /// their next heartbeat.
    pub(crate) async fn register(&self) -> Result<(), ConductorError> {
        let Some(lock) = lock(&self.lock).clone() else {
            return Err(ConductorError::ShuttingDown);
        };
        let drivers: Vec<String> = self
            .drivers
            .enabled()
            .iter()
            .map(|hardware_type| hardware_type.name.to_owned())
            .collect();
        self.store
            .conductor_register_locked(&lock, &self.config.conductor_group, &drivers)
            .await?;
        self.store
            .notify(ferric_db::MEMBERSHIP_CHANNEL, &self.config.hostname)
            .await?;
        Ok(())
    }

    /// Takes this conductor's name at start-up: its liveness lock (`ferric_db::ConductorLock`),
    /// then the registration. The lock dies with the process that held it, so the name of a
    /// run that crashed is free at once and a restart takes it back without waiting, while a
    /// live conductor under the name — which holds the lock — is refused at once
    /// ([`ConductorError::NameTaken`], naming the holder). A holder whose connection hangs
    /// (its heartbeat older than `heartbeat_timeout`) is ended on PostgreSQL.
    async fn register_at_start(&self) -> Result<(), ConductorError> {
        let taken = self
            .store
            .conductor_lock(&self.config.hostname, self.config.heartbeat_timeout)
            .await?;
        *lock(&self.lock) = Some(Arc::new(taken));
        self.register().await
    }

    /// Checks that this conductor still holds its lock (on PostgreSQL a session that broke is
    /// opened again and the lock taken again), then re-reads who else is alive. Run every
    /// [`ring::LIVENESS_INTERVAL`] on PostgreSQL: this is how a crashed conductor's nodes move
    /// within about a second.
    pub(crate) async fn check_liveness(&self) -> Result<(), ConductorError> {
        let held = lock(&self.lock).clone();
        if let Some(held) = held
            && let Err(error) = held.check(&self.store).await
        {
            tracing::error!(
                %error,
                "this conductor lost its liveness lock and could not take it back: the others \
                 take it for dead"
            );
        }
        self.refresh_membership().await?;
        Ok(())
    }

    /// Leaves the hash ring: marked offline, and every process told to rebuild its ring.
    pub(crate) async fn unregister(&self) {
        if let Err(error) = self.store.conductor_unregister(&self.config.hostname).await {
            tracing::warn!(error = %error, "could not unregister the conductor");
        }
        if let Err(error) = self
            .store
            .notify(ferric_db::MEMBERSHIP_CHANNEL, &self.config.hostname)
            .await
        {
            tracing::warn!(error = %error, "could not announce that the conductor left");
        }
    }
}

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
        let workers = Arc::new(Semaphore::new(config.workers));
        let metrics = drivers.metrics().clone();
        Self {
            inner: Arc::new(Inner {
                store: store.clone(),
                drivers,
                workers,
                tracker: TaskTracker::new(),
                shutdown: CancellationToken::new(),
                busy: Mutex::new(HashMap::new()),
                allocating: Mutex::default(),
                inspection_data: Mutex::new(HashMap::new()),
                power_failures: Mutex::new(HashMap::new()),
                power_events: power_events::Receiver::default(),
                reconcilers: reconcilers::Registry::new(&config),
                metrics,
                membership: Membership::new(store.clone(), config.heartbeat_timeout),
                consoles: console::Consoles::default(),
                lock: Mutex::new(None),
                config,
            }),
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
