//! `cargo xtask rolling-upgrade`: the rolling-upgrade test (crates/ferric/tests/rolling_upgrade.rs)
//! against a real older release. Release N is the `ferric` binary built from [`RELEASE_N`], a
//! pinned commit of this repository: its tree is taken with `git archive`, built once into the
//! same cargo target directory as everything else — so only Ferric's own crates compile, the
//! dependencies' builds are reused — and the binary is cached under
//! `~/.cache/ferric/release-n/<commit>/ferric`. docs/operator-guide.md "Rolling upgrades"
//! says what it costs.
//!
//! When the hand-off version is bumped, move [`RELEASE_N`] to the last commit of the previous
//! version, so the test always starts from the release before this one.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

use crate::{run, target_dir, workspace_root};

/// Release N: the last commit whose hand-off is version 1 (before the typed `Action`
/// contract and `pin_handoff_version`).
pub(crate) const RELEASE_N: &str = "7aea434b9db35b4d2f9dc98cf13ff9966833ca16";

pub(crate) fn rolling_upgrade(extra: &[String]) -> anyhow::Result<()> {
    // PostgreSQL, running.
    run("bash", &["scripts/install-deps.sh"], &[])?;
    let binary = release_n_binary()?;
    let binary = binary.to_string_lossy().into_owned();
    let postgres_url = std::env::var("FERRIC_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let mut args = vec![
        "test",
        "--locked",
        "-p",
        "ferric",
        "--test",
        "rolling_upgrade",
        "--",
        "--ignored",
        "--nocapture",
    ];
    args.extend(extra.iter().map(String::as_str));
    run(
        "cargo",
        &args,
        &[
            ("FERRIC_RELEASE_N_BIN", &binary),
            ("FERRIC_TEST_POSTGRES_URL", &postgres_url),
        ],
    )
}

/// Release N's `ferric`, built on first use.
fn release_n_binary() -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let cache = PathBuf::from(home)
        .join(".cache/ferric/release-n")
        .join(RELEASE_N);
    let binary = cache.join("ferric");
    if binary.is_file() {
        eprintln!(
            "xtask: release N ({RELEASE_N}) is cached: {}",
            binary.display()
        );
        return Ok(binary);
    }
    let source = cache.join("src");
    if source.exists() {
        std::fs::remove_dir_all(&source)
            .with_context(|| format!("cannot clear {}", source.display()))?;
    }
    std::fs::create_dir_all(&source)
        .with_context(|| format!("cannot create {}", source.display()))?;
    let archive = format!(
        "git archive --format=tar {RELEASE_N} | tar -x -C '{}'",
        source.display()
    );
    run("bash", &["-o", "pipefail", "-c", &archive], &[]).with_context(|| {
        format!(
            "cannot take release N's tree from git: this checkout needs commit {RELEASE_N} \
             (a shallow clone lacks it: `git fetch --unshallow`)"
        )
    })?;
    let target = target_dir();
    eprintln!(
        "xtask: building release N ({RELEASE_N}) in {} (target {})",
        source.display(),
        target.display()
    );
    let status = Command::new("cargo")
        .args(["build", "--locked", "-p", "ferric", "--bin", "ferric"])
        .current_dir(&source)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .context("cannot start cargo")?;
    if !status.success() {
        bail!("building release N ({RELEASE_N}) failed ({status})");
    }
    let partial = cache.join("ferric.partial");
    std::fs::copy(target.join("debug").join("ferric"), &partial)
        .context("cannot copy release N's binary")?;
    std::fs::rename(&partial, &binary).context("cannot cache release N's binary")?;
    std::fs::remove_dir_all(&source)
        .with_context(|| format!("cannot remove {}", source.display()))?;
    // Both builds share target/debug/ferric: put this build's back.
    let status = Command::new("cargo")
        .args(["build", "--locked", "-p", "ferric", "--bin", "ferric"])
        .current_dir(workspace_root())
        .status()
        .context("cannot start cargo")?;
    if !status.success() {
        bail!("rebuilding this ferric after release N failed ({status})");
    }
    Ok(binary)
}
