//! The background half of conductor work: what runs after the API has had its 202, holding
//! the node's lease and a worker slot, until the node reaches a stable, waiting or failed
//! state (`reference/ironic.md` §1.6).

use ferric_drivers::{Inspection, Outcome, StepKind};
use ferric_model::resources::InterfaceKind;
use ferric_model::{Event, ProvisionState};
use tokio::sync::OwnedSemaphorePermit;

use crate::ConductorError;
use crate::abort::{self, Flow};
use crate::abort_signal::Aborted;
use crate::steps::{self, Progress, clear_plan};
use crate::task::{Cause, Task};

/// What a worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Job {
    /// Drive the node through transient states until it rests. `resume`: the node just came
    /// back from a wait, so the step it waited on has finished.
    Drive { resume: bool },
    /// Power the node off and undo the deployment after `abort` (seed 001).
    AfterDeployAbort,
    /// Undo cleaning after `abort`; the machine goes off.
    AfterCleanAbort,
    /// Undo the rescue environment after `abort`; the machine goes off.
    AfterRescueAbort,
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
        Job::AfterDeployAbort => Flow::Deploy,
        Job::AfterCleanAbort => Flow::Clean,
        Job::AfterRescueAbort => Flow::Rescue,
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

/// Moves the node on while it is in a state where the conductor works synchronously.
async fn drive(task: &mut Task, mut resume: bool) -> Result<(), ConductorError> {
    loop {
        let before = task.node.provision_state;
        match before {
            ProvisionState::Verifying => verify(task).await?,
            ProvisionState::Cleaning => steps_flow(task, StepKind::Clean, resume).await?,
            ProvisionState::Deploying => steps_flow(task, StepKind::Deploy, resume).await?,
            ProvisionState::Servicing => steps_flow(task, StepKind::Service, resume).await?,
            ProvisionState::Deleting => tear_down(task).await?,
            ProvisionState::Inspecting => inspect(task, resume).await?,
            ProvisionState::Adopting => adopt(task).await?,
            ProvisionState::Rescuing => rescue(task, resume).await?,
            ProvisionState::Unrescuing => unrescue(task).await?,
            _ => return Ok(()),
        }
        if task.node.provision_state == before {
            return Err(ConductorError::Conflict(format!(
                "node {} did not leave state {before}",
                task.uuid()
            )));
        }
        resume = false;
    }
}

/// `verifying` (seed 003): the power and management credentials work and the power state
/// can be read; otherwise back to `enroll` with `last_error`. The state read is recorded, as
/// Ironic does — except from the fake interface, which only echoes what the node has (so a
/// fake-hardware node's `power_state` stays unset, as on Ironic).
async fn verify(task: &mut Task) -> Result<(), ConductorError> {
    let checked = async {
        let interfaces = task.interfaces()?;
        for kind in [InterfaceKind::Power, InterfaceKind::Management] {
            interfaces.validate(&task.node, kind).await?;
        }
        let power = interfaces.power.get_power_state(&task.node).await?;
        Ok::<_, ConductorError>((interfaces, power))
    }
    .await;
    match checked {
        Ok((interfaces, power)) => {
            if !interfaces.power.echoes_recorded_state() {
                task.node.power_state = Some(power);
            }
            crate::hardware_data::refresh_at_manage(task, &interfaces).await;
            task.fire(Event::Done, Cause::Conductor).await
        }
        Err(error) => {
            task.fail(format!(
                "Failed to verify node {}: {error}. Fix driver_info and run manage again.",
                task.uuid()
            ))
            .await
        }
    }
}

/// `cleaning`, `deploying`, `servicing`: run the step list, then done, wait, hold or fail.
async fn steps_flow(task: &mut Task, kind: StepKind, resume: bool) -> Result<(), ConductorError> {
    if kind == StepKind::Clean && !resume && !has_plan(task, kind) {
        let disabled =
            !task.inner.config.automated_clean || task.node.automated_clean == Some(false);
        if disabled {
            return move_on(task, kind, Event::Done).await;
        }
        let interfaces = task.interfaces()?;
        let overrides = &task.inner.config.clean_step_priority_override;
        let offered = steps::offered_steps(&interfaces, overrides, &task.node, kind);
        let plan = steps::automated_plan(&offered, &[]);
        steps::store_plan(&mut task.node, kind, &plan);
    }
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
            Some(flow) => return abort::carry_out(task, flow).await,
            None => {
                // Servicing is never marked; a stale mark stopped it all the same.
                task.node.last_error = Some("Servicing was stopped by an abort request.".into());
                Event::Fail
            }
        },
        Err(message) => return step_failed(task, kind, message).await,
    };
    move_on(task, kind, event).await
}

/// Fires `event` out of the running flow of `kind`, unless an abort was accepted first: then
/// the abort is carried out. The two are decided in one write (`abort.rs`).
async fn move_on(task: &mut Task, kind: StepKind, event: Event) -> Result<(), ConductorError> {
    match Flow::of_steps(kind) {
        Some(flow) if !task.fire_unless_aborted(event, Cause::Conductor).await? => {
            abort::carry_out(task, flow).await
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
        return abort::carry_out(task, flow).await;
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
            abort::carry_out(task, flow).await
        }
        Some(_) => Ok(()),
        None => task.fire(Event::Fail, Cause::Conductor).await,
    }
}

fn has_plan(task: &Task, kind: StepKind) -> bool {
    task.node
        .driver_internal_info
        .contains_key(&format!("{}_steps", kind.as_str()))
}

/// `deleting`: remove the instance (and its allocation), then automated cleaning.
async fn tear_down(task: &mut Task) -> Result<(), ConductorError> {
    let result = async {
        let interfaces = task.interfaces()?;
        interfaces.deploy.tear_down(&mut task.node).await?;
        Ok::<_, ConductorError>(())
    }
    .await;
    match result {
        Ok(()) => {
            task.node.instance_info.clear();
            task.node.instance_uuid = None;
            task.node.instance_name = None;
            // Ironic destroys the node's allocation at tear-down, so the node can be
            // allocated again once cleaned.
            if let Some(allocation) = task.node.allocation_uuid.take() {
                match task.inner.store.allocation_delete(allocation).await {
                    Ok(()) | Err(ferric_db::Error::NotFound { .. }) => {}
                    Err(error) => {
                        tracing::warn!(node = %task.uuid(), %allocation, %error, "could not delete the torn-down node's allocation");
                    }
                }
            }
            // The deploy interface records the power it changed: the agent's and the ramdisk
            // interfaces power off (unless `disable_power_off`), the fake one, as Ironic's,
            // leaves the machine as it was.
            crate::provision::forget_agent(task);
            crate::console::end_with_instance(task).await;
            task.fire(Event::Clean, Cause::Conductor).await
        }
        Err(error) => {
            task.fail(format!("Failed to tear down node {}: {error}", task.uuid()))
                .await
        }
    }
}

async fn inspect(task: &mut Task, resume: bool) -> Result<(), ConductorError> {
    if resume {
        return crate::inspection::resume(task).await;
    }
    let result = async {
        let interfaces = task.interfaces()?;
        Ok::<_, ConductorError>(interfaces.inspect.inspect(&mut task.node).await?)
    }
    .await;
    match result {
        Ok(Inspection::Done) => task.fire(Event::Done, Cause::Conductor).await,
        Ok(Inspection::Wait) => task.fire(Event::Wait, Cause::Conductor).await,
        Ok(Inspection::Data(data)) => crate::inspection::out_of_band(task, data).await,
        Err(error) => {
            task.fail(format!("Failed to inspect node {}: {error}", task.uuid()))
                .await
        }
    }
}

async fn adopt(task: &mut Task) -> Result<(), ConductorError> {
    let result = async {
        let interfaces = task.interfaces()?;
        for kind in [InterfaceKind::Power, InterfaceKind::Deploy] {
            interfaces.validate(&task.node, kind).await?;
        }
        Ok::<_, ConductorError>(interfaces.power.get_power_state(&task.node).await?)
    }
    .await;
    match result {
        Ok(power) => {
            task.node.power_state = Some(power);
            task.fire(Event::Done, Cause::Conductor).await
        }
        Err(error) => {
            task.fail(format!(
                "Failed to adopt node {}: {error}. Fix the node's settings and adopt again.",
                task.uuid()
            ))
            .await
        }
    }
}

/// `rescuing`: boot the rescue environment. Interrupted by an accepted abort like a step.
async fn rescue(task: &mut Task, resume: bool) -> Result<(), ConductorError> {
    let event = if resume {
        // The rescue environment called back: hand it what it needs (the agent's password).
        let finished = async {
            let interfaces = task.interfaces()?;
            Ok::<_, ConductorError>(interfaces.rescue.finish_rescue(&mut task.node).await?)
        }
        .await;
        if let Err(error) = finished {
            return rescue_failed(task, error).await;
        }
        Event::Done
    } else {
        let signal = task.abort_signal();
        let result = signal
            .unless_aborted(async {
                let interfaces = task.interfaces()?;
                Ok::<_, ConductorError>(interfaces.rescue.rescue(&mut task.node).await?)
            })
            .await;
        match result {
            Err(Aborted) => return abort::carry_out(task, Flow::Rescue).await,
            Ok(Ok(Outcome::Done)) => Event::Done,
            Ok(Ok(Outcome::Wait | Outcome::Poll(_))) => Event::Wait,
            Ok(Err(error)) => return rescue_failed(task, error).await,
        }
    };
    if task.fire_unless_aborted(event, Cause::Conductor).await? {
        Ok(())
    } else {
        abort::carry_out(task, Flow::Rescue).await
    }
}

async fn rescue_failed(task: &mut Task, error: ConductorError) -> Result<(), ConductorError> {
    if task.abort_requested().await {
        return abort::carry_out(task, Flow::Rescue).await;
    }
    crate::provision::forget_rescue_password(&mut task.node);
    let message = format!("Failed to rescue node {}: {error}", task.uuid());
    tracing::warn!(node = %task.uuid(), error = %message, "node failed");
    task.node.last_error = Some(message);
    if task
        .fire_unless_aborted(Event::Fail, Cause::Conductor)
        .await?
    {
        Ok(())
    } else {
        abort::carry_out(task, Flow::Rescue).await
    }
}

async fn unrescue(task: &mut Task) -> Result<(), ConductorError> {
    let result = async {
        let interfaces = task.interfaces()?;
        interfaces.rescue.unrescue(&mut task.node).await?;
        Ok::<_, ConductorError>(())
    }
    .await;
    match result {
        Ok(()) => {
            crate::provision::forget_rescue_password(&mut task.node);
            task.fire(Event::Done, Cause::Conductor).await
        }
        Err(error) => {
            task.fail(format!("Failed to unrescue node {}: {error}", task.uuid()))
                .await
        }
    }
}

/// After the `abort` verb (a node that waited for its agent): tell the agent to stop, remove
/// the network boot and power the machine off (`abort.rs`). Failures are recorded in
/// `last_error`; the node stays in its failed state either way.
async fn after_abort(task: &mut Task, flow: Flow) {
    let problems = abort::stop_and_power_off(task, flow).await;
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
