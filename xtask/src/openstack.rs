//! `cargo xtask openstack`: `openstack server create` deploys onto Ferric (issue 38). A debug
//! `ferric` (fake hardware, `auth_strategy = keystone`, Nova's power updates on) behind a real
//! Keystone (`scripts/keystone.sh`), Glance (`scripts/glance.sh`) and Placement and Nova with
//! the ironic driver (`scripts/openstack.sh`), all unmodified from PyPI; then the scenario
//! tests/openstack/scenario.py, which prints each step and every server state it sees: nodes in
//! enroll, manageable and maintenance next to an available one, a baremetal flavor, a Glance
//! image, a flat Neutron network on the node port's physical network, `server create
//! --network … --config-drive true` → ACTIVE (the node's instance_uuid, the server's port as
//! its VIF, its config drive naming the port's MAC), a second `--nic none` server refused (no
//! other node is offered), reboot, stop/start, a power-off and
//! power-on through Ferric's API that Nova follows, a power-off at the BMC behind Ferric's back
//! that Ferric's power sync finds and tells Nova of, rebuild, delete (the node cleaned back to
//! available).
//!
//! The target node is a `redfish` node (fake boot and deploy) whose BMC is sushy-tools' Redfish
//! emulator with its fake driver (from the venv `scripts/install-deps.sh` makes): the power-off
//! behind Ferric's back is a `ComputerSystem.Reset` sent to the emulator. Ferric's power sync
//! runs every 2 s and Nova's own (`sync_power_state_interval`) is off in
//! `scripts/openstack.sh`'s nova.conf, so the server reaching SHUTOFF is Ferric's
//! `power-update` and nothing else.
//!
//! Everything is stopped afterwards, also on failure (guards); the files stay in
//! `<target>/openstack/` for the reader: ferric.log, keystone/, glance/, nova/logs/.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::keystone;
use crate::process::{free_port, target_dir};
use crate::server::RunningServer;

const HELP: &str = "\
usage: cargo xtask openstack [--keep]

Starts ferric (fake hardware, and a redfish node on sushy-emulator) behind a real Keystone,
Glance, Placement and Nova (ironic driver), runs tests/openstack/scenario.py (server create,
reboot, stop/start, power changes on Ferric's side and behind it at the BMC, rebuild, delete)
and stops everything. Files: <target>/openstack/.

  --keep   leave everything running afterwards (stop with scripts/openstack.sh purge,
           scripts/glance.sh purge and scripts/keystone.sh purge, each with --dir)
";

/// A service started by one of the scripts, stopped when dropped (also on errors); its files
/// stay for the reader until the next run purges them.
struct ScriptGuard {
    script: PathBuf,
    dir: PathBuf,
    keep: bool,
}

impl ScriptGuard {
    fn purge(script: &Path, dir: &Path) {
        let _ = Command::new(script)
            .arg("purge")
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .status();
    }
}

impl Drop for ScriptGuard {
    fn drop(&mut self) {
        if !self.keep {
            let _ = Command::new(&self.script)
                .arg("stop")
                .arg("--dir")
                .arg(&self.dir)
                .stdout(Stdio::null())
                .status();
        }
    }
}

/// The fake ComputerSystem of the scenario's target node.
const SUSHY_SYSTEM: &str = "6f1c2d3e-4a5b-4c6d-8e7f-90a1b2c3d4e5";

/// sushy-tools' Redfish emulator, killed when dropped.
struct Sushy {
    child: std::process::Child,
    url: String,
}

impl Drop for Sushy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `sushy-emulator --fake` with one powered-off system (no authentication), logging
/// into `dir/sushy.log`, and waits until it answers.
fn start_sushy(dir: &Path) -> anyhow::Result<Sushy> {
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    let binary = PathBuf::from(home).join(".cache/ferric/bmc-venv/bin/sushy-emulator");
    anyhow::ensure!(
        binary.exists(),
        "no sushy-emulator at {} (scripts/install-deps.sh installs it)",
        binary.display()
    );
    let config = dir.join("sushy.conf");
    std::fs::write(
        &config,
        format!(
            "SUSHY_EMULATOR_STATE_DIR = {state:?}\n\
             SUSHY_EMULATOR_FAKE_DRIVER = True\n\
             SUSHY_EMULATOR_FAKE_SYSTEMS = [{{\n\
             \x20   'uuid': '{SUSHY_SYSTEM}', 'name': 'nova-0', 'power_state': 'Off',\n\
             \x20   'external_notifier': False,\n\
             \x20   'nics': [{{'mac': '52:54:00:0f:e0:01', 'ip': '10.99.0.10'}}],\n\
             }}]\n",
            state = dir.join("sushy-state").display().to_string(),
        ),
    )?;
    let port = free_port()?;
    let log = std::fs::File::create(dir.join("sushy.log"))?;
    let child = Command::new(&binary)
        .arg("--config")
        .arg(&config)
        .args(["--fake", "-i", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("start {}", binary.display()))?;
    let sushy = Sushy {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    // Python's start-up on a loaded machine; only a hang trips the bound.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let answered = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
        if answered {
            return Ok(sushy);
        }
        if std::time::Instant::now() > deadline {
            bail!(
                "sushy-emulator did not listen on port {port}; see {}",
                dir.join("sushy.log").display()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Runs `script args…`; its stdout (the environment it prints) is returned, stderr passes.
fn run_script(script: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(script)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("run {}", script.display()))?;
    if !output.status.success() {
        bail!(
            "{} {} failed ({})",
            script.display(),
            args.join(" "),
            output.status
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `export NAME=value` lines as pairs.
fn exports(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("export "))
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.trim_matches('"').to_owned()))
        .collect()
}

pub(crate) fn openstack(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let mut keep = false;
    for arg in args {
        match arg.as_str() {
            "--keep" => keep = true,
            "-h" | "--help" => {
                print!("{HELP}");
                return Ok(());
            }
            other => bail!("unknown option {other}\n\n{HELP}"),
        }
    }
    let began = std::time::Instant::now();
    let dir = target_dir().join("openstack");
    let keystone_dir = dir.join("keystone");
    let glance_dir = dir.join("glance");
    let nova_dir = dir.join("nova");
    let openstack_sh = root.join("scripts/openstack.sh");
    let glance_sh = root.join("scripts/glance.sh");
    // A run stopped half-way leaves its services: purge them before starting afresh.
    ScriptGuard::purge(&openstack_sh, &nova_dir);
    ScriptGuard::purge(&glance_sh, &glance_dir);
    keystone::purge(root, &keystone_dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    for script in [&openstack_sh, &glance_sh, &keystone::script(root)] {
        run_script(script, &["install"])?;
    }
    eprintln!("xtask: venvs ready ({:?})", began.elapsed());

    // Ferric first, on a port chosen now, then Keystone with its catalog pointing there.
    let keystone_port = free_port()?;
    let auth_url = format!("http://127.0.0.1:{keystone_port}/v3");
    let settings = [
        ("FERRIC_AUTH_STRATEGY", "keystone"),
        ("FERRIC_KEYSTONE_AUTH_URL", auth_url.as_str()),
        ("FERRIC_KEYSTONE_USERNAME", "ferric"),
        ("FERRIC_KEYSTONE_PASSWORD", "ferric-test-ferric"),
        ("FERRIC_KEYSTONE_PROJECT_NAME", "service"),
        ("FERRIC_KEYSTONE_REGION_NAME", "RegionOne"),
        ("FERRIC_ENABLED_HARDWARE_TYPES", "fake-hardware,redfish"),
        // The redfish node boots and deploys nothing (fake), its power is the emulator's.
        ("FERRIC_ENABLED_BOOT_INTERFACES", "fake,ipxe"),
        ("FERRIC_ENABLED_DEPLOY_INTERFACES", "fake,direct"),
        ("FERRIC_SEND_POWER_NOTIFICATIONS", "true"),
        ("FERRIC_NOVA_INTERFACE", "public"),
        // The power-off at the BMC is found within seconds.
        ("FERRIC_SYNC_POWER_STATE_INTERVAL", "2"),
    ];
    let sushy = start_sushy(&dir)?;
    eprintln!(
        "xtask: sushy-emulator at {} ({:?})",
        sushy.url,
        began.elapsed()
    );
    let ferric = RunningServer::ferric_with(&dir, free_port()?, &settings)?;
    eprintln!(
        "xtask: ferric at {} ({:?})",
        ferric.endpoint,
        began.elapsed()
    );

    let keystone_dir_arg = keystone_dir.display().to_string();
    let _keystone = ScriptGuard {
        script: keystone::script(root),
        dir: keystone_dir.clone(),
        keep,
    };
    run_script(
        &keystone::script(root),
        &[
            "start",
            "--port",
            &keystone_port.to_string(),
            "--dir",
            &keystone_dir_arg,
            "--baremetal-url",
            &ferric.endpoint,
        ],
    )?;
    eprintln!("xtask: keystone at {auth_url} ({:?})", began.elapsed());

    let _glance = ScriptGuard {
        script: glance_sh.clone(),
        dir: glance_dir.clone(),
        keep,
    };
    let glance_env = run_script(
        &glance_sh,
        &[
            "start",
            "--dir",
            &glance_dir.display().to_string(),
            "--keystone-dir",
            &keystone_dir_arg,
        ],
    )?;
    eprintln!("xtask: glance running ({:?})", began.elapsed());

    let _nova = ScriptGuard {
        script: openstack_sh.clone(),
        dir: nova_dir.clone(),
        keep,
    };
    let nova_env = run_script(
        &openstack_sh,
        &[
            "start",
            "--dir",
            &nova_dir.display().to_string(),
            "--auth-url",
            &auth_url,
        ],
    )?;
    eprintln!("xtask: placement and nova running ({:?})", began.elapsed());

    let venv = venv()?;
    let scenario_began = std::time::Instant::now();
    let status = Command::new(venv.join("bin/python"))
        .arg(root.join("tests/openstack/scenario.py"))
        .envs(exports(&glance_env))
        .envs(exports(&nova_env))
        .env("PYTHONWARNINGS", "ignore")
        // The API masks a config drive as Ironic does; the scenario reads it from the database.
        .env("FERRIC_DATABASE", dir.join("ferric.db"))
        // The target node's BMC, where the scenario powers the machine off behind Ferric.
        .env("SUSHY_URL", &sushy.url)
        .env("SUSHY_SYSTEM", SUSHY_SYSTEM)
        .status()
        .context("run tests/openstack/scenario.py")?;
    eprintln!(
        "xtask: openstack scenario took {:?}, the whole run {:?}; files in {}",
        scenario_began.elapsed(),
        began.elapsed(),
        dir.display()
    );
    if keep {
        std::mem::forget(ferric);
        std::mem::forget(sushy);
        eprintln!("xtask: everything left running (--keep)");
    }
    if !status.success() {
        bail!(
            "the openstack scenario failed ({status}); logs: {}/ferric.log, {}/logs/",
            dir.display(),
            nova_dir.display()
        );
    }
    Ok(())
}

/// The venv scripts/openstack.sh installs (Nova, Placement, openstacksdk).
fn venv() -> anyhow::Result<PathBuf> {
    if let Some(venv) = std::env::var_os("OPENSTACK_VENV") {
        return Ok(PathBuf::from(venv));
    }
    let home = std::env::var_os("HOME").context("HOME is not set")?;
    Ok(PathBuf::from(home).join(".cache/ferric/openstack-venv"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_are_read_from_a_scripts_environment() {
        let text = "export OS_AUTH_URL=http://127.0.0.1:5000/v3\n# a comment\nexport A=\"b c\"\n";
        assert_eq!(
            exports(text),
            vec![
                (
                    "OS_AUTH_URL".to_owned(),
                    "http://127.0.0.1:5000/v3".to_owned()
                ),
                ("A".to_owned(), "b c".to_owned()),
            ]
        );
    }
}
