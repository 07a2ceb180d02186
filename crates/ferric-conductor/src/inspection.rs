//! In-band inspection's callbacks, conductor side (`reference/ironic.md` §5.2, seeds 002 and
//! 000); the inspect flow itself is `flows/inspect.rs`.
//!
//! Theory of operation: the inspect interface boots the ramdisk and the node waits in
//! `inspect wait` without a lease. The data comes back one of two ways:
//! - `agent` interface: the ramdisk posts to `/v1/continue_inspection`; the API calls
//!   [`Conductor::continue_inspection`], which hands the payload to a worker in this process
//!   and resumes the node (`inspecting`); the worker processes it (`flows/inspect.rs`) and
//!   finishes (machine off) → `manageable`, or → `inspect failed` with the reason.
//! - `inspector` interface: the inspection service processes the data and writes the node
//!   itself; the `inspector_status` reconciler polls the service and resumes the node when it
//!   finished (the worker then only powers the machine off), or fails it with the service's
//!   error.

use std::sync::Arc;

use ferric_db::{NodeFilter, Page};
use ferric_drivers::InspectionStatus;
use ferric_model::{Event, ProvisionState};
use serde_json::Value;
use uuid::Uuid;

use crate::flows::{Job, spawn};
use crate::task::{Cause, Task};
use crate::{Conductor, ConductorError, Inner, lock};

impl Conductor {
    /// Takes the inspection data of `node` (waiting in `inspect wait` with the `agent`
    /// interface) and resumes it. With `mint_token`, also mints the agent token the ramdisk
    /// gets in the answer (API ≥ 1.84), if none was issued.
    pub async fn continue_inspection(
        &self,
        node: Uuid,
        payload: Value,
        mint_token: bool,
    ) -> Result<Option<String>, ConductorError> {
        let inner = &self.inner;
        let permit = inner.take_worker()?;
        let mut task = Task::acquire(inner, node).await?;
        let result = async {
            if task.node.provision_state != ProvisionState::InspectWait {
                return Err(ConductorError::Conflict(format!(
                    "Node {node} is in state \"{}\", not waiting for inspection data.",
                    task.node.provision_state
                )));
            }
            if !task.interfaces()?.inspect.takes_data() {
                return Err(ConductorError::Conflict(format!(
                    "Node {node} is inspected through its {} inspect interface, which does \
                     not take data at /v1/continue_inspection.",
                    task.node.inspect_interface.as_deref().unwrap_or("default")
                )));
            }
            let token = if mint_token && crate::agent::agent_token(&task.node).is_none() {
                let token = crate::agent::new_token()?;
                task.node.driver_internal_info.insert(
                    crate::agent::AGENT_TOKEN_KEY.to_owned(),
                    token.clone().into(),
                );
                Some(token)
            } else {
                None
            };
            lock(&inner.inspection_data).insert(node, payload);
            task.fire(Event::Resume, Cause::Conductor).await?;
            Ok(token)
        }
        .await;
        match result {
            Ok(token) => {
                spawn(task, Job::Drive { resume: true }, permit);
                Ok(token)
            }
            Err(error) => {
                lock(&inner.inspection_data).remove(&node);
                task.release().await;
                Err(error)
            }
        }
    }
}

/// The `inspector_status` reconciler: asks the inspection service about every node waiting
/// in `inspect wait` with an interface that answers [`InspectInterface::status`], and moves
/// finished ones on. Returns how many nodes it moved.
///
/// [`InspectInterface::status`]: ferric_drivers::interfaces::InspectInterface::status
pub(crate) async fn poll_service(inner: &Arc<Inner>) -> Result<usize, ConductorError> {
    let filter = NodeFilter {
        provision_state: Some(ProvisionState::InspectWait),
        ..NodeFilter::default()
    };
    let mut acted = 0;
    for node in inner.store.node_list(&filter, &Page::all()).await? {
        if node.inspect_interface.as_deref() != Some("inspector") || !inner.owns(&node) {
            continue;
        }
        let status = match inner.drivers.load(&node) {
            Ok(interfaces) => interfaces.inspect.status(&node).await,
            Err(error) => Err(error),
        };
        let status = match status {
            Ok(InspectionStatus::Running) => continue,
            Ok(status) => status,
            Err(error) => {
                tracing::warn!(node = %node.uuid, error = %error, "could not ask the inspection service");
                continue;
            }
        };
        let permit = match inner.take_worker() {
            Ok(permit) => permit,
            Err(_) => break,
        };
        let mut task = match Task::acquire(inner, node.uuid).await {
            Ok(task) => task,
            Err(ConductorError::NodeLocked { .. } | ConductorError::NodeNotFound(_)) => continue,
            Err(error) => return Err(error),
        };
        if task.node.provision_state != ProvisionState::InspectWait {
            task.release().await;
            continue;
        }
        acted += 1;
        match status {
            InspectionStatus::Finished => {
                if let Err(error) = task.fire(Event::Resume, Cause::Conductor).await {
                    task.release().await;
                    return Err(error);
                }
                spawn(task, Job::Drive { resume: true }, permit);
            }
            InspectionStatus::Failed(message) => {
                let mut message = format!("Inspection of node {} failed: {message}", node.uuid);
                match task.interfaces() {
                    Ok(interfaces) => {
                        if let Err(error) = interfaces.inspect.finish(&mut task.node).await {
                            message = format!("{message} Then powering it off failed: {error}");
                        }
                    }
                    Err(error) => {
                        message = format!("{message} Then powering it off failed: {error}")
                    }
                }
                let result = task.fail(message).await;
                task.release().await;
                result?;
            }
            InspectionStatus::Running => task.release().await,
        }
    }
    Ok(acted)
}
