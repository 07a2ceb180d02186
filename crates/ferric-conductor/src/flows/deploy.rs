//! Deployment (`reference/ironic.md` §1.5–1.6): `deploy` from `available` and `rebuild` from
//! `active` plan the deploy steps — the deploy interface's, the request's and its deploy
//! templates' (`templates.rs`), by priority — and run them through the step engine
//! (`steps.rs`), waiting in `wait call-back` for the agent and holding in `deploy hold`. An
//! abort, waiting or running, fails the node powered off.

use ferric_drivers::{Interfaces, StepKind};
use ferric_model::Event;
use ferric_model::action::ProvisionArgs;
use ferric_model::resources::{JsonObject, Node};

use super::Job;
use crate::ConductorError;
use crate::steps::{
    automated_plan, check_requested, clear_plan, current_step_is_abortable, store_plan,
    store_requested,
};
use crate::task::{Cause, Task};

/// The start of `deploy` or `rebuild`: not protected (rebuild), not in maintenance, the
/// interfaces valid, the requested steps offered; the plan and the config drive stored.
pub(super) async fn start(
    task: &mut Task,
    event: Event,
    args: ProvisionArgs,
) -> Result<(), ConductorError> {
    let node_uuid = task.uuid();
    // Ironic's NodeProtected (403): a protected node keeps its instance.
    if event == Event::Rebuild && task.node.protected {
        return Err(ConductorError::Forbidden(format!(
            "Node {node_uuid} is protected and cannot be undeployed, rebuilt or deleted; unset \
             protected first."
        )));
    }
    if task.node.maintenance {
        return Err(ConductorError::Invalid(format!(
            "Cannot deploy node {node_uuid}: it is in maintenance mode. Clear maintenance \
             first."
        )));
    }
    record_image_type(&mut task.node.instance_info);
    let interfaces = task.interfaces()?;
    super::check(task, &interfaces, event).await?;
    let requested = args.deploy_steps.unwrap_or_default();
    check_requested(&interfaces, &task.node, StepKind::Deploy, &requested)?;
    let requested =
        crate::templates::deploy_steps_with_templates(task, &interfaces, requested).await?;
    let offered = interfaces.offered_steps(&task.node, StepKind::Deploy);
    store_plan(
        &mut task.node,
        StepKind::Deploy,
        &automated_plan(&offered, &requested),
    );
    store_requested(&mut task.node, StepKind::Deploy, &requested);
    match args.configdrive {
        Some(configdrive) => {
            task.node
                .instance_info
                .insert("configdrive".to_owned(), configdrive);
        }
        None => {
            task.node.instance_info.remove("configdrive");
        }
    }
    task.node.last_error = None;
    Ok(())
}

/// `abort` in `wait call-back` or `deploy hold`, unless the current step may not be
/// interrupted; the worker then undoes the deployment and powers the machine off (seed 001).
pub(super) async fn abort_waiting(task: &mut Task) -> Result<Option<Job>, ConductorError> {
    let interfaces = task.interfaces()?;
    current_step_is_abortable(&interfaces, &task.node, StepKind::Deploy)
        .map_err(ConductorError::Forbidden)?;
    super::forget_agent(task);
    clear_plan(&mut task.node, StepKind::Deploy);
    task.node.last_error = Some(
        "By request, the deploy operation was aborted; the node is powered off. Deploy again \
         or undeploy it."
            .to_owned(),
    );
    task.fire(Event::Abort, Cause::Requested).await?;
    Ok(Some(Job::UndoAfterAbort(super::Flow::Deploy)))
}

/// `last_error` after an abort stopped the running deployment.
pub(super) fn abort_message(node: &Node) -> String {
    format!(
        "By request, the deployment was aborted{}; the node is powered off. Deploy again or \
         undeploy it.",
        super::during(&node.deploy_step, "during step")
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
        .map_err(|error| format!("cleaning up the deployment failed: {error}"))
}

/// Records in `instance_info.image_type` what kind of image a deployment writes, as Ironic
/// does when a deployment starts (its conductor's `update_image_type`; clients and Metal3
/// read it back): nothing without an `image_source`, the caller's own value if set, else
/// `partition` when a kernel or ramdisk comes with the image and `whole-disk` when not.
fn record_image_type(instance_info: &mut JsonObject) {
    let has = |key: &str| {
        instance_info
            .get(key)
            .and_then(serde_json::Value::as_str)
            .is_some_and(|value| !value.is_empty())
    };
    if !has("image_source") || has("image_type") {
        return;
    }
    let image_type = if has("kernel") || has("ramdisk") {
        "partition"
    } else {
        "whole-disk"
    };
    instance_info.insert("image_type".to_owned(), image_type.into());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_records_its_image_type_as_ironic_does() {
        use serde_json::json;
        let recorded = |info: serde_json::Value| {
            let serde_json::Value::Object(mut info) = info else {
                unreachable!("an object literal")
            };
            record_image_type(&mut info);
            info.get("image_type").cloned()
        };
        let image = "http://images/ubuntu.qcow2";
        assert_eq!(
            recorded(json!({"image_source": image})),
            Some(json!("whole-disk"))
        );
        assert_eq!(
            recorded(json!({"image_source": image, "kernel": "k", "ramdisk": "r"})),
            Some(json!("partition"))
        );
        assert_eq!(
            recorded(json!({"image_source": image, "image_type": "partition"})),
            Some(json!("partition")),
            "the caller's choice stays"
        );
        // A live ISO (the ramdisk deploy interface) has no image to classify.
        assert_eq!(
            recorded(json!({"boot_iso": "http://images/live.iso"})),
            None
        );
    }
}
