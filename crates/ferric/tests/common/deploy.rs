//! What the deploy tests through the real agent share (`glance.rs`, `oci.rs`, `peers.rs`): a
//! machine as the agent sees it (fixture /proc and /sys, a sparse file as its disk), the agent
//! booted in-process on it, and an operator driving the Bare Metal API.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferric_agent::config::{AgentConfig, PowerMode};
use reqwest::blocking::Client;
use serde_json::{Value, json};

use super::{Server, eventually};

/// The microversion the operator speaks.
pub(crate) const VERSION: (&str, &str) = ("X-OpenStack-Ironic-API-Version", "1.68");

/// A port nobody listens on now (for a server or an agent the test starts next).
pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("a bound address").port()
}

/// A machine as the agent sees it.
pub(crate) struct FakeMachine {
    pub(crate) sys: PathBuf,
    pub(crate) proc: PathBuf,
    pub(crate) disk: PathBuf,
    pub(crate) mac: String,
}

/// A machine under `root` with one NIC of `mac` and a sparse disk of `disk_bytes`.
pub(crate) fn fake_machine(root: &Path, mac: &str, disk_bytes: u64) -> FakeMachine {
    let write = |path: PathBuf, text: &str| {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create a fixture directory");
        }
        std::fs::write(&path, text).expect("write a fixture file");
    };
    let sys = root.join("sys");
    let proc = root.join("proc");
    let nic = sys.join("class/net/eth0");
    write(nic.join("address"), &format!("{mac}\n"));
    write(nic.join("carrier"), "1\n");
    write(nic.join("device/vendor"), "0x1af4\n");
    write(sys.join("class/dmi/id/sys_vendor"), "QEMU\n");
    write(
        proc.join("cpuinfo"),
        "processor\t: 0\nmodel name\t: Test CPU\n",
    );
    write(proc.join("meminfo"), "MemTotal:        2048000 kB\n");
    write(proc.join("sys/kernel/hostname"), "ramdisk\n");
    let disk = root.join("disk.img");
    std::fs::File::create(&disk)
        .and_then(|file| file.set_len(disk_bytes))
        .expect("create the disk file");
    FakeMachine {
        sys,
        proc,
        disk,
        mac: mac.to_owned(),
    }
}

/// The agent's settings for `machine` against `server`: loopback, dry power.
pub(crate) fn agent_config(server: &Server, machine: &FakeMachine) -> AgentConfig {
    let mut config = AgentConfig::new(vec![server.url("")]);
    config.listen = "127.0.0.1:0".parse().expect("an address");
    config.disks = vec![machine.disk.clone()];
    config.sys_root = machine.sys.clone();
    config.proc_root = machine.proc.clone();
    config.power = PowerMode::Dry;
    config.lookup_timeout = Duration::from_secs(120);
    config
}

/// Boots `config`'s agent in-process: it looks its node up and heartbeats.
pub(crate) fn boot_agent(
    runtime: &tokio::runtime::Runtime,
    config: AgentConfig,
) -> ferric_agent::RunningAgent {
    runtime
        .block_on(ferric_agent::RunningAgent::start(config))
        .expect("start the agent")
}

/// `len` bytes of `disk` from `offset`.
pub(crate) fn read_disk(disk: &Path, offset: u64, len: usize) -> Vec<u8> {
    let mut buffer = vec![0u8; len];
    std::fs::File::open(disk)
        .and_then(|file| file.read_exact_at(&mut buffer, offset))
        .expect("read the disk file");
    buffer
}

/// Drives the Bare Metal API as an operator would.
pub(crate) struct Operator<'a> {
    pub(crate) server: &'a Server,
    pub(crate) http: Client,
}

impl<'a> Operator<'a> {
    pub(crate) fn new(server: &'a Server) -> Self {
        Self {
            server,
            http: Client::new(),
        }
    }

    /// Sends a request; anything but a success fails the test.
    pub(crate) fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method.clone(), self.server.url(path))
            .header(VERSION.0, VERSION.1);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().expect("reach the API");
        let status = response.status();
        let text = response.text().expect("read the answer");
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    pub(crate) fn node(&self, uuid: &str) -> Value {
        self.send(reqwest::Method::GET, &format!("/v1/nodes/{uuid}"), None)
    }

    /// Creates the node `body` and a port of `mac` on it; its UUID.
    pub(crate) fn create_node(&self, body: Value, mac: &str) -> String {
        let node = self.send(reqwest::Method::POST, "/v1/nodes", Some(body));
        let uuid = node["uuid"].as_str().expect("a node UUID").to_owned();
        self.send(
            reqwest::Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": mac})),
        );
        uuid
    }

    /// Asks for the provision `target` without waiting.
    pub(crate) fn request(&self, uuid: &str, target: &str) {
        self.send(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": target})),
        );
    }

    /// Asks for `target` and waits until the node rests in `expect`; the node then.
    pub(crate) fn provision(&self, uuid: &str, target: &str, expect: &str) -> Value {
        self.request(uuid, target);
        self.wait_for(uuid, expect)
    }

    /// Waits until `uuid` rests in `expect` (no task holding it); a failed state other than
    /// the one expected fails the test. The node then.
    pub(crate) fn wait_for(&self, uuid: &str, expect: &str) -> Value {
        eventually(&format!("{uuid} in {expect}"), || {
            let node = self.node(uuid);
            let state = node["provision_state"].as_str().unwrap_or_default();
            assert!(
                !state.ends_with("failed") || expect.ends_with("failed"),
                "{node:#}"
            );
            (state == expect && node["reservation"].is_null()).then_some(node)
        })
    }

    /// The validation of `uuid`'s `interface`: (result, reason).
    pub(crate) fn validate(&self, uuid: &str, interface: &str) -> (bool, String) {
        let answer = self.send(
            reqwest::Method::GET,
            &format!("/v1/nodes/{uuid}/validate"),
            None,
        );
        (
            answer[interface]["result"].as_bool().unwrap_or(false),
            answer[interface]["reason"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        )
    }

    /// A counter of the API's /metrics.
    pub(crate) fn counter(&self, name: &str) -> u64 {
        let text = self
            .http
            .get(self.server.url("/metrics"))
            .send()
            .and_then(|response| response.text())
            .expect("read /metrics");
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .map(|value| value as u64)
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
    }
}
