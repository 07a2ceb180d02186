//! `PUT /v1/nodes/{node}/states/provision` and `DELETE /v1/nodes/{node}/provision`, conductor
//! side, and the callbacks that resume a waiting node: re-check the request against the node
//! under its lease, hand it to its flow (`flows/`) for the flow's start checks, record it as
//! the first transition, and hand the rest to a worker (`reference/ironic.md` §1.3, §1.5,
//! §1.6).
//!
//! Aborts: the `abort` verb stops a flow that waits or holds (the flow's
//! [`Flow::abort_waiting`]); [`Conductor::abort_deployment`] (seed 001's DELETE) uses it there
//! and otherwise checks that the running step may be interrupted (403 otherwise, and nothing
//! is marked) and marks the node for the worker to carry the abort out (`flows/mod.rs` says
//! how).

use std::time::Duration;

use ferric_model::machine::check_verb;
use ferric_model::resources::Ident;
use ferric_model::{Event, Microversion, ProvisionState, Verb};
use uuid::Uuid;

use crate::flows::{Flow, Job, spawn};
use crate::steps::current_step_is_abortable;
use crate::task::{Cause, Task};
use crate::{Conductor, ConductorError};

pub use ferric_model::action::ProvisionArgs;

/// How many times an abort looks at the node again when it moved on between the look and the
/// mark (a step saved its progress, a callback resumed it).
const ATTEMPTS: usize = 20;

impl Conductor {
    /// Starts `verb` on `node`. Returns once the request is recorded (the node has taken its
    /// first transition); the rest runs in the background.
    pub async fn provision(
        &self,
        node: Uuid,
        verb: Verb,
        args: ProvisionArgs,
    ) -> Result<(), ConductorError> {
        let inner = &self.inner;
        let permit = inner.take_worker()?;
        let mut task = Task::acquire_for_request(inner, node).await?;
        match start(&mut task, verb, args).await {
            Ok(Some(job)) => {
                spawn(task, job, permit);
                Ok(())
            }
            Ok(None) => {
                task.release().await;
                Ok(())
            }
            Err(error) => {
                task.release().await;
                Err(error)
            }
        }
    }

    /// The node called back (an agent heartbeat, inspection data, a finished asynchronous
    /// step): a node waiting in `wait call-back`, `clean wait`, `service wait`,
    /// `inspect wait` or `rescue wait` moves on.
    pub async fn continue_node(&self, node: Uuid) -> Result<(), ConductorError> {
        let inner = &self.inner;
        let permit = inner.take_worker()?;
        let mut task = Task::acquire(inner, node).await?;
        let state = task.node.provision_state;
        if !state.has_callback_deadline() {
            task.release().await;
            return Err(ConductorError::Conflict(format!(
                "Node {node} is in state \"{state}\" and is not waiting for a callback."
            )));
        }
        match task.fire(Event::Resume, Cause::Conductor).await {
            Ok(()) => {
                spawn(task, Job::Drive { resume: true }, permit);
                Ok(())
            }
            Err(error) => {
                task.release().await;
                Err(error)
            }
        }
    }

    /// Seed 001's `DELETE /v1/nodes/{node}/provision`: stops the deployment — or the
    /// cleaning or rescue — running on `node`. A node waiting for its agent is aborted at
    /// once, as the `abort` verb does; a running flow is marked and its worker carries the
    /// abort out (module comment). [`ConductorError::Forbidden`] when the running step may
    /// not be interrupted, [`ConductorError::NothingRunning`] when nothing runs.
    pub async fn abort_deployment(&self, node: Uuid) -> Result<(), ConductorError> {
        let inner = &self.inner;
        for attempt in 1..=ATTEMPTS {
            let current = inner.store.node_get(&Ident::Uuid(node)).await?;
            let state = current.provision_state;
            if matches!(
                state,
                ProvisionState::WaitCallBack
                    | ProvisionState::DeployHold
                    | ProvisionState::CleanWait
                    | ProvisionState::CleanHold
                    | ProvisionState::RescueWait
            ) {
                match self
                    .provision(node, Verb::Abort, ProvisionArgs::default())
                    .await
                {
                    // A callback took the node (locked) or moved it on (invalid now): look
                    // again.
                    Err(
                        ConductorError::NodeLocked { .. }
                        | ConductorError::InvalidTransition { .. }
                        | ConductorError::Invalid(_),
                    ) if attempt < ATTEMPTS => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    result => return result,
                }
            }
            let Some(flow) = Flow::running_in(state) else {
                return Err(ConductorError::NothingRunning(format!(
                    "No deployment is running on node {node} (it is in state \"{state}\"); \
                     there is nothing to abort."
                )));
            };
            if let Some(kind) = flow.step_kind() {
                let ports = crate::view::ports(inner, node).await?;
                let interfaces = crate::view::interfaces(inner, &current, &ports)?;
                current_step_is_abortable(&interfaces, &current, kind)
                    .map_err(ConductorError::Forbidden)?;
            }
            let held = inner.store.node_lease_get_held(node).await?.is_some();
            if !held {
                // The flow may have just ended (state saved, lease released) after the read
                // above: read again, and answer from the new state.
                let now = inner.store.node_get(&Ident::Uuid(node)).await?;
                if now.version != current.version && attempt < ATTEMPTS {
                    continue;
                }
                return Err(ConductorError::Conflict(format!(
                    "Node {node} is in state \"{state}\" but no conductor works on it right \
                     now; it will be failed by recovery shortly. Retry then."
                )));
            }
            // Marked only if the node is still as checked above (the step, the state).
            if inner
                .store
                .node_abort_request_set(node, current.version, &[state])
                .await?
            {
                inner.signal_abort(node);
                tracing::info!(node = %node, state = %state, "abort of the running flow accepted");
                return Ok(());
            }
        }
        Err(ConductorError::Conflict(format!(
            "Node {node} kept changing while its abort was being recorded; retry."
        )))
    }
}

/// Checks `verb` against the node under the lease, records the request and says what work
/// follows (`None`: the transition itself was all).
async fn start(
    task: &mut Task,
    verb: Verb,
    args: ProvisionArgs,
) -> Result<Option<Job>, ConductorError> {
    let node_uuid = task.uuid();
    let state = task.node.provision_state;
    // The API checked the client's version; here only the state matters.
    check_verb(verb, state, Microversion::new(u16::MAX))
        .map_err(|error| ConductorError::Invalid(error.message_for_node(&node_uuid.to_string())))?;
    let event = verb.event();
    // An abort mark left from an earlier flow went with taking the lease
    // (`Task::acquire_for_request`).
    match event {
        Event::Abort => return abort(task).await,
        Event::Unhold => {
            task.fire(Event::Unhold, Cause::Requested).await?;
            task.fire(Event::Resume, Cause::Conductor).await?;
            return Ok(Some(Job::Drive { resume: true }));
        }
        _ => {}
    }
    let Some(flow) = Flow::started_by(event) else {
        return Err(ConductorError::Invalid(format!(
            "\"{event}\" is not something to request through the API."
        )));
    };
    flow.start(task, event, args).await?;
    task.fire(event, Cause::Requested).await?;
    Ok(task
        .node
        .provision_state
        .is_stuck_treated_as_failure()
        .then_some(Job::Drive { resume: false }))
}

/// `abort`, state by state (§1.5): the flow that waits or holds there stops.
async fn abort(task: &mut Task) -> Result<Option<Job>, ConductorError> {
    let state = task.node.provision_state;
    match Flow::aborted_in(state) {
        Some(flow) => flow.abort_waiting(task).await,
        None => Err(ConductorError::InvalidTransition {
            node: task.uuid(),
            action: "abort".to_owned(),
            state,
        }),
    }
}
