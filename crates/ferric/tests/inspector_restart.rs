//! `ferric inspector` killed (SIGKILL) in the middle of an introspection and started again:
//! two real processes on one SQLite file — `ferric server` (API + conductor, the service not
//! in-process) and `ferric inspector`. The node waits in `inspect wait` across the crash, the
//! new process matches the ramdisk's data to it and applies the rule created before the
//! crash, and the conductor takes the node to `manageable` with its inventory.
//!
//! The conductor asks the service every 60 s (`inspector_status`), so this test waits up to
//! that long for the last step.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::Server;
use serde_json::{Value, json};

const MAC: &str = "52:54:00:12:34:01";

/// A running `ferric inspector` and the address it bound.
struct Inspector {
    child: Child,
    address: String,
}

impl Inspector {
    fn start(dir: &Path, listen: &str) -> Inspector {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ferric"))
            .args(["inspector", "--database-url", "shared.db"])
            .args(["--log-format", "json"])
            .current_dir(dir)
            .env_remove("FERRIC_DATABASE_URL")
            .env_remove("FERRIC_CONFIG")
            .env("FERRIC_INSPECTOR_LISTEN", listen)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ferric inspector");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut inspector = Inspector {
            child,
            address: String::new(),
        };
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(120))
                .expect("no 'inspection service listening' log line");
            let record: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if record["message"] == "inspection service listening" {
                inspector.address = record["address"].as_str().unwrap().to_owned();
                // Keep draining the log so the process never blocks on a full pipe.
                std::thread::spawn(move || for _ in lines {});
                return inspector;
            }
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// SIGKILL, as a crash or the OOM killer would.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Inspector {
    fn drop(&mut self) {
        self.kill();
    }
}

fn wait_for_state(http: &reqwest::blocking::Client, server: &Server, uuid: &str, state: &str) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let node: Value = http
            .get(server.url(&format!("/v1/nodes/{uuid}")))
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .send()
            .unwrap()
            .json()
            .unwrap();
        if node["provision_state"] == state {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node never reached {state}: {node:#}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn a_killed_inspector_continues_its_introspection() {
    let dir = tempfile::tempdir().unwrap();
    // The service first, on a free port; the server is told where it is.
    let mut inspector = Inspector::start(dir.path(), "127.0.0.1:0");
    let address = inspector.address.clone();
    let server = Server::start_with_env(
        dir.path(),
        &["--database-url", "shared.db"],
        &[
            ("FERRIC_INSPECTOR_ENABLED", "true"),
            ("FERRIC_INSPECTOR_IN_PROCESS", "false"),
            ("FERRIC_INSPECTOR_SERVICE_URL", &format!("http://{address}")),
            ("FERRIC_SYNC_POWER_STATE_INTERVAL", "0"),
        ],
    );
    let http = reqwest::blocking::Client::new();
    let created = http
        .post(inspector.url("/v1/rules"))
        .json(&json!({
            "description": "mark x86 machines",
            "conditions": [{"op": "eq", "field": "inventory.cpu.architecture", "value": "x86_64"}],
            "actions": [{"action": "set-attribute", "path": "/extra/arch_checked", "value": true}]
        }))
        .send()
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);

    let node: Value = http
        .post(server.url("/v1/nodes"))
        .header("X-OpenStack-Ironic-API-Version", "latest")
        .json(&json!({"driver": "fake-hardware", "inspect_interface": "inspector"}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let port = http
        .post(server.url("/v1/ports"))
        .json(&json!({"node_uuid": uuid, "address": MAC}))
        .send()
        .unwrap();
    assert!(port.status().is_success());
    for (verb, rests_in) in [("manage", "manageable"), ("inspect", "inspect wait")] {
        let answer = http
            .put(server.url(&format!("/v1/nodes/{uuid}/states/provision")))
            .header("X-OpenStack-Ironic-API-Version", "latest")
            .json(&json!({"target": verb}))
            .send()
            .unwrap();
        assert_eq!(answer.status().as_u16(), 202, "{verb}");
        wait_for_state(&http, &server, &uuid, rests_in);
    }

    // The crash, in the middle of the introspection; then the same service again.
    inspector.kill();
    let inspector = Inspector::start(dir.path(), &address);
    let status: Value = http
        .get(inspector.url(&format!("/v1/introspection/{uuid}")))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(status["state"], "waiting", "{status}");

    let data = json!({"inventory": {
        "interfaces": [{"name": "eth0", "mac_address": MAC, "ipv4_address": "10.0.0.5"}],
        "cpu": {"count": 4, "architecture": "x86_64"},
        "memory": {"total": 8589934592u64, "physical_mb": 8192},
        "disks": [{"name": "/dev/sda", "size": 107374182400u64}],
    }, "boot_interface": MAC});
    let answer = http
        .post(inspector.url("/v1/continue"))
        .json(&data)
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);

    wait_for_state(&http, &server, &uuid, "manageable");
    let node: Value = http
        .get(server.url(&format!("/v1/nodes/{uuid}")))
        .header("X-OpenStack-Ironic-API-Version", "latest")
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(node["properties"]["cpus"], 4, "{node:#}");
    assert_eq!(
        node["extra"]["arch_checked"], true,
        "the rule from before the crash"
    );
    let inventory: Value = http
        .get(server.url(&format!("/v1/nodes/{uuid}/inventory")))
        .header("X-OpenStack-Ironic-API-Version", "latest")
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(inventory["inventory"]["cpu"]["count"], 4, "{inventory}");
}
