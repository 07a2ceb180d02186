//! The provision flows, one module each: `manage.rs` (verifying, adopting), `inspect.rs`,
//! `clean.rs` (automated and manual cleaning, `provide`), `deploy.rs` (deploy, rebuild),
//! `service.rs`, `rescue.rs` (rescue, unrescue) and `delete.rs` (undeploy). Each holds the
//! three things a flow is: its start checks (run under the node's lease before the API's 202,
//! from `provision.rs`), its drive step (what the worker does in its transient state) and its
//! undo after an abort (the `abort` verb in its waiting states, and an accepted
//! `DELETE …/provision` while its worker runs). This module is the table over them ([`Flow`])
//! and the worker: what runs after the 202, holding the node's lease and a worker slot, until
//! the node reaches a stable, waiting or failed state (`reference/ironic.md` §1.6) — a lookup
//! from the node's state to its flow, repeated until the node rests.
//!
//! Theory of operation of an abort (seed 001's `DELETE /v1/nodes/{node}/provision`): a
//! deployment, cleaning or rescue runs in a worker that holds the node's lease, maybe on
//! another conductor. The API side (`provision.rs`) checks that the current step may be
//! interrupted and marks the node — a `node_abort_requests` row written in one transaction
//! with a bump of the node's revision, and only if the node is still as it was checked. The
//! worker notices the mark:
//! - between two steps and whenever it moves the node on (to the next step, to `active`, to a
//!   waiting or hold state), because those writes are [`Task::save_unless_aborted`] /
//!   [`Task::fire_unless_aborted`]: one statement that refuses to write over a mark. So the
//!   mark and the move to `active` never both win: either the mark came first and the node
//!   fails, or the deployment ended first and the DELETE finds nothing to abort (404);
//! - inside an interruptible step, the reserved `wait` step, a preparation or a poll of the
//!   agent, through [`AbortSignal`](crate::abort_signal::AbortSignal): the work is dropped at
//!   its next await point.
//!
//! Then [`carry_out`] tells the agent to stop, removes the network boot, powers the machine
//! off and fails the node (`deploy failed`, `clean failed`, `rescue failed`) with `last_error`
//! naming the abort. A node waiting for its agent (`wait call-back`, `clean wait`, …) has no
//! worker: the DELETE there is the `abort` verb, under the node's lease
//! ([`Flow::abort_waiting`], then [`Job::UndoAfterAbort`]).

mod clean;
mod delete;
mod deploy;
mod inspect;
mod manage;
pub(crate) mod rescue;
mod service;

use ferric_drivers::{DriverError, Interfaces, PowerAction, StepCall, StepKind};
use ferric_model::action::ProvisionArgs;
use ferric_model::resources::Node;
use ferric_model::{Event, ProvisionState};
use tokio::sync::OwnedSemaphorePermit;

use crate::ConductorError;
use crate::steps::{self, Progress, clear_plan};
use crate::task::{Cause, Task};

/// A provision flow: the table from states and requests to the module that handles them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// `verifying` (from `manage`) and `adopting`.
    Manage,
    Inspect,
    /// Automated (`provide`, undeploy) and manual cleaning.
    Clean,
    /// `deploy` and `rebuild`.
    Deploy,
    Service,
    /// `rescue` and `unrescue`.
    Rescue,
    /// Undeploy's tear-down (`deleted`); cleaning follows.
    Delete,
}

impl Flow {
    /// The flow a worker drives in `state`; `None` in a state no worker drives on from.
    fn driving(state: ProvisionState) -> Option<Flow> {
        match state {
            ProvisionState::Verifying | ProvisionState::Adopting => Some(Flow::Manage),
            ProvisionState::Inspecting => Some(Flow::Inspect),
            ProvisionState::Cleaning => Some(Flow::Clean),
            ProvisionState::Deploying => Some(Flow::Deploy),
            ProvisionState::Servicing => Some(Flow::Service),
            ProvisionState::Rescuing | ProvisionState::Unrescuing => Some(Flow::Rescue),
            ProvisionState::Deleting => Some(Flow::Delete),
            _ => None,
        }
    }

    /// The flow a requested `event` starts; `None` for the events that are not a flow's
    /// (`abort`, `unhold`, and those the conductor fires itself).
    pub(crate) fn started_by(event: Event) -> Option<Flow> {
        match event {
            Event::Manage | Event::Adopt => Some(Flow::Manage),
            Event::Inspect => Some(Flow::Inspect),
            Event::Provide | Event::Clean => Some(Flow::Clean),
            Event::Deploy | Event::Rebuild => Some(Flow::Deploy),
            Event::Service => Some(Flow::Service),
            Event::Rescue | Event::Unrescue => Some(Flow::Rescue),
            Event::Delete => Some(Flow::Delete),
            Event::Abort
            | Event::Unhold
            | Event::Done
            | Event::Fail
            | Event::Wait
            | Event::Resume
            | Event::Hold => None,
        }
    }

    /// The flow the `abort` verb stops in `state` (a wait, a hold, a failed servicing).
    pub(crate) fn aborted_in(state: ProvisionState) -> Option<Flow> {
        match state {
            ProvisionState::InspectWait => Some(Flow::Inspect),
            ProvisionState::WaitCallBack | ProvisionState::DeployHold => Some(Flow::Deploy),
            ProvisionState::CleanWait | ProvisionState::CleanHold => Some(Flow::Clean),
            ProvisionState::RescueWait => Some(Flow::Rescue),
            ProvisionState::ServiceWait
            | ProvisionState::ServiceHold
            | ProvisionState::ServiceFailed => Some(Flow::Service),
            _ => None,
        }
    }

    /// The flow whose running worker an accepted `DELETE …/provision` stops in `state`.
    pub(crate) fn running_in(state: ProvisionState) -> Option<Flow> {
        match state {
            ProvisionState::Deploying => Some(Flow::Deploy),
            ProvisionState::Cleaning => Some(Flow::Clean),
            ProvisionState::Rescuing => Some(Flow::Rescue),
            _ => None,
        }
    }

    /// The flow of steps of `kind` that an accepted abort stops while its worker runs
    /// (servicing is never marked).
    fn of_steps(kind: StepKind) -> Option<Flow> {
        match kind {
            StepKind::Deploy => Some(Flow::Deploy),
            StepKind::Clean => Some(Flow::Clean),
            StepKind::Service => None,
        }
    }

    /// The kind of steps the flow runs, if it runs steps that may refuse an abort.
    pub(crate) fn step_kind(self) -> Option<StepKind> {
        match self {
            Flow::Deploy => Some(StepKind::Deploy),
            Flow::Clean => Some(StepKind::Clean),
            Flow::Service => Some(StepKind::Service),
            Flow::Manage | Flow::Inspect | Flow::Rescue | Flow::Delete => None,
        }
    }

    /// The start checks of the flow `event` begins: under the node's lease, before the
    /// requested transition is taken (`provision.rs` takes it).
    pub(crate) async fn start(
        self,
        task: &mut Task,
        event: Event,
        args: ProvisionArgs,
    ) -> Result<(), ConductorError> {
        match self {
            Flow::Manage => manage::start(task, event),
            Flow::Inspect => inspect::start(task).await,
            Flow::Clean => clean::start(task, event, args).await,
            Flow::Deploy => deploy::start(task, event, args).await,
            Flow::Service => service::start(task, args).await,
            Flow::Rescue => rescue::start(task, event, args).await,
            Flow::Delete => delete::start(task).await,
        }
    }

    /// The drive step: moves the node on from the flow's transient state. `resume`: the
    /// node just came back from a wait.
    async fn drive(self, task: &mut Task, resume: bool) -> Result<(), ConductorError> {
        match self {
            Flow::Manage => manage::drive(task).await,
            Flow::Inspect => inspect::drive(task, resume).await,
            Flow::Clean => clean::drive(task, resume).await,
            Flow::Deploy => run_steps(task, StepKind::Deploy, resume).await,
            Flow::Service => run_steps(task, StepKind::Service, resume).await,
            Flow::Rescue => rescue::drive(task, resume).await,
            Flow::Delete => delete::drive(task).await,
        }
    }

    /// The `abort` verb in a state of [`Flow::aborted_in`]: the flow's own checks and words,
    /// the requested transition, and what the worker undoes next (if anything).
    pub(crate) async fn abort_waiting(
        self,
        task: &mut Task,
    ) -> Result<Option<Job>, ConductorError> {
        match self {
            Flow::Inspect => inspect::abort_waiting(task).await,
            Flow::Deploy => deploy::abort_waiting(task).await,
            Flow::Clean => clean::abort_waiting(task).await,
            Flow::Rescue => rescue::abort_waiting(task).await,
            Flow::Service => service::abort_waiting(task).await,
            Flow::Manage | Flow::Delete => Err(ConductorError::InvalidTransition {
                node: task.uuid(),
                action: "abort".to_owned(),
                state: task.node.provision_state,
            }),
        }
    }

    /// `last_error` after an accepted abort stopped the flow's worker (Ironic's words for
    /// cleaning and rescue).
    fn abort_message(self, node: &Node) -> String {
        match self {
            Flow::Deploy => deploy::abort_message(node),
            Flow::Clean => clean::abort_message(node),
            Flow::Rescue => rescue::ABORTED.to_owned(),
            Flow::Service => service::STOPPED.to_owned(),
            Flow::Manage | Flow::Inspect | Flow::Delete => {
                format!("By request, the {self:?} operation was aborted.")
            }
        }
    }

    /// The flow's own undo after an abort: what it set up goes (the agent told to stop, the
    /// network boot removed). The error is the problem's words for `last_error`.
    async fn undo_after_abort(
        self,
        task: &mut Task,
        interfaces: &Interfaces,
    ) -> Result<(), String> {
        match self {
            Flow::Deploy => deploy::undo_after_abort(task, interfaces).await,
            Flow::Clean => clean::undo_after_abort(task, interfaces).await,
            Flow::Rescue => rescue::undo_after_abort(task, interfaces).await,
            Flow::Manage | Flow::Inspect | Flow::Service | Flow::Delete => Ok(()),
        }
    }

    /// What the flow forgets with an abort carried out by its worker (its step plan, the
    /// rescue password).
    fn forget_after_abort(self, node: &mut Node) {
        match self {
            Flow::Rescue => rescue::forget_rescue_password(node),
            Flow::Manage | Flow::Inspect | Flow::Delete => {}
            Flow::Clean | Flow::Deploy | Flow::Service => {
                if let Some(kind) = self.step_kind() {
                    clear_plan(node, kind);
                }
            }
        }
    }
}

/// What a worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Job {
    /// Drive the node through transient states until it rests. `resume`: the node just came
    /// back from a wait, so the step it waited on has finished.
    Drive { resume: bool },
    /// After the `abort` verb (a node that waited for its agent): undo what the flow set up
    /// and power the machine off; the node already rests in its failed state.
    UndoAfterAbort(Flow),
}

/// Runs `job` on `task` in the background; the lease and the slot go when it ends. The lease
/// goes with the write that brings the node to rest (`Task::release_at_rest`), so a client
/// that sees the node's new state can act on it at once.
pub(crate) fn spawn(mut task: Task, job: Job, permit: OwnedSemaphorePermit) {
    task.release_at_rest();
    let tracker = task.inner.tracker.clone();
    tracker.spawn(async move {
        let _permit = permit;
        run(task, job).await;
    });
}

async fn run(mut task: Task, job: Job) {
    let node = task.uuid();
    let flow = match job {
        Job::Drive { resume } => {
            drive_to_rest(task, resume).await;
            return;
        }
        Job::UndoAfterAbort(flow) => flow,
    };
    // The node already rests in its failed state: what the clean-up did is the last write,
    // and the lease goes with it.
    after_abort(&mut task, flow).await;
    if let Err(error) = task.save_and_release_ending().await {
        tracing::error!(node = %node, error = %error, "conductor task failed");
    }
}

/// [`drive`], failing the node if the conductor could not finish; the lease goes with the
/// node's last transition, or at the end.
async fn drive_to_rest(mut task: Task, resume: bool) {
    let node = task.uuid();
    let result = drive(&mut task, resume).await;
    if let Err(error) = result {
        tracing::error!(node = %node, error = %error, "conductor task failed");
        if task.lease_lost() {
            // Fenced off: the node is another conductor's now, and so is its state.
            tracing::error!(node = %node, "abandoned the node: another conductor took its lease over");
        } else if task.node.provision_state.is_stuck_treated_as_failure() {
            let message = format!("The conductor could not finish its work on the node: {error}");
            if let Err(error) = task.fail(message).await {
                // The recovery reconciler fails the node once the lease is gone.
                tracing::error!(node = %node, error = %error, "could not record the failure");
            }
        }
    }
    // An abort that came too late to matter is forgotten with the work it meant.
    task.release_ending().await;
}

/// Moves the node on while it is in a state where the conductor works synchronously: the
/// state's flow drives it, until it rests.
async fn drive(task: &mut Task, mut resume: bool) -> Result<(), ConductorError> {
    loop {
        let before = task.node.provision_state;
        let Some(flow) = Flow::driving(before) else {
            return Ok(());
        };
        flow.drive(task, resume).await?;
        if task.node.provision_state == before {
            return Err(ConductorError::Conflict(format!(
                "node {} did not leave state {before}",
                task.uuid()
            )));
        }
        resume = false;
    }
}

/// `cleaning`, `deploying`, `servicing`: run the step list, then done, wait, hold or fail.
async fn run_steps(task: &mut Task, kind: StepKind, resume: bool) -> Result<(), ConductorError> {
    let progress = steps::run(task, kind, resume).await;
    let flow = Flow::of_steps(kind);
    let event = match progress {
        Ok(Progress::Done) => {
            // Manual cleaning returns to manageable through its own edge.
            let manual_clean = kind == StepKind::Clean
                && task.node.target_provision_state == Some(ProvisionState::Manageable);
            if manual_clean {
                Event::Manage
            } else {
                Event::Done
            }
        }
        Ok(Progress::Wait) => Event::Wait,
        Ok(Progress::Hold) => Event::Hold,
        Ok(Progress::Aborted) => match flow {
            Some(flow) => return carry_out(task, flow).await,
            None => {
                // Servicing is never marked; a stale mark stopped it all the same.
                task.node.last_error = Some(service::STOPPED.into());
                Event::Fail
            }
        },
        Err(message) => return step_failed(task, kind, message).await,
    };
    move_on(task, kind, event).await
}

/// Fires `event` out of the running flow of `kind`, unless an abort was accepted first: then
/// the abort is carried out. The two are decided in one write (module comment).
async fn move_on(task: &mut Task, kind: StepKind, event: Event) -> Result<(), ConductorError> {
    match Flow::of_steps(kind) {
        Some(flow) if !task.fire_unless_aborted(event, Cause::Conductor).await? => {
            carry_out(task, flow).await
        }
        Some(_) => Ok(()),
        None => task.fire(event, Cause::Conductor).await,
    }
}

/// A step, the preparation or the finish of a flow failed with `message`.
async fn step_failed(
    task: &mut Task,
    kind: StepKind,
    mut message: String,
) -> Result<(), ConductorError> {
    let flow = Flow::of_steps(kind);
    if let Some(flow) = flow
        && task.abort_requested().await
    {
        // The abort was accepted before the failure: it is what the operator reads.
        return carry_out(task, flow).await;
    }
    // Undo what the flow set up (network boot, a running agent, power). The error is
    // recorded first: a failed phase is never fast-tracked, so the machine goes off.
    task.node.last_error = Some(message.clone());
    match task.interfaces() {
        Ok(interfaces) => {
            // The agent's logs, before the machine goes off (`deploy_logs_collect`).
            let label = match kind {
                StepKind::Clean => Some("cleaning"),
                StepKind::Service => Some("servicing"),
                StepKind::Deploy => None,
            };
            if let Some(path) = interfaces
                .deploy
                .collect_ramdisk_logs(&task.node, label, true)
                .await
            {
                message = format!("{message} The ramdisk's logs are in {}.", path.display());
            }
            let undone = if kind == StepKind::Deploy {
                interfaces.deploy.clean_up(&mut task.node).await
            } else if steps::ramdisk_disabled(&task.node, kind) {
                // Nothing was booted for this flow: nothing to undo.
                Ok(())
            } else {
                interfaces.deploy.finish(&mut task.node, kind).await
            };
            if let Err(error) = undone {
                message = format!("{message} Then cleaning up failed: {error}");
            }
            if let Some(problem) =
                crate::networking::after_failure(&interfaces, &mut task.node, kind).await
            {
                message = format!("{message} Then {problem}");
            }
        }
        Err(error) => message = format!("{message} Then cleaning up failed: {error}"),
    }
    clear_plan(&mut task.node, kind);
    let maintenance = (
        task.node.maintenance,
        task.node.fault.clone(),
        task.node.maintenance_reason.clone(),
    );
    if kind == StepKind::Clean {
        // Ironic puts a node whose cleaning failed into maintenance (§1.6).
        task.node.maintenance = true;
        task.node.fault = Some("clean failure".to_owned());
        task.node.maintenance_reason = Some(message.clone());
    }
    tracing::warn!(node = %task.uuid(), error = %message, "node failed");
    task.node.last_error = Some(message);
    match flow {
        Some(flow)
            if !task
                .fire_unless_aborted(Event::Fail, Cause::Conductor)
                .await? =>
        {
            // Marked while the failure was being undone: the abort is what happened.
            (task.node.maintenance, task.node.fault) = (maintenance.0, maintenance.1);
            task.node.maintenance_reason = maintenance.2;
            carry_out(task, flow).await
        }
        Some(_) => Ok(()),
        None => task.fire(Event::Fail, Cause::Conductor).await,
    }
}

/// Whether the node has a step plan of `kind` stored.
fn has_plan(task: &Task, kind: StepKind) -> bool {
    task.node
        .driver_internal_info
        .contains_key(&format!("{}_steps", kind.as_str()))
}

/// The start of a manual cleaning or a servicing: the requested steps checked and stored as
/// the plan, with or without the agent ramdisk.
async fn start_requested_steps(
    task: &mut Task,
    kind: StepKind,
    requested: Vec<StepCall>,
    disable_ramdisk: Option<bool>,
) -> Result<(), ConductorError> {
    let interfaces = task.interfaces()?;
    steps::check_requested(&interfaces, &task.node, kind, &requested)?;
    let no_ramdisk = disable_ramdisk == Some(true);
    if no_ramdisk {
        steps::check_without_ramdisk(&interfaces, kind, &requested)?;
    }
    steps::store_plan(&mut task.node, kind, &requested);
    if no_ramdisk {
        steps::disable_ramdisk(&mut task.node, kind);
    }
    task.node.last_error = None;
    Ok(())
}

/// A driver's refusal as the 400 it is at a flow's start.
fn invalid(error: DriverError) -> ConductorError {
    match error {
        DriverError::Failed { message, .. } => ConductorError::Invalid(message),
        other => ConductorError::Driver(other),
    }
}

/// Validates the interfaces `event` needs (`view::checks_for`, which validate reports on too).
async fn check(task: &Task, interfaces: &Interfaces, event: Event) -> Result<(), ConductorError> {
    for kind in crate::view::checks_for(event) {
        interfaces
            .validate(&task.node, *kind)
            .await
            .map_err(invalid)?;
    }
    Ok(())
}

/// Forgets the agent the node was talking to: it must look the node up again.
pub(crate) fn forget_agent(task: &mut Task) {
    ferric_drivers::agent_client::forget_agent(&mut task.node);
}

/// ` <words> "<interface>.<step>"`, or nothing when no step runs.
fn during(step: &ferric_model::resources::JsonObject, words: &str) -> String {
    match StepCall::from_json(step) {
        Some(step) => format!(" {words} \"{}.{}\"", step.interface, step.step),
        None => String::new(),
    }
}

/// Undoes what a flow set up after an abort: the flow's own undo (the agent told to stop, the
/// network boot removed), then the machine powered off (unless `disable_power_off`). Returns
/// what failed, for `last_error`.
async fn stop_and_power_off(task: &mut Task, flow: Flow) -> Vec<String> {
    let mut problems = Vec::new();
    let interfaces = match task.interfaces() {
        Ok(interfaces) => interfaces,
        Err(error) => return vec![format!("loading the node's driver failed: {error}")],
    };
    if let Err(problem) = flow.undo_after_abort(task, &interfaces).await {
        problems.push(problem);
    }
    let moved = match flow.step_kind() {
        Some(kind) => crate::networking::after_failure(&interfaces, &mut task.node, kind).await,
        None if flow == Flow::Rescue => {
            crate::networking::leave_rescue(&interfaces, &mut task.node)
                .await
                .err()
                .map(|error| format!("moving the switch ports back failed: {error}"))
        }
        None => None,
    };
    problems.extend(moved);
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
async fn carry_out(task: &mut Task, flow: Flow) -> Result<(), ConductorError> {
    let mut message = flow.abort_message(&task.node);
    tracing::info!(node = %task.uuid(), "{message}");
    // Recorded before the clean-up: a failed phase is never fast-tracked, so the machine goes
    // off and the agent is told to stop.
    task.node.last_error = Some(message.clone());
    let problems = stop_and_power_off(task, flow).await;
    if !problems.is_empty() {
        message = format!("{message} Then {}.", problems.join("; "));
    }
    forget_agent(task);
    flow.forget_after_abort(&mut task.node);
    task.node.last_error = Some(message);
    task.fire(Event::Fail, Cause::Conductor).await?;
    task.clear_abort_request().await;
    Ok(())
}

/// After the `abort` verb (a node that waited for its agent): tell the agent to stop, remove
/// the network boot and power the machine off. Failures are recorded in `last_error`; the
/// node stays in its failed state either way.
async fn after_abort(task: &mut Task, flow: Flow) {
    let problems = stop_and_power_off(task, flow).await;
    record_problems(task, problems).await;
}

/// Adds what went wrong to `last_error` and the history; the caller saves the node.
async fn record_problems(task: &mut Task, problems: Vec<String>) {
    if !problems.is_empty() {
        let detail = problems.join("; ");
        let message = match &task.node.last_error {
            Some(previous) => format!("{previous} Then {detail}."),
            None => format!("{detail}."),
        };
        task.node.last_error = Some(message.clone());
        task.history("ERROR", "provisioning", message).await;
    }
}
