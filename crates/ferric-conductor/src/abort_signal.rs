//! How a running task learns that an abort of its flow was accepted (`flows/mod.rs` carries the
//! abort out): in this process a cancellation token the abort fires at once; across processes
//! (PostgreSQL: the DELETE went to the node's owner by the hash ring while another conductor
//! still holds the node, as during a takeover) the mark read again every [`ABORT_POLL`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::Inner;

/// How often a running step looks for an abort marked by another process.
pub(crate) const ABORT_POLL: Duration = Duration::from_secs(2);

/// Tells a running task that its flow was marked for abort.
#[derive(Clone)]
pub(crate) struct AbortSignal {
    inner: Arc<Inner>,
    node: Uuid,
    token: CancellationToken,
}

/// The work was dropped because its flow is marked for abort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Aborted;

impl AbortSignal {
    pub(crate) fn new(inner: Arc<Inner>, node: Uuid, token: CancellationToken) -> Self {
        Self { inner, node, token }
    }

    /// Completes once the flow is marked for abort: at once when the mark was set in this
    /// process, within [`ABORT_POLL`] when another process set it. On SQLite there is no
    /// other process (split roles need PostgreSQL), so nothing is polled.
    pub(crate) async fn fired(&self) {
        if self.inner.store.backend_name() == "sqlite" {
            return self.token.cancelled().await;
        }
        loop {
            tokio::select! {
                () = self.token.cancelled() => return,
                () = tokio::time::sleep(ABORT_POLL) => {}
            }
            match self.inner.store.node_abort_request_exists(self.node).await {
                Ok(true) => return,
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(node = %self.node, error = %error, "could not read the abort request");
                }
            }
        }
    }

    /// Runs `work` unless the abort fires first; then `work` is dropped at its await point.
    pub(crate) async fn unless_aborted<F: Future>(&self, work: F) -> Result<F::Output, Aborted> {
        tokio::select! {
            biased;
            output = work => Ok(output),
            () = self.fired() => Err(Aborted),
        }
    }
}

/// Runs `work`, interrupted by `signal` if there is one (none: the step may not be
/// interrupted, so it runs to its end and the abort waits for the next step boundary).
pub(crate) async fn interruptible<F: Future>(
    signal: Option<&AbortSignal>,
    work: F,
) -> Result<F::Output, Aborted> {
    match signal {
        Some(signal) => signal.unless_aborted(work).await,
        None => Ok(work.await),
    }
}
