//! What the BMC drivers (`redfish`, `ipmi`) share: their settings (timeouts, retries, the
//! per-BMC request limit) and the primitives their per-BMC state is made of. The state itself,
//! which [`Drivers`](crate::Drivers) creates once and every node's interfaces use — Redfish
//! clients and sessions, IPMI cipher suites, one request limit per BMC — is `bmc_state.rs`'s
//! `BmcState`, apart so that the protocol clients can use this module without a loop.
//!
//! Theory of operation: drivers keep nothing about a node, but a BMC is shared by every call
//! that reaches it (and, for chassis managers, by several nodes), so what belongs to the BMC —
//! its HTTP connections, its Redfish session, how many requests it is serving — lives here,
//! keyed by the BMC's address, for the life of the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Timeouts, retries and limits for talking to BMCs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BmcSettings {
    /// How long opening a connection to a BMC may take (TCP and TLS).
    pub connect_timeout: Duration,
    /// How long a BMC may take to answer one request once connected (for IPMI: one datagram
    /// exchange, which is retransmitted up to `retries` times).
    pub read_timeout: Duration,
    /// Retries after a connection failure, a timeout or a 5xx answer (so `retries + 1`
    /// attempts in all), waiting `retry_backoff`, then twice that, … between them.
    pub retries: u32,
    pub retry_backoff: Duration,
    /// Requests one BMC may be serving from this process at once; more wait their turn.
    pub max_requests_per_bmc: usize,
    /// How long a power action may take to show in the BMC's power state (Ironic's
    /// `[conductor]power_state_change_timeout`); soft actions use their own timeout.
    pub power_state_change_timeout: Duration,
    /// How often the power state is read while waiting for an action to show.
    pub power_state_poll_interval: Duration,
    /// How long an IPMI datagram waits for its answer before it is sent again (UDP has no
    /// connection, so this is IPMI's read timeout; `retries` bounds the resends).
    pub ipmi_retransmit_interval: Duration,
}

impl Default for BmcSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            retries: 3,
            retry_backoff: Duration::from_millis(500),
            max_requests_per_bmc: 4,
            power_state_change_timeout: Duration::from_secs(60),
            power_state_poll_interval: Duration::from_secs(1),
            ipmi_retransmit_interval: Duration::from_secs(1),
        }
    }
}

impl BmcSettings {
    /// The wait before retry number `attempt` (1-based): the backoff doubled each time,
    /// at most 8 times the first.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        self.retry_backoff * 2u32.pow(attempt.saturating_sub(1).min(3))
    }
}

/// Locks a mutex whose data stays consistent even if a holder panicked (plain maps).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One request limit per BMC address.
#[derive(Debug)]
pub(crate) struct BmcLimits {
    per_bmc: usize,
    limits: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl BmcLimits {
    pub(crate) fn new(per_bmc: usize) -> Self {
        Self {
            per_bmc: per_bmc.max(1),
            limits: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for a free request slot at the BMC `address`. `None` only if the limit was
    /// closed, which never happens; the caller then goes ahead unlimited.
    pub(crate) async fn acquire(&self, address: &str) -> Option<OwnedSemaphorePermit> {
        let semaphore = lock(&self.limits)
            .entry(address.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_bmc)))
            .clone();
        semaphore.acquire_owned().await.ok()
    }
}
