//! Callback deadlines: a node that waits longer than its deadline in `wait call-back`,
//! `clean wait`, `inspect wait`, `rescue wait` or `service wait` is failed with a
//! `last_error` saying what it waited for (`reference/ironic.md` §6.2). Nodes in maintenance
//! are left alone, as Ironic does; a deadline of `None` disables the check for that state.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use ferric_db::{NodeFilter, Page};
use ferric_drivers::StepKind;
use ferric_model::ProvisionState;

use crate::steps::clear_plan;
use crate::task::Task;
use crate::{ConductorError, Inner};

fn deadline(inner: &Inner, state: ProvisionState) -> Option<Duration> {
    let config = &inner.config;
    match state {
        ProvisionState::WaitCallBack => config.deploy_callback_timeout,
        ProvisionState::CleanWait => config.clean_callback_timeout,
        ProvisionState::InspectWait => config.inspect_wait_timeout,
        ProvisionState::RescueWait => config.rescue_callback_timeout,
        ProvisionState::ServiceWait => config.service_callback_timeout,
        _ => None,
    }
}

pub(crate) async fn run_once(
    inner: &Arc<Inner>,
    now: DateTime<Utc>,
) -> Result<usize, ConductorError> {
    let mut acted = 0;
    for state in ProvisionState::ALL
        .into_iter()
        .filter(|state| state.has_callback_deadline())
    {
        let Some(limit) = deadline(inner, state).filter(|limit| !limit.is_zero()) else {
            continue;
        };
        let Some(before) = TimeDelta::from_std(limit)
            .ok()
            .and_then(|limit| now.checked_sub_signed(limit))
        else {
            continue;
        };
        let filter = NodeFilter {
            provision_state: Some(state),
            provision_updated_before: Some(before),
            maintenance: Some(false),
            ..NodeFilter::default()
        };
        for node in inner.store.node_list(&filter, &Page::all()).await? {
            // Another conductor's node: its owner keeps its deadline.
            if !inner.owns(&node) {
                continue;
            }
            let mut task = match Task::acquire(inner, node.uuid).await {
                Ok(task) => task,
                Err(ConductorError::NodeLocked { .. } | ConductorError::NodeNotFound(_)) => {
                    continue;
                }
                Err(error) => return Err(error),
            };
            // Read again under the lease: a callback may have arrived meanwhile.
            let still_late = task.node.provision_state == state
                && !task.node.maintenance
                && task
                    .node
                    .provision_updated_at
                    .is_none_or(|updated| updated < before);
            let result = if still_late {
                expire(&mut task, state, limit).await.map(|()| true)
            } else {
                Ok(false)
            };
            task.release().await;
            if result? {
                acted += 1;
            }
        }
    }
    Ok(acted)
}

async fn expire(
    task: &mut Task,
    state: ProvisionState,
    limit: Duration,
) -> Result<(), ConductorError> {
    let node = task.uuid();
    let minutes = limit.as_secs() / 60;
    let message = match state {
        ProvisionState::WaitCallBack => {
            clear_plan(&mut task.node, StepKind::Deploy);
            format!(
                "Timeout reached while waiting for callback for node {node} (deploy, after \
                 {minutes} minutes). Check that the node boots the deploy ramdisk and can reach \
                 the API."
            )
        }
        ProvisionState::CleanWait => {
            clear_plan(&mut task.node, StepKind::Clean);
            let message = format!(
                "Timeout reached while cleaning the node {node} (after {minutes} minutes). \
                 Please check if the ramdisk responsible for the cleaning is running on the node."
            );
            task.node.maintenance = true;
            task.node.fault = Some("clean failure".to_owned());
            task.node.maintenance_reason = Some(message.clone());
            message
        }
        ProvisionState::InspectWait => format!(
            "Timeout reached while inspecting the node {node} (after {minutes} minutes). Check \
             that it boots the inspection ramdisk and can reach the inspection service."
        ),
        ProvisionState::RescueWait => {
            crate::flows::rescue::forget_rescue_password(&mut task.node);
            format!(
                "Timeout reached while waiting for rescue ramdisk callback for node {node} \
                 (after {minutes} minutes)."
            )
        }
        _ => {
            clear_plan(&mut task.node, StepKind::Service);
            format!("Timeout reached while servicing the node {node} (after {minutes} minutes).")
        }
    };
    // What the wait set up goes too (network boot, a half-booted ramdisk, power), as after
    // an abort; the node is failed first so that a slow BMC cannot delay the verdict.
    let interfaces = task.interfaces();
    crate::flows::forget_agent(task);
    task.fail(message).await?;
    let undone = match interfaces {
        Ok(interfaces) => match state {
            ProvisionState::WaitCallBack => interfaces.deploy.clean_up(&mut task.node).await,
            ProvisionState::CleanWait => {
                interfaces
                    .deploy
                    .finish(&mut task.node, StepKind::Clean)
                    .await
            }
            ProvisionState::ServiceWait => {
                interfaces
                    .deploy
                    .finish(&mut task.node, StepKind::Service)
                    .await
            }
            ProvisionState::RescueWait => interfaces.rescue.clean_up(&mut task.node).await,
            // Stops the inspection (the service's too): no network boot, machine off.
            ProvisionState::InspectWait => match interfaces.inspect.abort(&mut task.node).await {
                Err(ferric_drivers::DriverError::Unsupported { .. }) => Ok(()),
                other => other,
            },
            _ => Ok(()),
        },
        Err(error) => Err(ferric_drivers::DriverError::failed(
            ferric_drivers::Component::Conductor,
            error.to_string(),
        )),
    };
    if let Err(error) = undone {
        let previous = task.node.last_error.take().unwrap_or_default();
        task.node.last_error = Some(format!("{previous} Then cleaning up failed: {error}"));
    }
    task.save().await
}
