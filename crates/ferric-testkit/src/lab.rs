//! The QEMU lab's scenario harness, shared by the `lab_*` suites of the `ferric` binary.
//!
//! A suite is a `harness = false` test binary: the lab's network exists only inside its
//! network namespace, so the binary brings the lab up ([`Lab::up`]), runs itself again inside
//! the namespace ([`Lab::run_inside`]) for the scenario, and takes the lab down
//! ([`Lab::outside`] wraps all of it). Inside, [`Lab::server`] starts `ferric server` wired
//! to the lab (API on the lab's bridge, the boot HTTP root, the ramdisk names) and waits until
//! it answers; [`enroll_machine`] enrolls a lab machine with its BMC and port. When a run
//! fails, its directory is kept with the server's log, the database, the machines' consoles
//! and the lab's logs, and the suite says where.

pub mod client;
pub mod image;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde_json::{Value, json};

pub use client::Client;
pub use image::{MarkerBoot, build_marker_image, marker_boot};

/// The address the lab's bridge gives the host side, where the API listens.
pub const API: &str = "http://10.231.0.1:6385";

/// Runs a suite: `outside` when started by cargo, `inside(dir)` when the binary was started
/// again inside the lab's namespace (`BINARY inside DIR`). Failures print `SUITE: FAILED: …`.
pub fn main(
    suite: &str,
    outside: impl FnOnce() -> anyhow::Result<()>,
    inside: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("inside"), Some(dir)) => inside(Path::new(dir)),
        _ => outside(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{suite}: FAILED: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `command` (stdin closed) and returns its standard output; a failure carries its
/// standard output and error.
pub fn run(command: &mut Command, what: &str) -> anyhow::Result<String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    ensure!(
        output.status.success(),
        "{what} failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Prints a phase's time as `SUITE: phase NAME: 12.3 s` (docs/lab.md reads these lines).
pub fn phase(suite: &str, name: &str, started: Instant) {
    eprintln!(
        "{suite}: phase {name}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The hex SHA-256 of `bytes` (image checksums in `instance_info`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The length of a file now (where to start reading what comes next); 0 if it is missing.
pub fn file_len(path: &Path) -> usize {
    std::fs::metadata(path).map_or(0, |meta| usize::try_from(meta.len()).unwrap_or(0))
}

/// `len` bytes of the file at `path` from byte `offset` on (a disk file's header, a volume's
/// first bytes); an error names the file.
pub fn read_at(path: &Path, offset: u64, len: usize) -> anyhow::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let mut bytes = vec![0; len];
    std::fs::File::open(path)
        .and_then(|file| file.read_exact_at(&mut bytes, offset))
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(bytes)
}

/// One suite's lab: its name, network namespace, run directory and `ferric` binary.
pub struct Lab {
    /// The suite's name, which prefixes what it prints (`lab_lifecycle`).
    pub suite: &'static str,
    /// The lab's network namespace (each suite has its own name).
    pub namespace: &'static str,
    /// The run's directory: `boot/` (what the boot server serves), `lab/` (the lab's state
    /// and logs), `server.log`, the database.
    pub dir: PathBuf,
    ferric: PathBuf,
}

impl Lab {
    /// The lab of `suite` in a fresh run directory `/tmp/{prefix}-{pid}` (the same directory
    /// inside the namespace: the binary is given it). `ferric` is the binary under test
    /// (`env!("CARGO_BIN_EXE_ferric")`).
    pub fn new(suite: &'static str, namespace: &'static str, prefix: &str, ferric: &str) -> Self {
        Self::at(
            suite,
            namespace,
            PathBuf::from(format!("/tmp/{prefix}-{}", std::process::id())),
            ferric,
        )
    }

    /// The lab of `suite` whose run directory is `dir` (inside the namespace).
    pub fn at(suite: &'static str, namespace: &'static str, dir: PathBuf, ferric: &str) -> Self {
        Self {
            suite,
            namespace,
            dir,
            ferric: PathBuf::from(ferric),
        }
    }

    /// A `ferric` command.
    pub fn ferric(&self) -> Command {
        Command::new(&self.ferric)
    }

    /// Prints the phase's time (see [`phase`]).
    pub fn phase(&self, name: &str, started: Instant) {
        phase(self.suite, name, started);
    }

    /// Builds Ferric's agent ramdisk into `boot/` (the agent `FERRIC_E2E_AGENT` names, or the
    /// one beside the binary; the kernel unpacked in `FERRIC_E2E_KERNEL_DIR` — its `boot/` and
    /// `lib/modules/` —, or the host's); `ramdisk build`'s report.
    pub fn build_ramdisk(&self) -> anyhow::Result<String> {
        run(&mut self.ramdisk_command(), "ferric ramdisk build")
    }

    /// The `ferric ramdisk build` command [`Lab::build_ramdisk`] runs, to add arguments to.
    pub fn ramdisk_command(&self) -> Command {
        let mut build = self.ferric();
        build
            .args(["ramdisk", "build", "--output"])
            .arg(self.dir.join("boot"));
        if let Some(agent) = std::env::var_os("FERRIC_E2E_AGENT") {
            build.arg("--agent").arg(agent);
        }
        if let Some(kernel) = std::env::var_os("FERRIC_E2E_KERNEL_DIR") {
            let kernel = PathBuf::from(kernel);
            build
                .arg("--boot-dir")
                .arg(kernel.join("boot"))
                .arg("--modules-dir")
                .arg(kernel.join("lib/modules"));
        }
        build
    }

    /// `ferric lab ARGS --namespace … --dir DIR/lab`.
    pub fn lab(&self, args: &[&str], what: &str) -> anyhow::Result<String> {
        run(
            self.ferric()
                .arg("lab")
                .args(args)
                .args(["--namespace", self.namespace])
                .arg("--dir")
                .arg(self.dir.join("lab")),
            what,
        )
    }

    /// Brings the lab up: `ferric lab up ARGS`.
    pub fn up(&self, args: &[&str]) -> anyhow::Result<()> {
        let mut all = vec!["up"];
        all.extend_from_slice(args);
        self.lab(&all, "ferric lab up").map(drop)
    }

    /// Runs this binary again inside the lab's namespace (`inside DIR`): the scenario.
    pub fn run_inside(&self) -> anyhow::Result<()> {
        let status = Command::new("ip")
            .args(["netns", "exec", self.namespace])
            .arg(std::env::current_exe()?)
            .arg("inside")
            .arg(&self.dir)
            .status()
            .context("cannot run the scenario inside the lab's namespace")?;
        ensure!(status.success(), "the scenario failed ({status})");
        Ok(())
    }

    /// Creates the run directory (with `boot/images/`), runs `scenario` (which prepares,
    /// brings the lab up and runs inside it), then takes the lab down whatever happened. On success the run directory goes; on failure it stays and
    /// the suite prints where, with `kept` (what to read in it: `server.log, lab/bmc.log`).
    pub fn outside(
        &self,
        kept: &str,
        scenario: impl FnOnce() -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        let result = std::fs::create_dir_all(self.dir.join("boot/images"))
            .context("cannot create the run directory")
            .and_then(|()| scenario());
        let down = self.lab(&["down"], "ferric lab down");
        match (result, down) {
            (Ok(()), Ok(_)) => {
                eprintln!(
                    "{}: passed in {:.1} s",
                    self.suite,
                    started.elapsed().as_secs_f64()
                );
                let _ = std::fs::remove_dir_all(&self.dir);
                Ok(())
            }
            (result, down) => {
                // CI keeps this output, not the directory: the logs' last lines go with it.
                for path in self.kept_logs(kept) {
                    self.print_tail(&path);
                }
                eprintln!(
                    "{}: kept for inspection: {} ({kept})",
                    self.suite,
                    self.dir.display()
                );
                result?;
                down.map(drop)
            }
        }
    }

    /// The text logs a `kept` list names (`server.log, lab/node-*/console.log with …`): each
    /// item's first word, one `*` in a file name matched against its directory; databases and
    /// captures left out.
    fn kept_logs(&self, kept: &str) -> Vec<PathBuf> {
        let mut logs = Vec::new();
        for item in kept.split(',') {
            let Some(name) = item.split_whitespace().next() else {
                continue;
            };
            if !name.ends_with(".log") {
                continue;
            }
            let Some((before, after)) = name.split_once('*') else {
                logs.push(self.dir.join(name));
                continue;
            };
            // `lab/node-*/console.log`: the directory part up to the star is listed.
            let (parent, prefix) = before.rsplit_once('/').unwrap_or(("", before));
            let (middle_suffix, rest) = after.split_once('/').unwrap_or((after, ""));
            let Ok(entries) = std::fs::read_dir(self.dir.join(parent)) else {
                continue;
            };
            let mut found: Vec<PathBuf> = entries
                .flatten()
                .filter(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    name.starts_with(prefix) && name.ends_with(middle_suffix)
                })
                .map(|entry| entry.path().join(rest))
                .collect();
            found.sort();
            logs.extend(found);
        }
        logs
    }

    /// Prints a log's last lines (control characters shown as `?`, long lines cut).
    fn print_tail(&self, path: &Path) {
        const LINES: usize = 25;
        const WIDTH: usize = 240;
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        let shown = path.strip_prefix(&self.dir).unwrap_or(path).display();
        eprintln!(
            "{}: the last {} of {} lines of {shown}:",
            self.suite,
            LINES.min(lines.len()),
            lines.len()
        );
        for line in &lines[lines.len().saturating_sub(LINES)..] {
            let clean: String = line
                .chars()
                .filter(|c| *c != '\r')
                .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
                .take(WIDTH)
                .collect();
            eprintln!("{}:   {clean}", self.suite);
        }
    }

    /// The lab's description (`lab/lab.json`: its machines, their BMCs and MACs).
    pub fn description(&self) -> anyhow::Result<Value> {
        let path = self.dir.join("lab/lab.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    }

    /// The lab's machines, as `lab.json` lists them.
    pub fn machines(&self) -> anyhow::Result<Vec<Value>> {
        self.description()?["nodes"]
            .as_array()
            .cloned()
            .context("lab.json has no nodes")
    }

    /// A machine's serial console log (`lab/MACHINE/console.log`, every boot kept).
    pub fn console(&self, machine: &str) -> PathBuf {
        self.dir.join(format!("lab/{machine}/console.log"))
    }

    /// The machine's console from byte `from` on ([`file_len`] of the console before).
    pub fn console_since(&self, machine: &str, from: usize) -> String {
        let bytes = std::fs::read(self.console(machine)).unwrap_or_default();
        String::from_utf8_lossy(bytes.get(from..).unwrap_or_default()).into_owned()
    }

    /// Waits until the machine's console shows `text` after byte `from`, for at most
    /// `timeout`; otherwise an error that says `what` did not happen and where to look.
    pub fn wait_for_console(
        &self,
        machine: &str,
        text: &str,
        from: usize,
        timeout: Duration,
        what: &str,
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        while !self.console_since(machine, from).contains(text) {
            ensure!(
                started.elapsed() < timeout,
                "{what}; see {}",
                self.console(machine).display()
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        Ok(())
    }

    /// `ferric server` wired to the lab: the API on the lab's bridge at [`API`], the boot
    /// HTTP server on port 8080 serving `boot/`, Ferric's ramdisk, info logs; run in the run
    /// directory. Add settings with `.env(…)` (they override these) and pass it to
    /// [`Lab::server`].
    pub fn server_command(&self) -> Command {
        let mut command = self.ferric();
        command
            .arg("server")
            .args(["--api-listen", "10.231.0.1:6385", "--api-url", API])
            .args(["--boot-http-listen", "10.231.0.1:8080", "--boot-http-root"])
            .arg(self.dir.join("boot"))
            .current_dir(&self.dir)
            .env("FERRIC_DEPLOY_KERNEL", "ferric-agent.kernel")
            .env("FERRIC_DEPLOY_RAMDISK", "ferric-agent.initramfs")
            .env("FERRIC_LOG_LEVEL", "info");
        command
    }

    /// Starts `command` (from [`Lab::server_command`]) with its log in `server.log` and waits
    /// until `client`'s API answers; the server stops when the value is dropped.
    pub fn server(&self, command: Command, client: &Client) -> anyhow::Result<Server> {
        self.server_logged(command, client, "server.log")
    }

    /// [`Lab::server`] with its log in `log` (a second server of the run).
    pub fn server_logged(
        &self,
        mut command: Command,
        client: &Client,
        log: &str,
    ) -> anyhow::Result<Server> {
        let log = std::fs::File::create(self.dir.join(log))?;
        let server = Server(
            command
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .context("cannot start ferric server")?,
        );
        client
            .wait_until_up(Duration::from_secs(120))
            .with_context(|| format!("see {}", self.dir.display()))?;
        Ok(server)
    }
}

/// A process started for the scenario; SIGTERM (then wait) when dropped, so a failed phase
/// leaves nothing running.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        // Only a child still running: one already waited for is gone, its pid maybe reused.
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
        }
        let _ = self.0.wait();
    }
}

/// Enrolls a lab machine as a Redfish node (its BMC's address and credentials, `pxe` boot,
/// `direct` deploy) with the fields of `extra` added or replacing those, and its port with
/// the machine's MAC; the node's UUID. A `driver_info` in `extra` adds to the Redfish one,
/// or replaces it when `extra` names another `driver` (IPMI, say).
pub fn enroll_machine(client: &Client, machine: &Value, extra: Value) -> anyhow::Result<String> {
    let mut body = json!({
        "name": machine["name"],
        "driver": "redfish",
        "boot_interface": "pxe",
        "deploy_interface": "direct",
        "driver_info": {
            "redfish_address": machine["redfish_address"],
            "redfish_system_id": machine["redfish_system_id"],
            "redfish_username": machine["redfish_username"],
            "redfish_password": machine["redfish_password"],
        },
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        let same_driver = extra
            .get("driver")
            .is_none_or(|driver| *driver == body["driver"]);
        for (field, value) in extra {
            match (body.get_mut(field), value) {
                (Some(Value::Object(info)), Value::Object(more))
                    if field == "driver_info" && same_driver =>
                {
                    info.extend(more.clone());
                }
                _ => {
                    body.insert(field.clone(), value.clone());
                }
            }
        }
    }
    let created = client.post("/v1/nodes", body)?;
    let uuid = created["uuid"].as_str().context("no uuid")?.to_owned();
    client.post(
        "/v1/ports",
        json!({"node_uuid": uuid, "address": machine["mac"]}),
    )?;
    Ok(uuid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_list_names_the_logs_to_print() {
        let dir = tempfile::tempdir().unwrap();
        for node in ["node-0", "node-1"] {
            std::fs::create_dir_all(dir.path().join("lab").join(node)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("lab/tftp")).unwrap();
        let lab = Lab::at("suite", "ns", dir.path().to_path_buf(), "ferric");
        let kept = "server.log, ferric.db, lab/node-*/console.log with IPA's log, lab/bmc.log, \
                    capture.pcap";
        let logs: Vec<PathBuf> = lab
            .kept_logs(kept)
            .into_iter()
            .map(|path| path.strip_prefix(dir.path()).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            logs,
            [
                "server.log",
                "lab/node-0/console.log",
                "lab/node-1/console.log",
                "lab/bmc.log"
            ]
            .map(PathBuf::from)
        );
    }
}
