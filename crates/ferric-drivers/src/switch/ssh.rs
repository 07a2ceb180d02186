//! SSH to the switches, through the system's OpenSSH client (`ssh`), which every site that
//! manages switches by hand already has and trusts: its host-key checking, its key formats,
//! its `ControlMaster` session sharing. A Rust SSH library (`russh`) would add a second SSH
//! implementation, its own key parsing and its own bugs to keep up with, for no gain here: the
//! commands are a few lines per step, and the client's start costs nothing once the master
//! session is up.
//!
//! Theory of operation:
//! - **One session per switch, reused.** Every call runs `ssh` with `ControlMaster=auto`, a
//!   control socket per switch under the state directory and `ControlPersist`: the first call
//!   logs in, the next ones (the read-back right after a change, the next node's change) ride
//!   the same connection until it has been idle for `persist` seconds.
//! - **Commands batched per switch.** A call sends a whole script on the session's standard
//!   input (no remote command: the device's CLI or login shell reads it), so all the ports of
//!   one switch that a step moves cost one round trip, and their read-back another.
//! - **Bounded retries.** A session that could not be set up (OpenSSH's exit status 255:
//!   refused, timed out, authentication failed) is tried again `attempts` times in all, the
//!   wait doubling from `retry_delay_ms`; a script the switch ran and refused is never
//!   retried (it may have half-applied: the read-back says what is there).
//! - **One writer per switch.** [`SwitchHub::lock`] serialises the batches of one switch: a
//!   Tokio mutex within the process and an exclusive `flock` on `<state_dir>/<switch>.lock`
//!   across the processes of one host (the conductors of a SQLite site are all on its host).
//!   Conductors on several hosts (PostgreSQL) do not share it: each node belongs to one
//!   conductor, so two conductors meet only on two nodes cabled to one switch; Junos' `configure
//!   private`, the Linux devices' one-shot commands and the IOS-style CLIs' per-interface
//!   sections keep such batches from mixing into each other's ports, and the read-back catches
//!   what they cannot. A database lock per switch is the next step (ARCHITECTURE.md's issues).
//! - Passwords (`password_file`) reach OpenSSH through `SSH_ASKPASS`: a tiny script under the
//!   state directory prints the file; the password never appears in an argument list.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::fs::{FlockOperation, flock};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::settings::{NetworkSettings, SwitchSettings};

/// How long one session may take, connection included.
const SESSION_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a session failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshError {
    /// No session: the switch could not be reached or refused the login (after every
    /// attempt).
    Connect(String),
    /// The switch ran the script and it failed (exit status, what it printed).
    Refused(String),
}

impl std::fmt::Display for SshError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(detail) => write!(f, "cannot reach it over SSH: {detail}"),
            Self::Refused(detail) => write!(f, "it refused the commands: {detail}"),
        }
    }
}

/// The sessions and locks of the site's switches; one per process (clones of
/// [`crate::Drivers`] share it).
pub struct SwitchHub {
    pub settings: NetworkSettings,
    state_dir: PathBuf,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for SwitchHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwitchHub")
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

/// A switch held for one writer: dropped, the next one goes.
pub struct SwitchGuard {
    _file: File,
    _local: tokio::sync::OwnedMutexGuard<()>,
}

impl SwitchHub {
    /// The hub of `settings`; creates the state directory (mode 0700).
    pub fn new(settings: NetworkSettings) -> Result<Self, String> {
        let state_dir = settings
            .ssh
            .state_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("ferric-switch"));
        std::fs::create_dir_all(&state_dir)
            .map_err(|error| format!("cannot create {}: {error}", state_dir.display()))?;
        set_private(&state_dir)?;
        for switch in &settings.switches {
            if let Some(password_file) = &switch.password_file {
                let script = state_dir.join(format!("{}.askpass", switch.name));
                let text = format!("#!/bin/sh\nexec cat '{}'\n", password_file.display());
                std::fs::write(&script, text)
                    .map_err(|error| format!("cannot write {}: {error}", script.display()))?;
                set_mode(&script, 0o700)?;
            }
        }
        Ok(Self {
            settings,
            state_dir,
            locks: Mutex::new(HashMap::new()),
        })
    }

    /// Waits until this process and host hold `switch` alone.
    pub async fn lock(&self, switch: &str) -> Result<SwitchGuard, String> {
        let local = {
            let mut locks = self
                .locks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            locks.entry(switch.to_owned()).or_default().clone()
        };
        let local = local.lock_owned().await;
        let path = self.state_dir.join(format!("{switch}.lock"));
        let file = tokio::task::spawn_blocking(move || {
            let file = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|error| format!("cannot open {}: {error}", path.display()))?;
            flock(&file, FlockOperation::LockExclusive)
                .map_err(|error| format!("cannot lock {}: {error}", path.display()))?;
            Ok::<_, String>(file)
        })
        .await
        .map_err(|error| error.to_string())??;
        Ok(SwitchGuard {
            _file: file,
            _local: local,
        })
    }

    /// Runs `script` on `switch` in its shared session; what it printed.
    pub async fn run(&self, switch: &SwitchSettings, script: &str) -> Result<String, SshError> {
        let ssh = &self.settings.ssh;
        let attempts = ssh.attempts.max(1);
        let mut delay = ssh.retry_delay();
        let mut last = String::new();
        for attempt in 1..=attempts {
            match self.run_once(switch, script).await {
                Err(SshError::Connect(detail)) => {
                    tracing::warn!(switch = %switch.name, attempt, error = %detail, "switch session failed");
                    last = detail;
                    if attempt < attempts {
                        tokio::time::sleep(delay).await;
                        delay *= 2;
                    }
                }
                other => return other,
            }
        }
        Err(SshError::Connect(format!(
            "{last} (after {attempts} attempt{})",
            if attempts == 1 { "" } else { "s" }
        )))
    }

    async fn run_once(&self, switch: &SwitchSettings, script: &str) -> Result<String, SshError> {
        let mut command = self.command(switch);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|error| SshError::Connect(format!("cannot run ssh: {error}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            // A switch that closes early is reported by the exit status below.
            let _ = stdin.write_all(script.as_bytes()).await;
            drop(stdin);
        }
        let output = tokio::time::timeout(SESSION_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| {
                SshError::Connect(format!(
                    "no answer within {} seconds",
                    SESSION_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|error| SshError::Connect(error.to_string()))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        match output.status.code() {
            Some(0) => Ok(stdout),
            Some(255) => Err(SshError::Connect(if stderr.is_empty() {
                "ssh exited with status 255".to_owned()
            } else {
                stderr
            })),
            status => {
                let said = [stderr.as_str(), stdout.trim()]
                    .into_iter()
                    .filter(|text| !text.is_empty())
                    .collect::<Vec<_>>()
                    .join("; ");
                Err(SshError::Refused(format!(
                    "exit status {}{}",
                    status.map_or("none (killed)".to_owned(), |code| code.to_string()),
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!(": {said}")
                    }
                )))
            }
        }
    }

    /// `ssh` for `switch`, with the shared session, the host-key policy and the credentials.
    fn command(&self, switch: &SwitchSettings) -> Command {
        let ssh = &self.settings.ssh;
        let mut command = Command::new("ssh");
        let option = |command: &mut Command, option: String| {
            command.arg("-o").arg(option);
        };
        command.arg("-F").arg("/dev/null").arg("-T");
        command.arg("-p").arg(switch.port.to_string());
        option(
            &mut command,
            format!("ConnectTimeout={}", ssh.connect_timeout),
        );
        option(&mut command, "ControlMaster=auto".to_owned());
        option(
            &mut command,
            format!(
                "ControlPath={}",
                self.state_dir.join(format!("{}.%C", switch.name)).display()
            ),
        );
        option(&mut command, format!("ControlPersist={}", ssh.persist));
        option(&mut command, "ServerAliveInterval=10".to_owned());
        option(&mut command, "LogLevel=ERROR".to_owned());
        match &switch.known_hosts_file {
            Some(file) => {
                option(&mut command, "StrictHostKeyChecking=yes".to_owned());
                option(
                    &mut command,
                    format!("UserKnownHostsFile={}", file.display()),
                );
            }
            None => {
                option(&mut command, "StrictHostKeyChecking=accept-new".to_owned());
                option(
                    &mut command,
                    format!(
                        "UserKnownHostsFile={}",
                        self.state_dir.join("known_hosts").display()
                    ),
                );
            }
        }
        if let Some(key) = &switch.private_key_file {
            command.arg("-i").arg(key);
            option(&mut command, "IdentitiesOnly=yes".to_owned());
        }
        if switch.password_file.is_some() && switch.private_key_file.is_none() {
            let askpass = self.state_dir.join(format!("{}.askpass", switch.name));
            option(&mut command, "BatchMode=no".to_owned());
            option(
                &mut command,
                "PreferredAuthentications=password,keyboard-interactive".to_owned(),
            );
            option(&mut command, "NumberOfPasswordPrompts=1".to_owned());
            command
                .env("SSH_ASKPASS", askpass)
                .env("SSH_ASKPASS_REQUIRE", "force")
                .env("DISPLAY", "ferric:0");
        } else {
            option(&mut command, "BatchMode=yes".to_owned());
        }
        command.arg(format!("{}@{}", switch.user, switch.address));
        command
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|error| format!("cannot set the mode of {}: {error}", path.display()))
}

fn set_private(path: &Path) -> Result<(), String> {
    set_mode(path, 0o700)
}
