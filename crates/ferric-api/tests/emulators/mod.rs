//! BMC emulators written by others, started on 127.0.0.1 for one test and stopped when it
//! ends: sushy-tools' Redfish emulator (its fake system driver), OpenIPMI's `ipmi_sim` and
//! pyghmi's `fakebmc` (cipher suite 3 only). `scripts/install-deps.sh` installs them; a missing
//! one fails the test with what to run. And one stub of our own, [`NoCommonSuiteBmc`], for the
//! BMC no emulator plays: one that lists no cipher suite Ferric speaks.

use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// Kills the child when the test ends, however it ends.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_tcp_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn free_udp_port() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap().port()
}

/// A TCP port on loopback where nothing listens (connections are refused).
pub(crate) fn closed_tcp_port() -> u16 {
    free_tcp_port()
}

/// A UDP port on loopback where nothing listens.
pub(crate) fn closed_udp_port() -> u16 {
    free_udp_port()
}

fn program(env: &str, default: PathBuf, what: &str) -> PathBuf {
    let path = std::env::var_os(env).map_or(default, PathBuf::from);
    assert!(
        path.exists(),
        "{what} is not installed at {} (set {env} to override): run `bash \
         scripts/install-deps.sh`, which installs the BMC emulators the driver tests need",
        path.display()
    );
    path
}

fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    home.join(".cache/ferric")
}

/// sushy-tools' `sushy-emulator --fake` with one system and HTTP basic authentication.
pub(crate) struct Sushy {
    process: Process,
    pub(crate) address: String,
    pub(crate) system_path: String,
    username: String,
    password: String,
    dir: TempDir,
}

pub(crate) const SUSHY_SYSTEM_UUID: &str = "4b4c2c7e-5f7b-4c57-9b0a-1b0c3f2d9e11";

impl Sushy {
    pub(crate) async fn start(username: &str, password: &str) -> Sushy {
        Self::start_with(username, password, "").await
    }

    /// With `extra` lines appended to the emulator's configuration (Python), e.g. the
    /// `SUSHY_EMULATOR_STORAGE` and `SUSHY_EMULATOR_DRIVES` its fake driver serves.
    pub(crate) async fn start_with(username: &str, password: &str, extra: &str) -> Sushy {
        let binary = program(
            "FERRIC_SUSHY_EMULATOR",
            cache_dir().join("bmc-venv/bin/sushy-emulator"),
            "sushy-tools' sushy-emulator",
        );
        let dir = tempfile::tempdir().unwrap();
        let hash = bcrypt::hash(password, 4).unwrap();
        std::fs::write(dir.path().join("htpasswd"), format!("{username}:{hash}\n")).unwrap();
        let config = format!(
            "SUSHY_EMULATOR_AUTH_FILE = {auth:?}\n\
             SUSHY_EMULATOR_STATE_DIR = {state:?}\n\
             SUSHY_EMULATOR_FAKE_DRIVER = True\n\
             SUSHY_EMULATOR_FAKE_SYSTEMS = [{{\n\
             \x20   'uuid': '{SUSHY_SYSTEM_UUID}', 'name': 'ferric-test', 'power_state': 'Off',\n\
             \x20   'external_notifier': False,\n\
             \x20   'nics': [{{'mac': '52:54:00:aa:bb:01', 'ip': '192.0.2.10'}}],\n\
             }}]\n{extra}\n",
            auth = dir.path().join("htpasswd").display().to_string(),
            state = dir.path().join("state").display().to_string(),
        );
        std::fs::write(dir.path().join("sushy.conf"), config).unwrap();
        let port = free_tcp_port();
        let log = std::fs::File::create(dir.path().join("sushy.log")).unwrap();
        let child = Command::new(&binary)
            .args(["--config"])
            .arg(dir.path().join("sushy.conf"))
            .args(["--fake", "-i", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let sushy = Sushy {
            process: Process(child),
            address: format!("http://127.0.0.1:{port}"),
            system_path: format!("/redfish/v1/Systems/{SUSHY_SYSTEM_UUID}"),
            username: username.to_owned(),
            password: password.to_owned(),
            dir,
        };
        sushy.wait_ready().await;
        sushy
    }

    async fn wait_ready(&self) {
        // Generous: Python start-up on a loaded 2-core machine. Only a hang trips it.
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = reqwest::Client::new();
        loop {
            let url = format!("{}/redfish/v1/", self.address);
            let answered = client.get(&url).send().await;
            if answered.is_ok_and(|response| response.status().is_success()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sushy-emulator did not answer on {}; its log:\n{}",
                self.address,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sushy.log")).unwrap_or_default()
    }

    /// The ComputerSystem as the emulator shows it (our own HTTP request, not the driver's).
    pub(crate) async fn system(&self) -> Value {
        let _ = &self.process;
        reqwest::Client::new()
            .get(format!("{}{}", self.address, self.system_path))
            .basic_auth(&self.username, Some(&self.password))
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

/// OpenIPMI's `ipmi_sim` serving IPMI 2.0 on a UDP port, with a chassis-control program that
/// keeps power and boot device in files (the emulator's side of the machine).
pub(crate) struct IpmiSim {
    process: Process,
    pub(crate) port: u16,
    dir: TempDir,
}

const CHASSIS_SCRIPT: &str = r#"#!/bin/sh
# ipmi_sim's chassis control program: `<script> <device> get|set <parm> [value] ...`.
dir=$(dirname "$0")
shift
op=$1
shift
case $op in
  get)
    for parm in "$@"; do
      case $parm in
        power) echo "power:$(cat "$dir/power" 2>/dev/null || echo 0)" ;;
        boot) echo "boot:$(cat "$dir/boot" 2>/dev/null || echo default)" ;;
        *) echo "Invalid parameter: $parm"; exit 1 ;;
      esac
    done ;;
  set)
    while [ $# -gt 1 ]; do
      parm=$1; val=$2; shift 2
      case $parm in
        power) echo "$val" > "$dir/power" ;;
        reset) ;;
        boot) echo "$val" > "$dir/boot" ;;
        shutdown) echo 0 > "$dir/power" ;;
        *) echo "Invalid parameter: $parm"; exit 1 ;;
      esac
    done ;;
  *) exit 1 ;;
esac
"#;

impl IpmiSim {
    pub(crate) async fn start(username: &str, password: &str) -> IpmiSim {
        let binary = program(
            "FERRIC_IPMI_SIM",
            PathBuf::from("/usr/bin/ipmi_sim"),
            "ipmi_sim (Debian package openipmi)",
        );
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("chassis.sh");
        std::fs::write(&script, CHASSIS_SCRIPT).unwrap();
        let port = free_udp_port();
        let lan_conf = format!(
            "name \"ferric\"\n\
             set_working_mc 0x20\n\
             \x20 startlan 1\n\
             \x20   addr 127.0.0.1 {port}\n\
             \x20   priv_limit admin\n\
             \x20   allowed_auths_callback none md5 straight\n\
             \x20   allowed_auths_user none md5 straight\n\
             \x20   allowed_auths_operator none md5 straight\n\
             \x20   allowed_auths_admin none md5 straight\n\
             \x20   guid a123456789abcdefa123456789abcdef\n\
             \x20 endlan\n\
             \x20 chassis_control \"/bin/sh {script} 0x20\"\n\
             \x20 user 2 true \"{username}\" \"{password}\" admin 10 none md5 straight\n",
            script = script.display(),
        );
        std::fs::write(dir.path().join("lan.conf"), lan_conf).unwrap();
        std::fs::write(
            dir.path().join("sim.emu"),
            "mc_setbmc 0x20\n\
             mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\n\
             mc_enable 0x20\n",
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("ipmi_sim.log")).unwrap();
        let child = Command::new(&binary)
            .arg("-c")
            .arg(dir.path().join("lan.conf"))
            .arg("-f")
            .arg(dir.path().join("sim.emu"))
            .arg("-s")
            .arg(dir.path().join("state"))
            .args(["-n", "-p"])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let sim = IpmiSim {
            process: Process(child),
            port,
            dir,
        };
        sim.wait_ready(username, password).await;
        sim
    }

    /// Waits until `ipmitool` can read the chassis status through the simulator.
    async fn wait_ready(&self, username: &str, password: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self
                .ipmitool_as(username, password, &["chassis", "power", "status"])
                .is_ok()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "ipmi_sim did not answer on 127.0.0.1:{}; its log:\n{}",
                self.port,
                std::fs::read_to_string(self.dir.path().join("ipmi_sim.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Runs `ipmitool -I lanplus` against the simulator: an independent IPMI client.
    pub(crate) fn ipmitool_as(
        &self,
        username: &str,
        password: &str,
        args: &[&str],
    ) -> Result<String, String> {
        let _ = &self.process;
        ipmitool(self.port, username, password, args)
    }

    fn state_file(&self, name: &str) -> String {
        let _ = &self.process;
        let path: &Path = &self.dir.path().join(name);
        std::fs::read_to_string(path)
            .map(|text| text.trim().to_owned())
            .unwrap_or_default()
    }

    /// The power line as the chassis program last set it: "1" on, "0" off.
    pub(crate) fn power(&self) -> String {
        self.state_file("power")
    }

    /// The boot device as the simulator passed it on: none, pxe, default, cdrom, bios.
    pub(crate) fn boot(&self) -> String {
        self.state_file("boot")
    }
}

/// Runs `ipmitool -I lanplus -C 3` against a BMC on 127.0.0.1:`port`: an independent client.
fn ipmitool(port: u16, username: &str, password: &str, args: &[&str]) -> Result<String, String> {
    let ipmitool = program(
        "FERRIC_IPMITOOL",
        PathBuf::from("/usr/bin/ipmitool"),
        "ipmitool",
    );
    let output = Command::new(ipmitool)
        .args(["-I", "lanplus", "-H", "127.0.0.1", "-p", &port.to_string()])
        .args([
            "-U", username, "-P", password, "-C", "3", "-N", "1", "-R", "1",
        ])
        .args(args)
        .output()
        .map_err(|error| error.to_string())?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// pyghmi's `fakebmc` (through `tests/bmc-emulators/fakebmc.py`, which binds it to loopback):
/// IPMI 2.0 whose Get Channel Cipher Suites lists suite 3 only, and which answers an Open
/// Session proposing 17 with suite 3's algorithms.
pub(crate) struct FakeBmc {
    process: Process,
    pub(crate) port: u16,
    dir: TempDir,
}

impl FakeBmc {
    pub(crate) async fn start(username: &str, password: &str) -> FakeBmc {
        let python = program(
            "FERRIC_BMC_PYTHON",
            cache_dir().join("bmc-venv/bin/python"),
            "the BMC emulators' Python (with pyghmi)",
        );
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/bmc-emulators/fakebmc.py");
        let dir = tempfile::tempdir().unwrap();
        let port = free_udp_port();
        let log = std::fs::File::create(dir.path().join("fakebmc.log")).unwrap();
        let child = Command::new(&python)
            .arg(&script)
            .args([&port.to_string(), username, password])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", python.display()));
        let bmc = FakeBmc {
            process: Process(child),
            port,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while ipmitool(port, username, password, &["chassis", "power", "status"]).is_err() {
            assert!(
                Instant::now() < deadline,
                "fakebmc did not answer on 127.0.0.1:{port}; its log:\n{}",
                bmc.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bmc
    }

    /// What the BMC printed: one line per power change it was asked for.
    pub(crate) fn log(&self) -> String {
        let _ = &self.process;
        std::fs::read_to_string(self.dir.path().join("fakebmc.log")).unwrap_or_default()
    }

    pub(crate) fn ipmitool_as(
        &self,
        username: &str,
        password: &str,
        args: &[&str],
    ) -> Result<String, String> {
        ipmitool(self.port, username, password, args)
    }
}

/// A stub BMC that answers only the two pre-session questions: Get Channel Authentication
/// Capabilities (IPMI 2.0) and Get Channel Cipher Suites, listing suites 1 and 2 (no
/// encryption) — a BMC Ferric cannot open a session with.
pub(crate) struct NoCommonSuiteBmc {
    pub(crate) port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for NoCommonSuiteBmc {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl NoCommonSuiteBmc {
    pub(crate) async fn start() -> NoCommonSuiteBmc {
        use ferric_drivers::ipmi::rmcp;
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = socket.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut buffer = [0u8; 512];
            while let Ok((length, peer)) = socket.recv_from(&mut buffer).await {
                let Ok(packet) = rmcp::parse_packet(&buffer[..length], None) else {
                    continue;
                };
                let Ok(request) = rmcp::parse_ipmi_request(&packet.payload) else {
                    continue;
                };
                let data: &[u8] = match (request.netfn, request.command) {
                    // Channel 1; IPMI 2.0 extended data; per-message auth; IPMI 2.0 only.
                    (0x06, 0x38) => &[0x01, 0x80, 0x04, 0x02, 0, 0, 0, 0],
                    // Channel 1; suite 1 (RAKP-HMAC-SHA1, no integrity, no confidentiality)
                    // and suite 2 (RAKP-HMAC-SHA1, HMAC-SHA1-96, none).
                    (0x06, 0x54) => &[
                        0x01, 0xC0, 0x01, 0x01, 0x40, 0x80, 0xC0, 0x02, 0x01, 0x41, 0x80,
                    ],
                    _ => continue,
                };
                let reply = rmcp::ipmi15_packet(&rmcp::ipmi_response(&request, 0, data));
                let _ = socket.send_to(&reply, peer).await;
            }
        });
        NoCommonSuiteBmc { port, task }
    }
}
