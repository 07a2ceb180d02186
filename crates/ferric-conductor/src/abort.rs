//! Aborting a running flow (seed 001's `DELETE /v1/nodes/{node}/provision`): once the abort is
//! accepted (202) it is carried out, whatever the worker is doing at that moment.
//!
//! Theory of operation: a deployment, cleaning or rescue runs in a worker that holds the
//! node's lease, maybe on another conductor. [`Conductor::abort_deployment`] checks that the
//! current step may be interrupted (403 otherwise, and nothing is marked) and then marks the
//! node — a `node_abort_requests` row written in one transaction with a bump of the node's
//! revision, and only if the node is still as it was checked. The worker notices the mark:
//! - between two steps and whenever it moves the node on (to the next step, to `active`, to a
//!   waiting or hold state), because those writes are [`Task::save_unless_aborted`] /
//!   [`Task::fire_unless_aborted`]: one statement that refuses to write over a mark. So the
//!   mark and the move to `active` never both win: either the mark came first and the node
//!   fails, or the deployment ended first and the DELETE finds nothing to abort (404);
//! - inside an interruptible step, the reserved `wait` step, a preparation or a poll of the
//!   agent, through [`AbortSignal`](crate::abort_signal::AbortSignal): the work is dropped at its next await point. In this
//!   process the signal is a cancellation token the abort fires at once; across processes
//!   (PostgreSQL: the DELETE went to the node's owner by the hash ring, but another conductor
//!   still holds the node, as during a takeover) it also reads the mark every
//!   [`ABORT_POLL`](crate::abort_signal::ABORT_POLL).
//!
//! Then [`carry_out`] tells the agent to stop, removes the network boot, powers the machine
//! off and fails the node (`deploy failed`, `clean failed`, `rescue failed`) with `last_error`
//! naming the abort. A node waiting for its agent (`wait call-back`, `clean wait`, …) has no
//! worker: the DELETE there is the `abort` verb, under the node's lease.

use std::time::Duration;

use ferric_drivers::{PowerAction, StepCall, StepKind};
use ferric_model::resources::{Ident, Node};
use ferric_model::{Event, ProvisionState, Verb};
use uuid::Uuid;

use crate::provision::{ProvisionArgs, forget_agent, forget_rescue_password};
use crate::steps::{clear_plan, current_step_is_abortable};
use crate::task::{Cause, Task};
use crate::{Conductor, ConductorError};

/// How many times an abort looks at the node again when it moved on between the look and the
/// mark (a step saved its progress, a callback resumed it).
const ATTEMPTS: usize = 20;

/// The flows an abort stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Deploy,
    Clean,
    Rescue,
}

impl Flow {
    /// The flow whose worker runs in `state`.
    fn running_in(state: ProvisionState) -> Option<Flow> {
        match state {
            ProvisionState::Deploying => Some(Flow::Deploy),
            ProvisionState::Cleaning => Some(Flow::Clean),
            ProvisionState::Rescuing => Some(Flow::Rescue),
            _ => None,
        }
    }

    pub(crate) fn of_steps(kind: StepKind) -> Option<Flow> {
        match kind {
            StepKind::Deploy => Some(Flow::Deploy),
            StepKind::Clean => Some(Flow::Clean),
            StepKind::Service => None,
        }
    }

    fn step_kind(self) -> Option<StepKind> {
        match self {
            Flow::Deploy => Some(StepKind::Deploy),
            Flow::Clean => Some(StepKind::Clean),
            Flow::Rescue => None,
        }
    }

    /// `last_error` after the abort (Ironic's words for cleaning and rescue).
    pub(crate) fn message(self, node: &Node) -> String {
        match self {
            Flow::Deploy => format!(
                "By request, the deployment was aborted{}; the node is powered off. Deploy \
                 again or undeploy it.",
                during(&node.deploy_step, "during step")
            ),
            Flow::Clean => format!(
                "By request, the clean operation was aborted{}",
                during(&node.clean_step, "during or after the completion of step")
            ),
            Flow::Rescue => "Rescue operation was aborted by request.".to_owned(),
        }
    }
}

/// ` <words> "<interface>.<step>"`, or nothing when no step runs.
pub(crate) fn during(step: &ferric_model::resources::JsonObject, words: &str) -> String {
    match StepCall::from_json(step) {
        Some(step) => format!(" {words} \"{}.{}\"", step.interface, step.step),
        None => String::new(),
    }
}

/// Undoes what a flow set up after an abort: tells the agent to stop and removes the network
/// boot (the deploy or rescue interface's `clean_up`), then powers the machine off (unless
/// `disable_power_off`). Returns what failed, for `last_error`.
pub(crate) async fn stop_and_power_off(task: &mut Task, flow: Flow) -> Vec<String> {
    let mut problems = Vec::new();
    let interfaces = match task.interfaces() {
        Ok(interfaces) => interfaces,
        Err(error) => return vec![format!("loading the node's driver failed: {error}")],
    };
    let cleaned = match flow {
        Flow::Deploy | Flow::Clean => interfaces.deploy.clean_up(&mut task.node).await,
        Flow::Rescue => interfaces.rescue.clean_up(&mut task.node).await,
    };
    if let Err(error) = cleaned {
        problems.push(match flow {
            Flow::Deploy => format!("cleaning up the deployment failed: {error}"),
            Flow::Clean => format!("cleaning up after cleaning failed: {error}"),
            Flow::Rescue => format!("cleaning up the rescue environment failed: {error}"),
        });
    }
    if !task.node.disable_power_off {
        match interfaces
            .power
            .set_power(&task.node, PowerAction::Off, None)
            .await
        {
            Ok(()) => task.node.power_state = Some(PowerAction::Off.resulting_state()),
            Err(error) => problems.push(format!("powering the node off failed: {error}")),
        }
    }
    problems
}

/// Carries out an accepted abort of the flow running on `task`'s node: stop, unboot, power
/// off, and fail the node with `last_error` naming the abort.
pub(crate) async fn carry_out(task: &mut Task, flow: Flow) -> Result<(), ConductorError> {
    let mut message = flow.message(&task.node);
    tracing::info!(node = %task.uuid(), "{message}");
    // Recorded before the clean-up: a failed phase is never fast-tracked, so the machine goes
    // off and the agent is told to stop.
    task.node.last_error = Some(message.clone());
    let problems = stop_and_power_off(task, flow).await;
    if !problems.is_empty() {
        message = format!("{message} Then {}.", problems.join("; "));
    }
    forget_agent(task);
    match flow.step_kind() {
        Some(kind) => clear_plan(&mut task.node, kind),
        None => forget_rescue_password(&mut task.node),
    }
    task.node.last_error = Some(message);
    task.fire(Event::Fail, Cause::Conductor).await?;
    task.clear_abort_request().await;
    Ok(())
}

impl Conductor {
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
