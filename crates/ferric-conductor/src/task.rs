//! A task: one piece of conductor work on one node, under that node's lease.
//!
//! Theory of operation: [`Task::acquire`] marks the node busy in this process (so two tasks of
//! the same conductor never overlap: the database lease alone lets its holder re-enter) and
//! takes the database lease, which a background loop renews while the task lives. The task
//! keeps the node as it read it; [`Task::save`] writes it back guarded by the node's
//! revision. If the API changed the node meanwhile (say, its `extra`), the save re-reads it
//! and re-applies only the fields this task changed, so neither side loses a write. Every
//! state change goes through [`Task::fire`], which follows the model's transition table and
//! records the change in the node's history. [`Task::release`] gives the lease back; a task
//! dropped without it (an early return, a panic) releases in the background.
//!
//! Every write a task makes for its node — the node, its history, the lease's renewal and
//! release — is fenced by the lease it was granted ([`ferric_db::Fence`]: holder and
//! generation, checked in the same statement). A task whose lease was taken over while it was
//! cut off (or stopped, or too slow to renew) finds its next write refused; it then abandons
//! the node ([`Task::lease_lost`]), logged, and nothing more it does lands.
//!
//! A task's last write gives the lease back in the same transaction
//! ([`Task::release_at_rest`], [`Task::save_and_release`]): a client that reads the state a
//! task ended in must be able to act on the node at once, never to find it still leased (409
//! NodeLocked) for the moment between the write and a separate release. In this process the
//! node stays marked busy for a moment after that commit; [`Task::acquire`] waits out a mark
//! whose task has already given its lease up ([`Inner::mark_busy`]).
//!
//! [`Task::fire`] also feeds the metrics after each saved transition: the `(from, event, to)`
//! counter, the failure counter when `to` is a failed state, and the time spent in `from` (from
//! `provision_updated_at`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ferric_drivers::Interfaces;
use ferric_model::machine::transition;
use ferric_model::resources::{Ident, Node, NodeHistoryEntry, Port};
use ferric_model::{Event, ProvisionState};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use ferric_db::{Fence, LeaseRelease, WriteGuard};

use crate::abort_signal::AbortSignal;
use crate::{Busy, ConductorError, Inner};

/// How long [`Task::acquire`] waits for a task of this process that has already given the
/// node's lease up (its last write committed) to unmark the node: microseconds normally; the
/// bound only matters on a starved machine.
const ENDING_TASK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How a transition came about, for the history entry it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// An operator's request through the API (recorded before the API answers 2xx).
    Requested,
    /// The conductor's own progress: a step finished, a failure, a timeout.
    Conductor,
}

pub(crate) struct Task {
    pub(crate) inner: Arc<Inner>,
    pub(crate) node: Node,
    /// The node's ports as they were when the task began (network boot needs their MACs).
    pub(crate) ports: Vec<Port>,
    /// The node as last read or saved: what [`Task::save`] compares against to know which
    /// fields this task changed.
    original: Node,
    /// Cancelled when an abort of this task's flow is accepted in this process.
    abort: CancellationToken,
    /// The grant of the node's lease this task works under (its fencing token).
    generation: i64,
    lost: Arc<AtomicBool>,
    renewal: Option<JoinHandle<()>>,
    released: bool,
    /// Whether a transition into a resting state (one no worker drives on from) gives the
    /// lease back with its write: set for a worker's task, whose flow ends there.
    release_at_rest: bool,
}

impl Task {
    /// Takes `node` for this conductor: fails with [`ConductorError::NodeLocked`] if another
    /// task (here or in another conductor) holds it.
    pub(crate) async fn acquire(inner: &Arc<Inner>, node: Uuid) -> Result<Task, ConductorError> {
        Self::acquire_with(inner, node, false).await
    }

    /// [`Task::acquire`] for a new provision request: no flow runs on the node once its lease
    /// is taken, so an abort mark left on it is stale and is cleared with the lease taken
    /// (one call to the database), lest it stop the flow that starts now.
    pub(crate) async fn acquire_for_request(
        inner: &Arc<Inner>,
        node: Uuid,
    ) -> Result<Task, ConductorError> {
        Self::acquire_with(inner, node, true).await
    }

    async fn acquire_with(
        inner: &Arc<Inner>,
        node: Uuid,
        for_request: bool,
    ) -> Result<Task, ConductorError> {
        let deadline = tokio::time::Instant::now() + ENDING_TASK_WAIT;
        let abort = loop {
            match inner.mark_busy(node) {
                Busy::Marked(abort) => break abort,
                // Its lease is gone with its last write; it unmarks the node next.
                Busy::Ending if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                Busy::Working | Busy::Ending => {
                    return Err(ConductorError::NodeLocked {
                        node,
                        holder: inner.config.hostname.clone(),
                    });
                }
            }
        };
        let (store, hostname, ttl) = (&inner.store, &inner.config.hostname, inner.config.lease_ttl);
        let leased = if for_request {
            store
                .node_lease_acquire_for_request(node, hostname, ttl)
                .await
        } else {
            store.node_lease_acquire(node, hostname, ttl).await
        };
        let generation = match leased {
            Ok(lease) => lease.generation,
            Err(error) => {
                inner.unmark_busy(node);
                return Err(error.into());
            }
        };
        let (record, ports) = match crate::view::read(inner, node).await {
            Ok(read) => read,
            Err(error) => {
                let fence = Fence {
                    holder: hostname,
                    generation,
                };
                let _ = inner.store.node_lease_give_back(node, fence, false).await;
                inner.unmark_busy(node);
                return Err(error);
            }
        };
        let lost = Arc::new(AtomicBool::new(false));
        let renewal = tokio::spawn(renew(inner.clone(), node, generation, lost.clone()));
        Ok(Task {
            inner: inner.clone(),
            original: record.clone(),
            node: record,
            ports,
            abort,
            generation,
            lost,
            renewal: Some(renewal),
            released: false,
            release_at_rest: false,
        })
    }

    /// From now on, the transition that brings the node to rest (a state no worker drives on
    /// from: stable, waiting, holding or failed) also gives the lease back, in the same
    /// transaction, with any abort mark left on the node; the task must write nothing after
    /// it. A worker's flow ends with that transition.
    pub(crate) fn release_at_rest(&mut self) {
        self.release_at_rest = true;
    }

    pub(crate) fn uuid(&self) -> Uuid {
        self.node.uuid
    }

    /// The lease this task works under, which every write it makes names.
    pub(crate) fn fence(&self) -> Fence<'_> {
        Fence {
            holder: &self.inner.config.hostname,
            generation: self.generation,
        }
    }

    /// Whether another conductor took the node's lease over while this task held it: the
    /// task has been fenced off, writes nothing more, and its worker abandons the node.
    pub(crate) fn lease_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Marks the lease lost after a refused write, logging that the node is abandoned.
    fn fenced_off(&self, error: &ferric_db::Error) {
        if !self.lost.swap(true, Ordering::SeqCst) {
            tracing::error!(
                node = %self.uuid(),
                generation = self.generation,
                error = %error,
                "lease taken over by another conductor: write refused, abandoning the node"
            );
        }
    }

    /// The node's driver interfaces.
    pub(crate) fn interfaces(&self) -> Result<Interfaces, ConductorError> {
        crate::view::interfaces(&self.inner, &self.node, &self.ports)
    }

    /// Whether someone asked to stop the deployment this task runs. The request is a row in
    /// the database, so it reaches this worker from any API process or conductor; a failed
    /// read counts as "no" and the next look asks again.
    pub(crate) async fn abort_requested(&self) -> bool {
        match self
            .inner
            .store
            .node_abort_request_exists(self.uuid())
            .await
        {
            Ok(requested) => requested,
            Err(error) => {
                tracing::warn!(node = %self.uuid(), error = %error, "could not read the abort request");
                false
            }
        }
    }

    /// Forgets an abort request (it has been acted on, or the flow ended anyway); `true` if
    /// there was one.
    pub(crate) async fn clear_abort_request(&self) -> bool {
        match self.inner.store.node_abort_request_clear(self.uuid()).await {
            Ok(cleared) => cleared,
            Err(error) => {
                tracing::warn!(node = %self.uuid(), error = %error, "could not clear the abort request");
                false
            }
        }
    }

    /// What tells this task that an abort of its flow was accepted (`abort_signal.rs`).
    pub(crate) fn abort_signal(&self) -> AbortSignal {
        AbortSignal::new(self.inner.clone(), self.uuid(), self.abort.clone())
    }

    /// Writes the node back (see the module comment for how concurrent API edits survive).
    pub(crate) async fn save(&mut self) -> Result<(), ConductorError> {
        self.save_guarded(false, None, None).await.map(drop)
    }

    /// Writes the node back and gives the lease back in the same transaction (see the module
    /// comment). If the write fails, the lease is released on its own and the error returned.
    pub(crate) async fn save_and_release(mut self) -> Result<(), ConductorError> {
        let saved = self
            .save_guarded(false, None, Some(ReleaseKind::Plain))
            .await;
        self.release().await;
        saved.map(drop)
    }

    /// [`Task::save_and_release`] at the end of a worker's flow: an abort mark left on the
    /// node goes too (as [`Task::release_ending`]).
    pub(crate) async fn save_and_release_ending(mut self) -> Result<(), ConductorError> {
        let saved = self
            .save_guarded(false, None, Some(ReleaseKind::Ending))
            .await;
        self.release_ending().await;
        saved.map(drop)
    }

    /// Writes the node back unless its flow is marked for abort: `false` then, and nothing
    /// was written. The check and the write are one statement, so an abort accepted before
    /// it is never overtaken, and one accepted after it finds the node moved on.
    pub(crate) async fn save_unless_aborted(&mut self) -> Result<bool, ConductorError> {
        self.save_guarded(true, None, None).await
    }

    /// Saves; with `entry`, the history entry is written in the same transaction, and with
    /// `release` the lease is given back in it too.
    async fn save_guarded(
        &mut self,
        unless_aborted: bool,
        entry: Option<&NodeHistoryEntry>,
        release: Option<ReleaseKind>,
    ) -> Result<bool, ConductorError> {
        if self.released {
            return Err(ConductorError::Conflict(format!(
                "The conductor already gave its lease on node {} back; nothing more is \
                 written by this task.",
                self.node.uuid
            )));
        }
        if self.lost.load(Ordering::SeqCst) {
            return Err(ConductorError::Conflict(format!(
                "The conductor lost its lease on node {} while working on it; another \
                 conductor has taken the node over.",
                self.node.uuid
            )));
        }
        for _ in 0..5 {
            let store = &self.inner.store;
            let guard = if unless_aborted {
                WriteGuard::RevisionUnlessAborted
            } else {
                WriteGuard::Revision
            };
            // Over `original`: only the fields this task changed are written.
            let saved = match release {
                None => {
                    store
                        .node_save(&self.node, &self.original, self.fence(), guard, entry)
                        .await
                }
                Some(kind) => {
                    let release = LeaseRelease {
                        fence: self.fence(),
                        forget_abort: kind == ReleaseKind::Ending,
                    };
                    // Marked before the commit: from then on an acquire here waits for the
                    // unmark instead of answering NodeLocked.
                    self.inner.mark_ending(self.node.uuid, true);
                    let saved = store
                        .node_save_releasing(&self.node, &self.original, guard, entry, release)
                        .await;
                    if !matches!(saved, Ok(Some(_))) {
                        self.inner.mark_ending(self.node.uuid, false);
                    }
                    saved
                }
            };
            match saved {
                Ok(Some(saved)) => {
                    self.original = saved.clone();
                    self.node = saved;
                    if release.is_some() {
                        self.lease_given_back();
                    }
                    return Ok(true);
                }
                Ok(None) => return Ok(false),
                Err(ferric_db::Error::StaleRevision { .. }) => {
                    let fresh = self.inner.store.node_get(&Ident::Uuid(self.uuid())).await?;
                    self.node = merge_changes(&self.original, &self.node, fresh.clone());
                    self.original = fresh;
                }
                Err(error @ ferric_db::Error::LeaseLost { .. }) => {
                    self.fenced_off(&error);
                    return Err(error.into());
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(ConductorError::Conflict(format!(
            "Node {} kept changing while the conductor saved it; retry.",
            self.node.uuid
        )))
    }

    /// Takes the FSM edge `event` from the node's state, saves, and records it in the history.
    pub(crate) async fn fire(&mut self, event: Event, cause: Cause) -> Result<(), ConductorError> {
        self.fire_guarded(event, cause, false).await.map(drop)
    }

    /// [`Task::fire`] unless the node's flow is marked for abort: `false` then, and the node
    /// is as it was (nothing saved). How a running flow moves on — to `active`, a waiting
    /// state, a hold — so that an accepted abort always wins over it.
    pub(crate) async fn fire_unless_aborted(
        &mut self,
        event: Event,
        cause: Cause,
    ) -> Result<bool, ConductorError> {
        self.fire_guarded(event, cause, true).await
    }

    async fn fire_guarded(
        &mut self,
        event: Event,
        cause: Cause,
        unless_aborted: bool,
    ) -> Result<bool, ConductorError> {
        let from = self.node.provision_state;
        let edge = transition(from, event).ok_or_else(|| ConductorError::InvalidTransition {
            node: self.node.uuid,
            action: event.to_string(),
            state: from,
        })?;
        let before = (
            self.node.target_provision_state,
            self.node.provision_updated_at,
            self.node.inspection_started_at,
            self.node.inspection_finished_at,
        );
        let now = self.inner.store.now();
        let time_in_from = self
            .node
            .provision_updated_at
            .and_then(|since| (now - since).to_std().ok());
        self.node.target_provision_state = edge.target_after(self.node.target_provision_state);
        self.node.provision_state = edge.to;
        self.node.provision_updated_at = Some(now);
        if edge.to == ProvisionState::Inspecting {
            self.node.inspection_started_at = Some(now);
            self.node.inspection_finished_at = None;
        }
        if matches!(
            from,
            ProvisionState::Inspecting | ProvisionState::InspectWait
        ) && edge.to == ProvisionState::Manageable
        {
            self.node.inspection_finished_at = Some(now);
        }
        let how = match cause {
            Cause::Requested => " (requested through the API)",
            Cause::Conductor => "",
        };
        let original_key = ferric_drivers::autodetect::ORIGINAL_KEY;
        let deploy_interface_before = (
            self.node.deploy_interface.clone(),
            self.node.driver_internal_info.get(original_key).cloned(),
        );
        let switched =
            crate::autodetect::follow(&self.inner.drivers, &mut self.node, from, edge.to);
        let mut text = format!("Event '{event}'{how}: {from} -> {}", edge.to);
        if let Some(switched) = switched {
            text = format!("{text} ({switched})");
        }
        let severity = if edge.to.is_failure() || (event == Event::Fail) {
            if let Some(error) = &self.node.last_error {
                text = format!("{text}: {error}");
            }
            "ERROR"
        } else {
            "INFO"
        };
        // The state and its history entry commit together; a worker's flow ends here when
        // the node comes to rest, and its lease goes in the same commit.
        let entry = self.history_entry(severity, "provisioning", text);
        let release = (self.release_at_rest && !edge.to.is_stuck_treated_as_failure())
            .then_some(ReleaseKind::Ending);
        if !self
            .save_guarded(unless_aborted, Some(&entry), release)
            .await?
        {
            // Undo the edge in memory: the abort is carried out from where the node was.
            let node = &mut self.node;
            (node.provision_state, node.target_provision_state) = (from, before.0);
            (node.provision_updated_at, node.inspection_started_at) = (before.1, before.2);
            node.inspection_finished_at = before.3;
            let (interface, original) = deploy_interface_before;
            node.deploy_interface = interface;
            match original {
                Some(original) => node
                    .driver_internal_info
                    .insert(original_key.to_owned(), original),
                None => node.driver_internal_info.remove(original_key),
            };
            return Ok(false);
        }
        self.inner
            .metrics
            .transition(from, event, edge.to, time_in_from);
        Ok(true)
    }

    /// Sets `last_error` and fires `fail`.
    pub(crate) async fn fail(&mut self, message: impl Into<String>) -> Result<(), ConductorError> {
        let message = message.into();
        tracing::warn!(node = %self.uuid(), state = %self.node.provision_state, error = %message, "node failed");
        self.node.last_error = Some(message);
        self.fire(Event::Fail, Cause::Conductor).await
    }

    /// Adds a history entry, fenced by the task's lease; a failure to write it is logged,
    /// never fatal to the task (a lost lease shows at the task's next save).
    pub(crate) async fn history(&self, severity: &str, event_type: &str, event: String) {
        if self.lease_lost() {
            return;
        }
        let entry = self.history_entry(severity, event_type, event);
        match self
            .inner
            .store
            .node_history_add_fenced(&entry, self.fence())
            .await
        {
            Ok(()) => {}
            Err(error @ ferric_db::Error::LeaseLost { .. }) => self.fenced_off(&error),
            Err(error) => {
                tracing::warn!(node = %self.uuid(), error = %error, "could not record node history");
            }
        }
    }

    fn history_entry(&self, severity: &str, event_type: &str, event: String) -> NodeHistoryEntry {
        NodeHistoryEntry {
            uuid: Uuid::new_v4(),
            node: self.uuid(),
            created_at: self.inner.store.now(),
            severity: severity.to_owned(),
            event_type: event_type.to_owned(),
            event,
            conductor: Some(self.inner.config.hostname.clone()),
            user: None,
        }
    }

    /// Gives the lease back. Errors are logged: an unreleased lease expires on its own.
    pub(crate) async fn release(self) {
        self.release_with(false).await;
    }

    /// [`Task::release`] at the end of a worker's flow: an abort request left on the node came
    /// too late to matter and is forgotten with the work it meant (same call to the database).
    pub(crate) async fn release_ending(self) {
        self.release_with(true).await;
    }

    async fn release_with(mut self, forget_abort: bool) {
        if self.released {
            // Given back with the last write already.
            return;
        }
        self.stop_renewal();
        self.released = true;
        let node = self.uuid();
        let released = self
            .inner
            .store
            .node_lease_give_back(node, self.fence(), forget_abort)
            .await;
        match released {
            Ok(()) => {}
            // Taken over: the lease is someone else's now and stays theirs.
            Err(ferric_db::Error::LeaseNotHeld { .. }) if self.lease_lost() => {}
            Err(error) => {
                tracing::warn!(node = %node, error = %error, "could not release node lease; it will expire");
            }
        }
        self.inner.unmark_busy(node);
    }

    /// The lease went with the write just committed: stop renewing it and unmark the node.
    fn lease_given_back(&mut self) {
        self.stop_renewal();
        self.released = true;
        self.inner.unmark_busy(self.node.uuid);
    }

    fn stop_renewal(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.stop_renewal();
        if self.released {
            return;
        }
        let inner = self.inner.clone();
        let node = self.node.uuid;
        let generation = self.generation;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let fence = Fence {
                        holder: &inner.config.hostname,
                        generation,
                    };
                    let _ = inner.store.node_lease_give_back(node, fence, false).await;
                    inner.unmark_busy(node);
                });
            }
            Err(_) => inner.unmark_busy(node),
        }
    }
}

/// Which release a save carries ([`Task::save_guarded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReleaseKind {
    /// The lease only.
    Plain,
    /// The lease and an abort mark left on the node: a worker's flow ends.
    Ending,
}

/// Renews the lease at a third of its lifetime until the task ends; marks it lost if another
/// conductor took the node over.
async fn renew(inner: Arc<Inner>, node: Uuid, generation: i64, lost: Arc<AtomicBool>) {
    let period = inner.config.lease_ttl / 3;
    let fence = Fence {
        holder: &inner.config.hostname,
        generation,
    };
    loop {
        tokio::time::sleep(period).await;
        match inner
            .store
            .node_lease_renew(node, fence, inner.config.lease_ttl)
            .await
        {
            Ok(_) => {}
            Err(ferric_db::Error::LeaseNotHeld { .. }) => {
                tracing::error!(node = %node, "lost the lease on a node while working on it");
                lost.store(true, Ordering::SeqCst);
                return;
            }
            Err(error) => {
                tracing::warn!(node = %node, error = %error, "could not renew node lease; retrying");
            }
        }
    }
}

/// `fresh` with every field that `ours` changed relative to `original` taken from `ours`.
fn merge_changes(original: &Node, ours: &Node, fresh: Node) -> Node {
    let (Ok(Value::Object(original)), Ok(Value::Object(ours)), Ok(Value::Object(mut merged))) = (
        serde_json::to_value(original),
        serde_json::to_value(ours),
        serde_json::to_value(&fresh),
    ) else {
        return fresh;
    };
    for (field, value) in ours {
        if original.get(&field) != Some(&value) {
            merged.insert(field, value);
        }
    }
    serde_json::from_value(Value::Object(merged)).unwrap_or(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_both_sides_changes() {
        let original = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Available);
        let mut ours = original.clone();
        ours.provision_state = ProvisionState::Deploying;
        let mut fresh = original.clone();
        fresh.version = 7;
        fresh.extra.insert("owner".into(), "ops".into());
        let merged = merge_changes(&original, &ours, fresh);
        assert_eq!(merged.provision_state, ProvisionState::Deploying);
        assert_eq!(merged.extra["owner"], "ops");
        assert_eq!(merged.version, 7);
    }
}
