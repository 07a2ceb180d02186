//! Running things from xtask: the workspace root, cargo's target directory, a command run in
//! the root that fails with its name, a free loopback port. A leaf module every task uses, so
//! that no task reaches up into `main.rs` for them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

pub(crate) fn workspace_root() -> PathBuf {
    // `cargo run` (the `cargo xtask` alias) sets CARGO_MANIFEST_DIR for the process; prefer it
    // to the one compiled in: two clones sharing one target dir (CI's clone and a developer's
    // tree) build xtask under the same name, and cargo may run the other clone's binary,
    // whose compiled-in root is that clone.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Runs a command in the workspace root and fails with its name if it fails.
pub(crate) fn run(program: &str, args: &[&str], envs: &[(&str, &str)]) -> anyhow::Result<()> {
    eprintln!("xtask: {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("cannot start {program}"))?;
    if !status.success() {
        bail!("{program} {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// A port nobody listens on right now. (Racy in theory; the server fails loudly if taken.)
pub(crate) fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Where cargo puts build products.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}
