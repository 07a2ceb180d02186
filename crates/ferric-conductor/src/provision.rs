//! `PUT /v1/nodes/{node}/states/provision`, conductor side: re-check the verb against the
//! node under its lease, record the request as the first transition, and hand the rest to a
//! worker (`reference/ironic.md` §1.3, §1.5, §1.6).

use ferric_drivers::{DriverError, Interfaces, StepCall, StepKind};
use ferric_model::machine::check_verb;
use ferric_model::{Event, Microversion, ProvisionState, Verb};
use uuid::Uuid;

use crate::steps::{
    automated_plan, check_requested, check_without_ramdisk, clear_plan, current_step_is_abortable,
    disable_ramdisk, store_plan, store_requested,
};
use crate::task::{Cause, Task};
use crate::worker::{Job, spawn};
use crate::{Conductor, ConductorError};

pub use ferric_model::action::ProvisionArgs;

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
}

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
        Event::Deploy | Event::Rebuild => {
            // Ironic's NodeProtected (403): a protected node keeps its instance.
            if event == Event::Rebuild && task.node.protected {
                return Err(ConductorError::Forbidden(format!(
                    "Node {node_uuid} is protected and cannot be undeployed, rebuilt or \
                     deleted; unset protected first."
                )));
            }
            if task.node.maintenance {
                return Err(ConductorError::Invalid(format!(
                    "Cannot deploy node {node_uuid}: it is in maintenance mode. Clear \
                     maintenance first."
                )));
            }
            record_image_type(&mut task.node.instance_info);
            let interfaces = task.interfaces()?;
            check(task, &interfaces, event).await?;
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
        }
        Event::Delete => {
            if task.node.protected {
                return Err(ConductorError::Forbidden(format!(
                    "Node {node_uuid} is protected and cannot be undeployed, rebuilt or \
                     deleted; unset protected first."
                )));
            }
            check(task, &task.interfaces()?, event).await?;
            clear_plan(&mut task.node, StepKind::Deploy);
            task.node.last_error = None;
        }
        Event::Provide => {
            if task.node.retired {
                return Err(ConductorError::Invalid(format!(
                    "Node {node_uuid} is retired and cannot be provided; unset retired first."
                )));
            }
            task.node.last_error = None;
        }
        Event::Inspect => {
            check(task, &task.interfaces()?, event).await?;
            task.node.last_error = None;
        }
        Event::Clean | Event::Service => {
            let interfaces = task.interfaces()?;
            let (kind, steps) = if event == Event::Clean {
                (StepKind::Clean, args.clean_steps.unwrap_or_default())
            } else {
                (StepKind::Service, args.service_steps.unwrap_or_default())
            };
            check_requested(&interfaces, &task.node, kind, &steps)?;
            let no_ramdisk = args.disable_ramdisk == Some(true);
            if no_ramdisk {
                check_without_ramdisk(&interfaces, kind, &steps)?;
            }
            store_plan(&mut task.node, kind, &steps);
            if no_ramdisk {
                disable_ramdisk(&mut task.node, kind);
            }
            task.node.last_error = None;
        }
        Event::Rescue => {
            check(task, &task.interfaces()?, event).await?;
            if let Some(password) = args.rescue_password {
                set_rescue_password(&mut task.node, &password)?;
            }
            task.node.last_error = None;
        }
        Event::Unrescue => {
            check(task, &task.interfaces()?, event).await?;
            task.node.last_error = None;
        }
        Event::Adopt => {
            task.node.last_error = None;
        }
        Event::Manage => {
            // Only verification (from enroll) starts afresh; `manage` out of a failed state
            // keeps the error that put the node there, as Ironic does.
            if task.node.provision_state == ProvisionState::Enroll {
                task.node.last_error = None;
            }
        }
        Event::Abort => return abort(task).await,
        Event::Unhold => {
            task.fire(Event::Unhold, Cause::Requested).await?;
            task.fire(Event::Resume, Cause::Conductor).await?;
            return Ok(Some(Job::Drive { resume: true }));
        }
        Event::Done | Event::Fail | Event::Wait | Event::Resume | Event::Hold => {
            return Err(ConductorError::Invalid(format!(
                "\"{event}\" is not something to request through the API."
            )));
        }
    }
    task.fire(event, Cause::Requested).await?;
    Ok(task
        .node
        .provision_state
        .is_stuck_treated_as_failure()
        .then_some(Job::Drive { resume: false }))
}

/// `abort`, state by state (§1.5).
async fn abort(task: &mut Task) -> Result<Option<Job>, ConductorError> {
    let node_uuid = task.uuid();
    match task.node.provision_state {
        ProvisionState::InspectWait => {
            let interfaces = task.interfaces()?;
            interfaces
                .inspect
                .abort(&mut task.node)
                .await
                .map_err(invalid)?;
            forget_agent(task);
            task.node.last_error = Some("Inspection was aborted by request.".to_owned());
            task.fire(Event::Abort, Cause::Requested).await?;
            Ok(None)
        }
        ProvisionState::WaitCallBack | ProvisionState::DeployHold => {
            let interfaces = task.interfaces()?;
            current_step_is_abortable(&interfaces, &task.node, StepKind::Deploy)
                .map_err(ConductorError::Forbidden)?;
            forget_agent(task);
            clear_plan(&mut task.node, StepKind::Deploy);
            task.node.last_error = Some(
                "By request, the deploy operation was aborted; the node is powered off. \
                 Deploy again or undeploy it."
                    .to_owned(),
            );
            task.fire(Event::Abort, Cause::Requested).await?;
            Ok(Some(Job::AfterDeployAbort))
        }
        ProvisionState::CleanWait | ProvisionState::CleanHold => {
            let interfaces = task.interfaces()?;
            current_step_is_abortable(&interfaces, &task.node, StepKind::Clean)
                .map_err(ConductorError::Forbidden)?;
            // Ironic's words (`do_node_clean_abort`): clients and scripts match on them.
            let step = describe_step(&task.node.clean_step);
            forget_agent(task);
            clear_plan(&mut task.node, StepKind::Clean);
            tracing::info!(node = %node_uuid, "clean operation aborted{step}");
            task.node.last_error =
                Some(format!("By request, the clean operation was aborted{step}"));
            task.fire(Event::Abort, Cause::Requested).await?;
            Ok(Some(Job::AfterCleanAbort))
        }
        ProvisionState::RescueWait => {
            forget_rescue_password(&mut task.node);
            forget_agent(task);
            task.node.last_error = Some("Rescue operation was aborted by request.".to_owned());
            task.fire(Event::Abort, Cause::Requested).await?;
            Ok(Some(Job::AfterRescueAbort))
        }
        ProvisionState::ServiceWait | ProvisionState::ServiceHold => {
            let interfaces = task.interfaces()?;
            current_step_is_abortable(&interfaces, &task.node, StepKind::Service)
                .map_err(ConductorError::Forbidden)?;
            forget_agent(task);
            clear_plan(&mut task.node, StepKind::Service);
            task.node.last_error = Some("Service operation was aborted by request.".to_owned());
            task.fire(Event::Abort, Cause::Requested).await?;
            task.fire(Event::Abort, Cause::Conductor).await?;
            Ok(None)
        }
        ProvisionState::ServiceFailed => {
            if task.node.maintenance {
                return Err(ConductorError::Conflict(format!(
                    "Node {node_uuid} is in maintenance; clear maintenance before aborting \
                     service."
                )));
            }
            task.fire(Event::Abort, Cause::Requested).await?;
            Ok(None)
        }
        other => Err(ConductorError::InvalidTransition {
            node: node_uuid,
            action: "abort".to_owned(),
            state: other,
        }),
    }
}

/// Forgets the agent the node was talking to: it must look the node up again.
pub(crate) fn forget_agent(task: &mut Task) {
    ferric_drivers::agent_client::forget_agent(&mut task.node);
}

/// Stores the rescue password as Ironic does: the plain value for the rescue ramdisk and
/// `hashed_rescue_password`, its SHA-256 crypt (`$5$…`, Ironic's default
/// `rescue_password_hash_algorithm`), for agents that set the rescue user's password from
/// it. Both are secrets: the API shows them as `******`.
/// Records in `instance_info.image_type` what kind of image a deployment writes, as Ironic
/// does when a deployment starts (its conductor's `update_image_type`; clients and Metal3
/// read it back): nothing without an `image_source`, the caller's own value if set, else
/// `partition` when a kernel or ramdisk comes with the image and `whole-disk` when not.
fn record_image_type(instance_info: &mut ferric_model::resources::JsonObject) {
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

fn set_rescue_password(
    node: &mut ferric_model::resources::Node,
    password: &str,
) -> Result<(), ConductorError> {
    use sha_crypt::PasswordHasher;
    const SALT_CHARS: &[u8] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let salt: Vec<u8> = uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .map(|byte| SALT_CHARS[usize::from(*byte) % SALT_CHARS.len()])
        .collect();
    let hashed = sha_crypt::ShaCrypt::SHA256
        .hash_password_with_salt(password.as_bytes(), &salt)
        .map_err(|error| {
            ConductorError::Invalid(format!("The rescue password cannot be hashed: {error}."))
        })?;
    node.instance_info
        .insert("rescue_password".to_owned(), password.into());
    node.instance_info.insert(
        "hashed_rescue_password".to_owned(),
        hashed.to_string().into(),
    );
    Ok(())
}

/// Forgets both forms of the rescue password (unrescue, abort, failure, timeout).
pub(crate) fn forget_rescue_password(node: &mut ferric_model::resources::Node) {
    node.instance_info.remove("rescue_password");
    node.instance_info.remove("hashed_rescue_password");
}

fn describe_step(step: &ferric_model::resources::JsonObject) -> String {
    match StepCall::from_json(step) {
        Some(step) => format!(
            " during or after the completion of step \"{}.{}\"",
            step.interface, step.step
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rescue_password_is_kept_with_its_sha256_crypt_hash_and_forgotten_whole() {
        use sha_crypt::PasswordVerifier;
        let mut node = ferric_model::resources::Node::new(
            uuid::Uuid::new_v4(),
            "fake-hardware",
            ferric_model::state::ProvisionState::Available,
        );
        set_rescue_password(&mut node, "r3scue").unwrap();
        assert_eq!(node.instance_info["rescue_password"], "r3scue");
        let hashed = node.instance_info["hashed_rescue_password"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(hashed.starts_with("$5$"), "{hashed}");
        let verifier = sha_crypt::ShaCrypt::SHA256;
        assert!(verifier.verify_password(b"r3scue", hashed.as_str()).is_ok());
        assert!(verifier.verify_password(b"other", hashed.as_str()).is_err());
        // A fresh salt each time.
        let mut again = ferric_model::resources::Node::new(
            uuid::Uuid::new_v4(),
            "fake-hardware",
            ferric_model::state::ProvisionState::Available,
        );
        set_rescue_password(&mut again, "r3scue").unwrap();
        assert_ne!(
            again.instance_info["hashed_rescue_password"],
            hashed.as_str()
        );

        forget_rescue_password(&mut node);
        assert!(!node.instance_info.contains_key("rescue_password"));
        assert!(!node.instance_info.contains_key("hashed_rescue_password"));
    }

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
