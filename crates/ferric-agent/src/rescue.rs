//! `rescue.finalize_rescue` (IPA's rescue extension): the conductor hands over the rescue
//! password, the agent makes it the `rescue` user's and stops serving, so the tenant gets the
//! machine with a login and no agent API.
//!
//! As IPA, the password's SHA-256 crypt goes to `/etc/ipa-rescue-config/ipa-rescue-password`
//! and `/etc/.rescued` marks the machine; Ferric's ramdisk has no rescue service to read
//! them, so the agent also writes the `rescue` user (uid 0, the ramdisk has no other
//! privileges to give) into `/etc/passwd` and `/etc/shadow` for the console's login. A
//! restarted agent sees the marker and does not serve again.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::AgentConfig;
use crate::agent::Invocation;
use crate::commands::{CommandError, Params};

/// IPA's file for the hashed rescue password.
pub const PASSWORD_FILE: &str = "etc/ipa-rescue-config/ipa-rescue-password";
/// IPA's marker of a rescued machine.
pub const MARKER: &str = "etc/.rescued";

fn under(config: &AgentConfig, relative: &str) -> PathBuf {
    config.rescue_root.join(relative)
}

/// Whether this machine was rescued (the agent then does not start again).
pub fn rescued(config: &AgentConfig) -> bool {
    under(config, MARKER).exists()
}

pub(crate) fn validate(params: &Params) -> Result<(), CommandError> {
    match params.get("rescue_password") {
        Some(Value::String(password)) if !password.is_empty() => {}
        _ => {
            return Err(CommandError::invalid_params(
                "rescue_password must be the rescue password (or its crypt hash with hashed=true)",
            ));
        }
    }
    match params.get("hashed") {
        None | Some(Value::Bool(_) | Value::Null) => Ok(()),
        Some(other) => Err(CommandError::invalid_params(format!(
            "hashed must be true or false, not {other}"
        ))),
    }
}

fn write(path: &Path, content: &str, append: bool) -> Result<(), CommandError> {
    let fail = |error: std::io::Error| {
        CommandError::new(
            "RescueError",
            "Rescue Operation failed",
            format!("cannot write {}: {error}", path.display()),
        )
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)
        .map_err(fail)?;
    file.write_all(content.as_bytes()).map_err(fail)
}

pub(crate) fn finalize_rescue_command(
    invocation: &Invocation,
) -> Result<Option<Value>, CommandError> {
    let params = &invocation.params;
    let password = params["rescue_password"].as_str().unwrap_or_default();
    let hashed = if params.get("hashed").and_then(Value::as_bool) == Some(true) {
        password.to_owned()
    } else {
        use sha_crypt::PasswordHasher;
        let salt = uuid::Uuid::new_v4().simple().to_string();
        sha_crypt::ShaCrypt::SHA256
            .hash_password_with_salt(password.as_bytes(), &salt.as_bytes()[..16])
            .map_err(|error| CommandError::internal(format!("cannot hash the password: {error}")))?
            .to_string()
    };
    if hashed.contains(['\n', ':']) {
        return Err(CommandError::invalid_params(
            "the hashed rescue password holds a line break or a colon",
        ));
    }
    let config = &invocation.agent.config;
    write(&under(config, PASSWORD_FILE), &hashed, false)?;
    write(
        &under(config, "etc/passwd"),
        "rescue:x:0:0:rescue:/root:/bin/sh\n",
        true,
    )?;
    write(
        &under(config, "etc/shadow"),
        &format!("rescue:{hashed}:::::::\n"),
        true,
    )?;
    write(&under(config, MARKER), "", false)?;
    tracing::info!("rescue password set; the agent stops serving");
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::Progress;
    use serde_json::json;

    fn invocation(root: &Path, params: Value) -> Invocation {
        let mut config = AgentConfig::new(vec![]);
        config.rescue_root = root.to_owned();
        Invocation {
            agent: crate::Agent::new(config),
            params: params.as_object().cloned().unwrap_or_default(),
            progress: Progress::detached(),
        }
    }

    #[test]
    fn finalize_rescue_writes_the_password_as_ipa_and_marks_the_machine() {
        use sha_crypt::PasswordVerifier;
        let dir = tempfile::tempdir().unwrap();
        // Ironic sends the hash: written as it is.
        let hashed = "$5$saltsalt$abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG";
        let params = json!({"rescue_password": hashed, "hashed": true});
        validate(params.as_object().unwrap()).unwrap();
        finalize_rescue_command(&invocation(dir.path(), params)).unwrap();
        let written = std::fs::read_to_string(dir.path().join(PASSWORD_FILE)).unwrap();
        assert_eq!(written, hashed);
        let shadow = std::fs::read_to_string(dir.path().join("etc/shadow")).unwrap();
        assert!(shadow.contains(&format!("rescue:{hashed}:")), "{shadow}");
        let mut config = AgentConfig::new(vec![]);
        config.rescue_root = dir.path().to_owned();
        assert!(rescued(&config));

        // A password in clear is hashed here with SHA-256 crypt, as IPA does.
        let dir = tempfile::tempdir().unwrap();
        let params = json!({"rescue_password": "s3cret", "hashed": false});
        finalize_rescue_command(&invocation(dir.path(), params)).unwrap();
        let written = std::fs::read_to_string(dir.path().join(PASSWORD_FILE)).unwrap();
        assert!(written.starts_with("$5$"), "{written}");
        assert!(
            sha_crypt::ShaCrypt::SHA256
                .verify_password(b"s3cret", written.as_str())
                .is_ok()
        );

        for bad in [
            json!({}),
            json!({"rescue_password": ""}),
            json!({"rescue_password": "x", "hashed": "yes"}),
        ] {
            assert!(validate(bad.as_object().unwrap()).is_err(), "{bad}");
        }
    }
}
