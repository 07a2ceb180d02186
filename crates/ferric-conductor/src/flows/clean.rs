//! Cleaning (`reference/ironic.md` §1.5–1.6): automated cleaning after `provide` and undeploy
//! runs the offered steps by priority (the site's `clean_step_priority_override` applied; none
//! at all when `automated_clean` is off), manual cleaning (`clean` from `manageable`) the steps
//! an operator listed, with or without the agent ramdisk. Both run through the step engine
//! (`steps.rs`), wait in `clean wait` for the agent and may hold in `clean hold`. A node whose
//! cleaning failed goes into maintenance; an abort fails it with Ironic's words naming the step.

use ferric_drivers::{Interfaces, StepKind};
use ferric_model::Event;
use ferric_model::action::ProvisionArgs;
use ferric_model::resources::{JsonObject, Node};

use super::Job;
use crate::ConductorError;
use crate::steps::{self, clear_plan, current_step_is_abortable};
use crate::task::{Cause, Task};

/// The start of `provide` (automated cleaning follows) or `clean` (manual cleaning).
pub(super) async fn start(
    task: &mut Task,
    event: Event,
    args: ProvisionArgs,
) -> Result<(), ConductorError> {
    if event == Event::Provide {
        if task.node.retired {
            return Err(ConductorError::Invalid(format!(
                "Node {} is retired and cannot be provided; unset retired first.",
                task.uuid()
            )));
        }
        task.node.last_error = None;
        return Ok(());
    }
    let requested = args.clean_steps.unwrap_or_default();
    super::start_requested_steps(task, StepKind::Clean, requested, args.disable_ramdisk).await
}

/// `cleaning`: an automated cleaning plans its steps first (unless it is turned off), then
/// the steps run.
pub(super) async fn drive(task: &mut Task, resume: bool) -> Result<(), ConductorError> {
    let kind = StepKind::Clean;
    if !resume && !super::has_plan(task, kind) {
        let disabled =
            !task.inner.config.automated_clean || task.node.automated_clean == Some(false);
        if disabled {
            return super::move_on(task, kind, Event::Done).await;
        }
        let interfaces = task.interfaces()?;
        let overrides = &task.inner.config.clean_step_priority_override;
        let offered = steps::offered_steps(&interfaces, overrides, &task.node, kind);
        let plan = steps::automated_plan(&offered, &[]);
        steps::store_plan(&mut task.node, kind, &plan);
    }
    super::run_steps(task, kind, resume).await
}

/// `abort` in `clean wait` or `clean hold`, unless the current step may not be interrupted;
/// the worker then undoes the cleaning and powers the machine off.
pub(super) async fn abort_waiting(task: &mut Task) -> Result<Option<Job>, ConductorError> {
    let interfaces = task.interfaces()?;
    current_step_is_abortable(&interfaces, &task.node, StepKind::Clean)
        .map_err(ConductorError::Forbidden)?;
    // Ironic's words (`do_node_clean_abort`): clients and scripts match on them.
    let step = describe_step(&task.node.clean_step);
    super::forget_agent(task);
    clear_plan(&mut task.node, StepKind::Clean);
    tracing::info!(node = %task.uuid(), "clean operation aborted{step}");
    task.node.last_error = Some(format!("By request, the clean operation was aborted{step}"));
    task.fire(Event::Abort, Cause::Requested).await?;
    Ok(Some(Job::UndoAfterAbort(super::Flow::Clean)))
}

/// `last_error` after an abort stopped the running cleaning (Ironic's words).
pub(super) fn abort_message(node: &Node) -> String {
    format!(
        "By request, the clean operation was aborted{}",
        describe_step(&node.clean_step)
    )
}

/// After an abort: the agent told to stop and the network boot removed.
pub(super) async fn undo_after_abort(
    task: &mut Task,
    interfaces: &Interfaces,
) -> Result<(), String> {
    interfaces
        .deploy
        .clean_up(&mut task.node)
        .await
        .map_err(|error| format!("cleaning up after cleaning failed: {error}"))
}

/// ` during or after the completion of step "<interface>.<step>"`, or nothing.
fn describe_step(step: &JsonObject) -> String {
    super::during(step, "during or after the completion of step")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aborted_clean_step_is_named_as_ironic_names_it() {
        let step = serde_json::json!({"interface": "deploy", "step": "erase_devices"});
        let step = step.as_object().unwrap().clone();
        assert_eq!(
            describe_step(&step),
            " during or after the completion of step \"deploy.erase_devices\""
        );
        assert_eq!(describe_step(&Default::default()), "");
    }
}
