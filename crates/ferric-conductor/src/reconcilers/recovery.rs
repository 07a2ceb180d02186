//! Recovery: work that a dead conductor left behind. A node in a state where a conductor works
//! synchronously (`deploying`, `cleaning`, `verifying`, …), or with a power action under way,
//! whose lease has lapsed or is gone, will never be finished by anyone: it is moved to its
//! failed state (or its power action is dropped) with a `last_error` that says so. This runs
//! when a conductor starts (after releasing its own previous leases) and periodically, which
//! is how nodes of a conductor that died are taken over: once the hash ring drops the dead
//! conductor, each of its nodes has a new owner, whose recovery fails what was left half-done
//! (nodes in wait states hold no lease and simply keep waiting for their callback). A lease
//! whose holder died is free at once on PostgreSQL (`ferric_db`'s liveness lock), so this
//! does not wait for it to lapse.
//! Allocations left `allocating` for a while are processed again (`allocations.rs`).

use std::sync::Arc;

use ferric_db::{NodeFilter, Page};
use ferric_model::ProvisionState;
use ferric_model::resources::Node;

use crate::task::Task;
use crate::{ConductorError, Inner};

pub(crate) async fn run_once(inner: &Arc<Inner>) -> Result<usize, ConductorError> {
    let mut candidates: Vec<Node> = Vec::new();
    for state in ProvisionState::ALL
        .into_iter()
        .filter(|state| state.is_stuck_treated_as_failure())
    {
        let filter = NodeFilter {
            provision_state: Some(state),
            ..NodeFilter::default()
        };
        candidates.extend(inner.store.node_list(&filter, &Page::all()).await?);
    }
    let pending_power = NodeFilter {
        power_action_pending: Some(true),
        ..NodeFilter::default()
    };
    candidates.extend(inner.store.node_list(&pending_power, &Page::all()).await?);

    let mut acted = 0;
    for node in candidates {
        // Only this conductor's nodes (by the hash ring): a dead conductor's nodes are
        // recovered by whichever live conductors own them now.
        if inner.is_busy(node.uuid) || !inner.owns(&node) {
            continue;
        }
        // A lease that lapsed, or whose holder's process died (its liveness lock is gone),
        // is free: its work will never be finished.
        if inner.store.node_lease_get_held(node.uuid).await?.is_some() {
            continue;
        }
        let previous_holder = inner
            .store
            .node_lease_get(node.uuid)
            .await?
            .map(|lease| lease.holder);
        let mut task = match Task::acquire(inner, node.uuid).await {
            Ok(task) => task,
            // Someone else got there first: fine.
            Err(ConductorError::NodeLocked { .. } | ConductorError::NodeNotFound(_)) => continue,
            Err(error) => return Err(error),
        };
        let who = match previous_holder {
            Some(holder) => format!("conductor {holder}"),
            None => "the conductor".to_owned(),
        };
        let result = recover(&mut task, &who).await;
        task.release().await;
        if result? {
            acted += 1;
        }
    }
    // Allocations a dead process left `allocating` are matched again.
    acted += crate::allocations::recover(inner, false).await?;
    Ok(acted)
}

/// Fails the node's interrupted work; `false` if, read again under the lease, it needs nothing.
async fn recover(task: &mut Task, who: &str) -> Result<bool, ConductorError> {
    let mut acted = false;
    if let Some(target) = task.node.target_power_state.take() {
        let message = format!(
            "The power action towards \"{target}\" was interrupted because {who} working on the \
             node stopped; check the power state and retry."
        );
        task.node.last_error = Some(message.clone());
        task.save().await?;
        task.history("ERROR", "power", message).await;
        acted = true;
    }
    let state = task.node.provision_state;
    if state.is_stuck_treated_as_failure() {
        task.fail(format!(
            "The node was in state \"{state}\" when {who} working on it stopped (crashed or was \
             killed); the operation did not finish. Retry it, or see the node's history."
        ))
        .await?;
        acted = true;
    }
    Ok(acted)
}
