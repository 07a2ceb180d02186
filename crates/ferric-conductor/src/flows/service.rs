//! Servicing (`service` from `active`): the steps an operator listed run on a deployed node
//! through the step engine (`steps.rs`), with or without the agent ramdisk, waiting in
//! `service wait` and holding in `service hold`. Its worker is never marked for abort; the
//! `abort` verb stops it while it waits or holds, and takes a failed servicing back to
//! `active`.

use ferric_drivers::StepKind;
use ferric_model::action::ProvisionArgs;
use ferric_model::{Event, ProvisionState};

use super::Job;
use crate::ConductorError;
use crate::steps::{clear_plan, current_step_is_abortable};
use crate::task::{Cause, Task};

/// `last_error` when a stale abort mark stopped servicing all the same.
pub(super) const STOPPED: &str = "Servicing was stopped by an abort request.";

/// The start of `service`: the requested steps checked and stored.
pub(super) async fn start(task: &mut Task, args: ProvisionArgs) -> Result<(), ConductorError> {
    let requested = args.service_steps.unwrap_or_default();
    super::start_requested_steps(task, StepKind::Service, requested, args.disable_ramdisk).await
}

/// `abort` in `service wait` or `service hold`, unless the current step may not be
/// interrupted: through `service failed` back to `active` at once; in `service failed`, back
/// to `active`.
pub(super) async fn abort_waiting(task: &mut Task) -> Result<Option<Job>, ConductorError> {
    if task.node.provision_state == ProvisionState::ServiceFailed {
        if task.node.maintenance {
            return Err(ConductorError::Conflict(format!(
                "Node {} is in maintenance; clear maintenance before aborting service.",
                task.uuid()
            )));
        }
        task.fire(Event::Abort, Cause::Requested).await?;
        return Ok(None);
    }
    let interfaces = task.interfaces()?;
    current_step_is_abortable(&interfaces, &task.node, StepKind::Service)
        .map_err(ConductorError::Forbidden)?;
    super::forget_agent(task);
    clear_plan(&mut task.node, StepKind::Service);
    task.node.last_error = Some("Service operation was aborted by request.".to_owned());
    task.fire(Event::Abort, Cause::Requested).await?;
    task.fire(Event::Abort, Cause::Conductor).await?;
    Ok(None)
}
