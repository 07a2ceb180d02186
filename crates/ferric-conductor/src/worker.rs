//! The background half of conductor work: what runs after the API has had its 202, holding
//! the node's lease and a worker slot, until the node reaches a stable, waiting or failed
//! state (`reference/ironic.md` §1.6).

use ferric_drivers::{Inspection, Outcome, PowerAction, StepKind};
use ferric_model::resources::InterfaceKind;
use ferric_model::{Event, ProvisionState};
use tokio::sync::OwnedSemaphorePermit;

use crate::ConductorError;
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
    /// Undo cleaning after `abort`.
    AfterCleanAbort,
    /// Undo the rescue environment after `abort`.
    AfterRescueAbort,
}

/// Runs `job` on `task` in the background; the lease and the slot go when it ends.
pub(crate) fn spawn(task: Task, job: Job, permit: OwnedSemaphorePermit) {
    let tracker = task.inner.tracker.clone();
    tracker.spawn(async move {
        let _permit = permit;
        run(task, job).await;
    });
}

async fn run(mut task: Task, job: Job) {
    let node = task.uuid();
    let result = match job {
        Job::Drive { resume } => drive(&mut task, resume).await,
        Job::AfterDeployAbort => after_deploy_abort(&mut task).await,
        Job::AfterCleanAbort => after_clean_abort(&mut task).await,
        Job::AfterRescueAbort => after_rescue_abort(&mut task).await,
    };
    // An abort that came too late to matter is forgotten with the work it meant.
    task.clear_abort_request().await;
    if let Err(error) = result {
        tracing::error!(node = %node, error = %error, "conductor task failed");
        if task.node.provision_state.is_stuck_treated_as_failure() {
            let message = format!("The conductor could not finish its work on the node: {error}");
            if let Err(error) = task.fail(message).await {
                // The recovery reconciler fails the node once the lease is gone.
                tracing::error!(node = %node, error = %error, "could not record the failure");
            }
        }
    }
    task.release().await;
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
            return task.fire(Event::Done, Cause::Conductor).await;
        }
        let interfaces = task.interfaces()?;
        let plan = steps::automated_plan(&interfaces, kind, &[]);
        steps::store_plan(&mut task.node, kind, &plan);
    }
    match steps::run(task, kind, resume).await {
        Ok(Progress::Done) => {
            // Manual cleaning returns to manageable through its own edge.
            let manual_clean = kind == StepKind::Clean
                && task.node.target_provision_state == Some(ProvisionState::Manageable);
            let event = if manual_clean {
                Event::Manage
            } else {
                Event::Done
            };
            task.fire(event, Cause::Conductor).await
        }
        Ok(Progress::Wait) => task.fire(Event::Wait, Cause::Conductor).await,
        Ok(Progress::Hold) => task.fire(Event::Hold, Cause::Conductor).await,
        Err(mut message) => {
            let aborted = task.clear_abort_request().await;
            if aborted {
                message = format!(
                    "By request, the {} was aborted: {message}. The node is powered off; \
                     deploy again or undeploy it.",
                    if kind == StepKind::Deploy {
                        "deployment"
                    } else {
                        kind.as_str()
                    }
                );
            }
            // Undo what the flow set up (network boot, a running agent, power). The error is
            // recorded first: a failed phase is never fast-tracked, so the machine goes off.
            task.node.last_error = Some(message.clone());
            match task.interfaces() {
                Ok(interfaces) => {
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
            if kind == StepKind::Clean {
                // Ironic puts a node whose cleaning failed into maintenance (§1.6).
                task.node.maintenance = true;
                task.node.fault = Some("clean failure".to_owned());
                task.node.maintenance_reason = Some(message.clone());
            }
            task.fail(message).await
        }
    }
}

fn has_plan(task: &Task, kind: StepKind) -> bool {
    task.node
        .driver_internal_info
        .contains_key(&format!("{}_steps", kind.as_str()))
}

/// `deleting`: remove the instance, then automated cleaning.
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
            task.node.power_state = Some(PowerAction::Off.resulting_state());
            crate::provision::forget_agent(task);
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

async fn rescue(task: &mut Task, resume: bool) -> Result<(), ConductorError> {
    if resume {
        return task.fire(Event::Done, Cause::Conductor).await;
    }
    let result = async {
        let interfaces = task.interfaces()?;
        Ok::<_, ConductorError>(interfaces.rescue.rescue(&mut task.node).await?)
    }
    .await;
    match result {
        Ok(Outcome::Done) => task.fire(Event::Done, Cause::Conductor).await,
        Ok(Outcome::Wait | Outcome::Poll(_)) => task.fire(Event::Wait, Cause::Conductor).await,
        Err(error) => {
            crate::provision::forget_rescue_password(&mut task.node);
            task.fail(format!("Failed to rescue node {}: {error}", task.uuid()))
                .await
        }
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

/// After a deploy abort: undo the deployment and power the machine off. Failures are
/// recorded in `last_error`; the node stays in `deploy failed` either way.
async fn after_deploy_abort(task: &mut Task) -> Result<(), ConductorError> {
    let interfaces = task.interfaces()?;
    let mut problems = Vec::new();
    if let Err(error) = interfaces.deploy.clean_up(&mut task.node).await {
        problems.push(format!("cleaning up the deployment failed: {error}"));
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
    record_problems(task, problems).await
}

async fn after_clean_abort(task: &mut Task) -> Result<(), ConductorError> {
    let interfaces = task.interfaces()?;
    let mut problems = Vec::new();
    if let Err(error) = interfaces.deploy.clean_up(&mut task.node).await {
        problems.push(format!("cleaning up after cleaning failed: {error}"));
    }
    record_problems(task, problems).await
}

async fn after_rescue_abort(task: &mut Task) -> Result<(), ConductorError> {
    let interfaces = task.interfaces()?;
    let mut problems = Vec::new();
    if let Err(error) = interfaces.rescue.clean_up(&mut task.node).await {
        problems.push(format!(
            "cleaning up the rescue environment failed: {error}"
        ));
    }
    record_problems(task, problems).await
}

async fn record_problems(task: &mut Task, problems: Vec<String>) -> Result<(), ConductorError> {
    if !problems.is_empty() {
        let detail = problems.join("; ");
        let message = match &task.node.last_error {
            Some(previous) => format!("{previous} Then {detail}."),
            None => format!("{detail}."),
        };
        task.node.last_error = Some(message.clone());
        task.history("ERROR", "provisioning", message).await;
    }
    task.save().await
}
