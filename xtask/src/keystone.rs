//! `cargo xtask keystone start|stop|env|status|purge`: a real OpenStack Keystone (unmodified,
//! from PyPI, in the venv `scripts/keystone.sh` keeps) for trying `auth_strategy = keystone`
//! by hand and for the Tempest harness. The script does the work (venv, database, bootstrap,
//! test identities, gunicorn); this wraps it with the repository's defaults and prints the
//! environment to source (docs/keystone.md).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

const HELP: &str = "\
usage: cargo xtask keystone <start|stop|env|status|purge> [options]

  start   create (or with --keep-db reuse) a Keystone in DIR, serve it on 127.0.0.1, create
          the test users and the `baremetal` catalog entry, and print the environment:
          OS_* (the admin, system scope), FERRIC_KEYSTONE_* (Ferric's service user) and
          OS_CLIENT_CONFIG_FILE (DIR/clouds.yaml, one cloud per test user)
  stop    stop it (the database and keys stay: `start --keep-db` brings it back)
  env     print the environment of the running one
  status  running or stopped
  purge   stop it and remove DIR and its database

options (start):
  --dir DIR             where it keeps its files (default ~/.cache/ferric/keystone)
  --port N              the port (default: a free one)
  --baremetal-url URL   the catalog's baremetal endpoint (default http://127.0.0.1:6385)
  --keep-db             reuse DIR's database, keys and port
  --token-expiration S  token lifetime in seconds (default 3600)
";

/// The script that runs Keystone.
pub(crate) fn script(root: &Path) -> PathBuf {
    root.join("scripts/keystone.sh")
}

/// Runs `scripts/keystone.sh <args>`, its stdout passed through (the environment it prints).
pub(crate) fn keystone(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let Some(command) = args.first() else {
        print!("{HELP}");
        bail!("cargo xtask keystone needs a command");
    };
    if matches!(command.as_str(), "-h" | "--help" | "help") {
        print!("{HELP}");
        return Ok(());
    }
    if !matches!(
        command.as_str(),
        "start" | "stop" | "env" | "status" | "purge" | "install"
    ) {
        print!("{HELP}");
        bail!("unknown keystone command {command}");
    }
    let status = Command::new(script(root))
        .args(args)
        .status()
        .with_context(|| format!("run {}", script(root).display()))?;
    // `status` exits 3 when Keystone is stopped: an answer, not a failure.
    let stopped = command == "status" && status.code() == Some(3);
    if !status.success() && !stopped {
        bail!("scripts/keystone.sh {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// Stops and removes the Keystone in `dir`.
pub(crate) fn purge(root: &Path, dir: &Path) {
    let _ = Command::new(script(root))
        .arg("purge")
        .arg("--dir")
        .arg(dir)
        .status();
}
