//! `cargo xtask ui-test`: the web UI's browser test. Builds and starts the debug `ferric
//! server` with `http_basic` authentication (an admin, a member of project `p-red` and a
//! reader), creates the Playwright virtualenv (`scripts/ui-venv.sh`) and runs
//! `tests/ui/test_ui.py`, which enrolls the fleet through the API and drives Debian's headless
//! chromium through the UI, printing the table's response times and saving a screenshot of
//! each page.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::process::{free_port, target_dir, workspace_root};
use crate::server::RunningServer;

const USAGE: &str = "\
usage: cargo xtask ui-test [--nodes N] [--screenshots DIR] [--chromium PATH]

  --nodes N          how many nodes the fleet has (default 10000)
  --screenshots DIR  where the page screenshots go (default <target>/ui-test/screenshots;
                     `--screenshots docs/ui` refreshes the ones docs/ui.md shows)
  --chromium PATH    the browser (default $FERRIC_CHROMIUM, else /usr/bin/chromium: Debian's
                     `chromium`, installed by scripts/install-deps.sh)
";

/// The test's users: (name, password, roles file section).
const USERS: &[(&str, &str, &str)] = &[
    ("admin", "admin-secret", "roles = [\"admin\"]"),
    (
        "member",
        "member-secret",
        "roles = [\"member\"]\nproject = \"p-red\"",
    ),
    ("reader", "reader-secret", "roles = [\"reader\"]"),
];

pub(crate) fn ui_test(args: &[String]) -> anyhow::Result<()> {
    let mut nodes = "10000".to_owned();
    let mut screenshots = None;
    let mut chromium =
        std::env::var("FERRIC_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .cloned()
                .with_context(|| format!("{arg} needs a value\n\n{USAGE}"))
        };
        match arg.as_str() {
            "--nodes" => nodes = value()?,
            "--screenshots" => screenshots = Some(PathBuf::from(value()?)),
            "--chromium" => chromium = value()?,
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    if !Path::new(&chromium).exists() {
        bail!(
            "no browser at {chromium}: install Debian's chromium (`apt-get install chromium`, \
             which scripts/install-deps.sh does) or pass --chromium PATH"
        );
    }
    let root = workspace_root();
    let run_dir = target_dir().join("ui-test");
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir)
            .with_context(|| format!("cannot clear {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("cannot create {}", run_dir.display()))?;
    let screenshots = screenshots
        .map(|dir| root.join(dir))
        .unwrap_or_else(|| run_dir.join("screenshots"));
    std::fs::create_dir_all(&screenshots)
        .with_context(|| format!("cannot create {}", screenshots.display()))?;

    let (user_file, roles_file) = write_users(&run_dir)?;
    let venv = ui_venv(&root)?;
    let server = RunningServer::ferric_with(
        &run_dir,
        free_port()?,
        &[
            ("FERRIC_AUTH_STRATEGY", "http_basic"),
            ("FERRIC_HTTP_BASIC_AUTH_USER_FILE", path_str(&user_file)?),
            ("FERRIC_AUTH_USERS_FILE", path_str(&roles_file)?),
        ],
    )?;
    println!(
        "ui-test: ferric at {}/ui/ (log: {}/ferric.log)",
        server.endpoint,
        run_dir.display()
    );

    let status = Command::new(venv.join("bin").join("python"))
        .arg(root.join("tests").join("ui").join("test_ui.py"))
        .args(["--endpoint", &server.endpoint])
        .args(["--chromium", &chromium])
        .args(["--nodes", &nodes])
        .arg("--screenshots")
        .arg(&screenshots)
        .current_dir(&root)
        .stdin(Stdio::null())
        .status()
        .context("cannot start the browser test (tests/ui/test_ui.py)")?;
    drop(server);
    if !status.success() {
        bail!(
            "the browser test failed ({status}); the server's log is {}/ferric.log",
            run_dir.display()
        );
    }
    println!("ui-test: passed; screenshots in {}", screenshots.display());
    Ok(())
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

/// The htpasswd file (bcrypt, the lowest cost: these are throwaway test passwords) and the
/// roles file of [`USERS`].
fn write_users(run_dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let mut htpasswd = String::new();
    let mut roles = String::new();
    for (user, password, section) in USERS {
        let hash = bcrypt::hash(password, 4).context("cannot hash a test password")?;
        htpasswd.push_str(&format!("{user}:{hash}\n"));
        roles.push_str(&format!("[{user}]\n{section}\n\n"));
    }
    let user_file = run_dir.join("htpasswd");
    let roles_file = run_dir.join("users.toml");
    std::fs::write(&user_file, htpasswd)
        .with_context(|| format!("cannot write {}", user_file.display()))?;
    std::fs::write(&roles_file, roles)
        .with_context(|| format!("cannot write {}", roles_file.display()))?;
    Ok((user_file, roles_file))
}

/// Creates or reuses the Playwright virtualenv; returns its path.
fn ui_venv(root: &Path) -> anyhow::Result<PathBuf> {
    let output = Command::new("bash")
        .arg(root.join("scripts").join("ui-venv.sh"))
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run scripts/ui-venv.sh")?;
    if !output.status.success() {
        bail!("scripts/ui-venv.sh failed ({})", output.status);
    }
    let path = String::from_utf8(output.stdout).context("venv path is not UTF-8")?;
    Ok(PathBuf::from(path.trim()))
}
