//! What every part of the conductor shares: the [`Conductor`] handle and its [`Inner`] state
//! (the store, the drivers, the worker slots, the nodes a task of this process works on, the
//! reconcilers' registry, the hash ring's membership, the consoles). It sits below every
//! other module of the crate, so none of them reaches up to the crate root.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use ferric_db::{ConductorLock, Store};
use ferric_drivers::Drivers;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::config::ConductorConfig;
use crate::error::ConductorError;
use crate::mutex::lock;
use crate::ring::Membership;

/// A handle on the conductor; cheap to clone.
#[derive(Clone)]
pub struct Conductor {
    pub(crate) inner: Arc<Inner>,
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
    pub(crate) workers: Arc<Semaphore>,
    pub(crate) tracker: TaskTracker,
    pub(crate) shutdown: CancellationToken,
    /// Nodes a task of this process works on right now, each with the token that tells that
    /// task an abort was accepted (`abort_signal.rs`).
    busy: Mutex<HashMap<Uuid, BusyMark>>,
    /// Allocations this process is matching (`allocations.rs`).
    pub(crate) allocating: Mutex<HashSet<Uuid>>,
    /// Inspection data posted to `/v1/continue_inspection`, handed to the worker that
    /// processes it (in this process: the API calls the conductor directly).
    pub(crate) inspection_data: Mutex<HashMap<Uuid, serde_json::Value>>,
    /// Failed power reads in a row, per node (the power-sync reconciler's memory).
    pub(crate) power_failures: Mutex<HashMap<Uuid, u32>>,
    /// Who is told when a node holding an instance changes power (`power_events.rs`).
    pub(crate) power_events: crate::power_events::Receiver,
    pub(crate) reconcilers: crate::reconcilers::Registry,
    /// Transitions, failures and time per state are counted here (the drivers' registry).
    pub(crate) metrics: ferric_metrics::Metrics,
    /// Which conductors are alive, and so which nodes are this conductor's (`ring.rs`).
    pub(crate) membership: Membership,
    /// The consoles this conductor relays (`console.rs`).
    pub(crate) consoles: crate::console_hub::Consoles,
    /// The lock that proves this conductor alive (`ferric_db::ConductorLock`), from start
    /// until shutdown.
    pub(crate) lock: Mutex<Option<Arc<ConductorLock>>>,
}

/// A node a task of this process works on (`Inner::busy`).
struct BusyMark {
    /// Tells the task an abort was accepted (`abort_signal.rs`).
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
    /// The state of a conductor over `store` driving the hardware types in `drivers`.
    pub(crate) fn new(store: Store, drivers: Drivers, config: ConductorConfig) -> Self {
        let workers = Arc::new(Semaphore::new(config.workers));
        let metrics = drivers.metrics().clone();
        Self {
            store: store.clone(),
            drivers,
            workers,
            tracker: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            busy: Mutex::new(HashMap::new()),
            allocating: Mutex::default(),
            inspection_data: Mutex::new(HashMap::new()),
            power_failures: Mutex::new(HashMap::new()),
            power_events: crate::power_events::Receiver::default(),
            reconcilers: crate::reconcilers::Registry::new(&config),
            metrics,
            membership: Membership::new(store.clone(), config.heartbeat_timeout),
            consoles: crate::console_hub::Consoles::default(),
            lock: Mutex::new(None),
            config,
        }
    }

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
            self.reconcilers.wake(crate::reconcilers::RECOVERY);
            self.reconcilers.wake(crate::reconcilers::CALLBACK_TIMEOUTS);
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
    pub(crate) async fn register_at_start(&self) -> Result<(), ConductorError> {
        let taken = self
            .store
            .conductor_lock(&self.config.hostname, self.config.heartbeat_timeout)
            .await?;
        *lock(&self.lock) = Some(Arc::new(taken));
        self.register().await
    }

    /// Checks that this conductor still holds its lock (on PostgreSQL a session that broke is
    /// opened again and the lock taken again), then re-reads who else is alive. Run every
    /// [`crate::ring::LIVENESS_INTERVAL`] on PostgreSQL: this is how a crashed conductor's
    /// nodes move within about a second.
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
