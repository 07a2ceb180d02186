//! Host-side plumbing: running `ip` and other tools, network namespaces, pid files.
//!
//! We call iproute2 rather than speaking netlink: every site that runs Ferric has `ip`, its
//! error messages are the ones operators know, and the lab needs a dozen calls, none hot.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("cannot run {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("cannot access {path}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Runs a command to completion; its stderr becomes the error message when it fails.
pub fn run<I, S>(program: &str, args: I) -> Result<String, HostError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args
        .into_iter()
        .map(|arg| arg.as_ref().to_owned())
        .collect();
    let output = Command::new(program)
        .args(&args)
        .output()
        .map_err(|source| HostError::Spawn {
            program: program.to_owned(),
            source,
        })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let command = std::iter::once(program.to_owned())
            .chain(args.iter().map(|arg| arg.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(" ");
        Err(HostError::Failed {
            command,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}

/// Whether `program` is an executable on PATH (or an existing path).
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).exists().then(|| PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

pub fn namespace_exists(namespace: &str) -> bool {
    Path::new("/run/netns").join(namespace).exists()
}

/// Creates the namespace with a bridge (IPv4 + ULA) and one tap per machine, all up.
/// Nothing is routed: the namespace has no link to the host but its own loopback.
pub fn namespace_create(
    namespace: &str,
    bridge: &str,
    ipv4: &str,
    ipv6: &str,
    taps: &[String],
) -> Result<(), HostError> {
    run("ip", ["netns", "add", namespace])?;
    let ip = |args: &[&str]| run("ip", ["-n", namespace].iter().chain(args));
    ip(&["link", "set", "lo", "up"])?;
    // STP off and no forwarding delay: a tap must pass DHCP the moment QEMU opens it.
    ip(&[
        "link",
        "add",
        "name",
        bridge,
        "type",
        "bridge",
        "stp_state",
        "0",
        "forward_delay",
        "0",
    ])?;
    ip(&["addr", "add", ipv4, "dev", bridge])?;
    // nodad: the address must be usable at once for dnsmasq's router advertisements.
    ip(&["-6", "addr", "add", ipv6, "dev", bridge, "nodad"])?;
    ip(&["link", "set", bridge, "up"])?;
    for tap in taps {
        ip(&["tuntap", "add", "dev", tap, "mode", "tap"])?;
        ip(&["link", "set", tap, "master", bridge])?;
        ip(&["link", "set", tap, "up"])?;
    }
    Ok(())
}

/// Deleting the namespace removes the bridge and taps with it.
pub fn namespace_delete(namespace: &str) -> Result<(), HostError> {
    if namespace_exists(namespace) {
        run("ip", ["netns", "del", namespace])?;
    }
    Ok(())
}

/// Processes running inside the namespace (all started by the lab).
pub fn namespace_pids(namespace: &str) -> Vec<u32> {
    run("ip", ["netns", "pids", namespace])
        .map(|out| {
            out.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

pub fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Alive and not a zombie (a zombie has exited; only its parent has not reaped it yet).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may itself contain spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// SIGTERM, a grace period, then SIGKILL. Returns whether the process had been running.
pub fn terminate(pid: u32, grace: Duration) -> bool {
    if !pid_alive(pid) {
        return false;
    }
    let _ = run("kill", ["-TERM", &pid.to_string()]);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !pid_alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = run("kill", ["-KILL", &pid.to_string()]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_alive_and_nonsense_is_not() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(u32::MAX));
    }

    #[test]
    fn failures_carry_the_command_and_stderr() {
        let error = run("sh", ["-c", "echo broken >&2; exit 3"]).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("sh -c") && text.contains("broken"), "{text}");
    }
}
