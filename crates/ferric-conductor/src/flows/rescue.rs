//! Rescue (`rescue` from `active`, `unrescue` from `rescue`): the rescue interface boots the
//! rescue environment, the node waits in `rescue wait` for it to call back, and the callback
//! hands it what it needs (the rescue password, kept with its SHA-256 crypt hash and
//! forgotten whenever the rescue ends: unrescue, abort, failure, timeout). Booting it is
//! interrupted by an accepted abort like a step; the `abort` verb stops it in `rescue wait`.

use ferric_drivers::{Interfaces, Outcome};
use ferric_model::action::ProvisionArgs;
use ferric_model::resources::Node;
use ferric_model::{Event, ProvisionState};

use super::{Flow, Job, carry_out};
use crate::ConductorError;
use crate::abort_signal::Aborted;
use crate::task::{Cause, Task};

/// `last_error` after an abort (Ironic's words).
pub(super) const ABORTED: &str = "Rescue operation was aborted by request.";

/// The start of `rescue` (the password stored) or `unrescue`: the interfaces valid.
pub(super) async fn start(
    task: &mut Task,
    event: Event,
    args: ProvisionArgs,
) -> Result<(), ConductorError> {
    super::check(task, &task.interfaces()?, event).await?;
    if event == Event::Rescue
        && let Some(password) = args.rescue_password
    {
        set_rescue_password(&mut task.node, &password)?;
    }
    task.node.last_error = None;
    Ok(())
}

/// `rescuing` or `unrescuing`.
pub(super) async fn drive(task: &mut Task, resume: bool) -> Result<(), ConductorError> {
    match task.node.provision_state {
        ProvisionState::Unrescuing => unrescue(task).await,
        _ => rescue(task, resume).await,
    }
}

/// `rescuing`: boot the rescue environment. Interrupted by an accepted abort like a step.
async fn rescue(task: &mut Task, resume: bool) -> Result<(), ConductorError> {
    let event = if resume {
        // The rescue environment called back: hand it what it needs (the agent's password).
        let finished = async {
            let interfaces = task.interfaces()?;
            interfaces.rescue.finish_rescue(&mut task.node).await?;
            crate::networking::leave_rescue(&interfaces, &mut task.node).await?;
            Ok::<_, ConductorError>(())
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
                crate::networking::enter_rescue(&interfaces, &mut task.node).await?;
                Ok::<_, ConductorError>(interfaces.rescue.rescue(&mut task.node).await?)
            })
            .await;
        match result {
            Err(Aborted) => return carry_out(task, Flow::Rescue).await,
            Ok(Ok(Outcome::Done)) => Event::Done,
            Ok(Ok(Outcome::Wait | Outcome::Poll(_))) => Event::Wait,
            Ok(Err(error)) => return rescue_failed(task, error).await,
        }
    };
    if task.fire_unless_aborted(event, Cause::Conductor).await? {
        Ok(())
    } else {
        carry_out(task, Flow::Rescue).await
    }
}

async fn rescue_failed(task: &mut Task, error: ConductorError) -> Result<(), ConductorError> {
    if task.abort_requested().await {
        return carry_out(task, Flow::Rescue).await;
    }
    forget_rescue_password(&mut task.node);
    let mut message = format!("Failed to rescue node {}: {error}", task.uuid());
    if let Ok(interfaces) = task.interfaces()
        && let Err(error) = crate::networking::leave_rescue(&interfaces, &mut task.node).await
    {
        message = format!("{message} Then moving the switch ports back failed: {error}");
    }
    tracing::warn!(node = %task.uuid(), error = %message, "node failed");
    task.node.last_error = Some(message);
    if task
        .fire_unless_aborted(Event::Fail, Cause::Conductor)
        .await?
    {
        Ok(())
    } else {
        carry_out(task, Flow::Rescue).await
    }
}

async fn unrescue(task: &mut Task) -> Result<(), ConductorError> {
    let result = async {
        let interfaces = task.interfaces()?;
        interfaces.rescue.unrescue(&mut task.node).await?;
        crate::networking::leave_rescue(&interfaces, &mut task.node).await?;
        Ok::<_, ConductorError>(())
    }
    .await;
    match result {
        Ok(()) => {
            forget_rescue_password(&mut task.node);
            task.fire(Event::Done, Cause::Conductor).await
        }
        Err(error) => {
            task.fail(format!("Failed to unrescue node {}: {error}", task.uuid()))
                .await
        }
    }
}

/// `abort` in `rescue wait`: the password forgotten; the worker then removes the rescue
/// environment and powers the machine off.
pub(super) async fn abort_waiting(task: &mut Task) -> Result<Option<Job>, ConductorError> {
    forget_rescue_password(&mut task.node);
    super::forget_agent(task);
    task.node.last_error = Some(ABORTED.to_owned());
    task.fire(Event::Abort, Cause::Requested).await?;
    Ok(Some(Job::UndoAfterAbort(Flow::Rescue)))
}

/// After an abort: the rescue environment removed (its network boot, its agent).
pub(super) async fn undo_after_abort(
    task: &mut Task,
    interfaces: &Interfaces,
) -> Result<(), String> {
    interfaces
        .rescue
        .clean_up(&mut task.node)
        .await
        .map_err(|error| format!("cleaning up the rescue environment failed: {error}"))
}

/// Stores the rescue password as Ironic does: the plain value for the rescue ramdisk and
/// `hashed_rescue_password`, its SHA-256 crypt (`$5$…`, Ironic's default
/// `rescue_password_hash_algorithm`), for agents that set the rescue user's password from
/// it. Both are secrets: the API shows them as `******`.
fn set_rescue_password(node: &mut Node, password: &str) -> Result<(), ConductorError> {
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
pub(crate) fn forget_rescue_password(node: &mut Node) {
    node.instance_info.remove("rescue_password");
    node.instance_info.remove("hashed_rescue_password");
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
}
