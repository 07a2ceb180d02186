//! `cargo xtask rolling-upgrade`: the rolling-upgrade test (crates/ferric/tests/rolling_upgrade.rs)
//! against real older releases. An older release is the `ferric` binary built from a pinned
//! commit of this repository ([`RELEASES`]): its tree is taken with `git archive`, built once
//! into the same cargo target directory as everything else — so only Ferric's own crates
//! compile, the dependencies' builds are reused — and the binary is cached under
//! `~/.cache/ferric/release-n/<commit>/ferric`.
//!
//! Sharing the target directory needs care: cargo names a workspace crate's build by its name,
//! version and path *relative to the workspace root*, so an older tree's `ferric-model` would
//! land on this tree's `ferric-model` build, and since cargo judges freshness by file times
//! (the archive's files carry their commit's time), each tree would take the other's builds
//! for its own — a chimera binary, and this build broken after it. So the older tree's
//! workspace version gets build metadata naming the commit (`0.1.0+release.<commit>`, in
//! `Cargo.toml` and `Cargo.lock`): its crates get builds of their own, the dependencies'
//! builds are still shared, and its `ferric --version` says which release it is (checked). The test runs once per release, each time from
//! that release to this build. docs/operator-guide.md "Rolling upgrades" says what it costs.
//!
//! When the hand-off version is bumped, add the last commit of the version before to
//! [`RELEASES`] (first), so the test always starts from the release before this one; drop a
//! release when ferric-model's `OLDEST_HANDOFF_VERSION` moves past it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::process::{run, target_dir};

/// The older releases the test upgrades from, newest first: (commit, hand-off version, what
/// it is). Every hand-off version this build still talks to (`OLDEST_HANDOFF_VERSION` up to
/// the one before `HANDOFF_VERSION`) has its last commit here: the release before this one
/// is the usual "upgrade from", and a site that skipped releases pins to an older version,
/// whose requests (no version field, no `unsupported` reply) take other code paths.
pub(crate) const RELEASES: &[(&str, u32, &str)] = &[
    (
        "79eefc0924f0992a888da636bbfd0b3a8c89d8b8",
        3,
        "the last commit of hand-off version 3 (before node indicators)",
    ),
    (
        "13f9ae45a3f7a6f04d3794b58186406eff66618a",
        2,
        "the last commit of hand-off version 2 (before serial consoles)",
    ),
    (
        "7aea434b9db35b4d2f9dc98cf13ff9966833ca16",
        1,
        "the last commit of hand-off version 1 (before the typed Action contract and \
         pin_handoff_version)",
    ),
];

pub(crate) fn rolling_upgrade(extra: &[String]) -> anyhow::Result<()> {
    // PostgreSQL, running.
    run("bash", &["scripts/install-deps.sh"], &[])?;
    let binaries = RELEASES
        .iter()
        .map(|(commit, _, _)| release_binary(commit))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let postgres_url = std::env::var("FERRIC_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    for ((commit, version, what), binary) in RELEASES.iter().zip(&binaries) {
        eprintln!("xtask: rolling upgrade from hand-off version {version}: {commit}, {what}");
        let binary = binary.to_string_lossy().into_owned();
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
        .with_context(|| format!("rolling upgrade from {commit} (hand-off version {version})"))?;
    }
    Ok(())
}

/// The `ferric` binary of `commit`, built on first use.
fn release_binary(commit: &str) -> anyhow::Result<PathBuf> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let cache = PathBuf::from(home)
        .join(".cache/ferric/release-n")
        .join(commit);
    let binary = cache.join("ferric");
    if binary.is_file() {
        eprintln!("xtask: release {commit} is cached: {}", binary.display());
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
        "git archive --format=tar {commit} | tar -x -C '{}'",
        source.display()
    );
    run("bash", &["-o", "pipefail", "-c", &archive], &[]).with_context(|| {
        format!(
            "cannot take release {commit}'s tree from git: this checkout needs that commit \
             (a shallow clone lacks it: `git fetch --unshallow`)"
        )
    })?;
    let version = own_identity(&source, commit)?;
    let target = target_dir();
    eprintln!(
        "xtask: building release {commit} in {} (target {})",
        source.display(),
        target.display()
    );
    // Both trees' builds end as target/debug/ferric: this tree's is set aside meanwhile.
    let uplifted = target.join("debug").join("ferric");
    let aside = target.join("debug").join("ferric.during-release-n");
    let set_aside = uplifted.is_file();
    if set_aside {
        std::fs::rename(&uplifted, &aside)
            .with_context(|| format!("cannot set {} aside", uplifted.display()))?;
    }
    let status = Command::new("cargo")
        .args(["build", "--locked", "-p", "ferric", "--bin", "ferric"])
        .current_dir(&source)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .context("cannot start cargo");
    let partial = cache.join("ferric.partial");
    let copied = match status {
        Ok(status) if status.success() => std::fs::copy(&uplifted, &partial)
            .map(drop)
            .with_context(|| format!("cannot copy release {commit}'s binary")),
        Ok(status) => Err(anyhow::anyhow!(
            "building release {commit} failed ({status})"
        )),
        Err(error) => Err(error),
    };
    if set_aside {
        std::fs::rename(&aside, &uplifted)
            .with_context(|| format!("cannot put {} back", uplifted.display()))?;
    } else if uplifted.exists() {
        std::fs::remove_file(&uplifted)
            .with_context(|| format!("cannot remove {}", uplifted.display()))?;
    }
    copied?;
    let said = Command::new(&partial)
        .arg("--version")
        .output()
        .with_context(|| format!("cannot run release {commit}'s binary"))?;
    let said = String::from_utf8_lossy(&said.stdout).trim().to_owned();
    if said != format!("ferric {version}") {
        bail!("release {commit}'s build says {said:?}, not ferric {version}: not its own build");
    }
    std::fs::rename(&partial, &binary)
        .with_context(|| format!("cannot cache release {commit}'s binary"))?;
    std::fs::remove_dir_all(&source)
        .with_context(|| format!("cannot remove {}", source.display()))?;
    Ok(binary)
}

/// Gives the workspace in `source` a version of its own, `<version>+release.<commit>`, in its
/// `Cargo.toml` and `Cargo.lock` (see the module's comment); returns it.
fn own_identity(source: &Path, commit: &str) -> anyhow::Result<String> {
    let manifest_path = source.join("Cargo.toml");
    let manifest = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("cannot read {}", manifest_path.display()))?;
    // The `version = "…"` line of `[workspace.package]`, which every crate inherits.
    let section = manifest
        .find("[workspace.package]")
        .context("release's Cargo.toml has no [workspace.package]")?;
    let rest = &manifest[section..];
    let end = rest[1..].find("\n[").map_or(rest.len(), |at| at + 1);
    let line_at = rest[..end]
        .find("\nversion = \"")
        .context("release's [workspace.package] has no version")?
        + 1;
    let line = rest[line_at..].lines().next().unwrap_or_default();
    let old = line
        .strip_prefix("version = \"")
        .and_then(|value| value.strip_suffix('"'))
        .with_context(|| format!("cannot read the workspace version from {line:?}"))?;
    let version = format!("{old}+release.{commit}");
    let new_line = format!("version = \"{version}\"");
    let at = section + line_at;
    let manifest = format!(
        "{}{new_line}{}",
        &manifest[..at],
        &manifest[at + line.len()..]
    );
    std::fs::write(&manifest_path, manifest)
        .with_context(|| format!("cannot write {}", manifest_path.display()))?;

    // In the lock file the workspace's crates are the packages without a `source`.
    let lock_path = source.join("Cargo.lock");
    let lock = std::fs::read_to_string(&lock_path)
        .with_context(|| format!("cannot read {}", lock_path.display()))?;
    let mut changed = 0;
    let blocks: Vec<String> = lock
        .split("\n[[package]]\n")
        .map(|block| {
            if block.contains("\nsource = ") || !block.contains(&format!("\n{line}\n")) {
                return block.to_owned();
            }
            changed += 1;
            block.replacen(&format!("\n{line}\n"), &format!("\n{new_line}\n"), 1)
        })
        .collect();
    if changed == 0 {
        bail!("release's Cargo.lock lists none of its workspace's crates at {old}");
    }
    std::fs::write(&lock_path, blocks.join("\n[[package]]\n"))
        .with_context(|| format!("cannot write {}", lock_path.display()))?;
    Ok(version)
}
