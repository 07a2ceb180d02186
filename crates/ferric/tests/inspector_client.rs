//! python-ironic-inspector-client against the inspection service that `ferric server` runs
//! in-process: `openstack baremetal introspection start / status / list / abort / data save`,
//! with this test playing the ramdisk (`POST /v1/continue`). The client comes from the pinned
//! venv that `scripts/install-deps.sh` creates (`scripts/inspector-client-venv.sh`);
//! `FERRIC_INSPECTOR_CLIENT_VENV` points elsewhere. About 15 s, most of it Python start-up.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::Server;
use serde_json::{Value, json};

fn openstack() -> PathBuf {
    let venv = std::env::var_os("FERRIC_INSPECTOR_CLIENT_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").expect("HOME is set");
            PathBuf::from(home).join(".cache/ferric/inspector-client-venv")
        });
    let command = venv.join("bin/openstack");
    assert!(
        command.is_file(),
        "{} is missing: run scripts/install-deps.sh (or scripts/inspector-client-venv.sh)",
        command.display()
    );
    command
}

/// Runs `openstack baremetal introspection <args>`; returns stdout, panics on failure.
fn introspection(inspector: &str, args: &[&str]) -> String {
    let output = Command::new(openstack())
        .args(["--os-auth-type", "none", "--inspector-url", inspector])
        .args(["baremetal", "introspection"])
        .args(args)
        .env_remove("OS_CLOUD")
        .output()
        .expect("run openstack");
    assert!(
        output.status.success(),
        "introspection {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn status(inspector: &str, node: &str) -> Value {
    serde_json::from_str(&introspection(inspector, &["status", node, "-f", "json"])).unwrap()
}

#[test]
fn the_inspector_client_drives_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with_env(
        dir.path(),
        &["--database-url", "inspect.db"],
        &[
            ("FERRIC_INSPECTOR_ENABLED", "true"),
            ("FERRIC_INSPECTOR_LISTEN", "127.0.0.1:0"),
            ("FERRIC_SYNC_POWER_STATE_INTERVAL", "0"),
        ],
    );
    let inspector = format!(
        "http://{}",
        server
            .inspector_address
            .as_deref()
            .expect("the service runs")
    );
    let http = reqwest::blocking::Client::new();
    let node: Value = http
        .post(server.url("/v1/nodes"))
        .header("X-OpenStack-Ironic-API-Version", "latest")
        .json(&json!({"driver": "fake-hardware", "name": "box-1"}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    let port = http
        .post(server.url("/v1/ports"))
        .json(&json!({"node_uuid": uuid, "address": "52:54:00:12:34:01"}))
        .send()
        .unwrap();
    assert!(port.status().is_success());

    // start (the service boots the node through its fake interfaces) and status.
    introspection(&inspector, &["start", &uuid]);
    let waiting = status(&inspector, &uuid);
    assert_eq!(waiting["state"], "waiting", "{waiting}");
    assert_eq!(waiting["finished"], false);

    // The ramdisk reports.
    let inventory = json!({"inventory": {
        "interfaces": [{"name": "eth0", "mac_address": "52:54:00:12:34:01",
                        "ipv4_address": "10.0.0.5"}],
        "cpu": {"count": 4, "architecture": "x86_64"},
        "memory": {"total": 8589934592u64, "physical_mb": 8192},
        "disks": [{"name": "/dev/sda", "size": 107374182400u64}],
    }, "boot_interface": "52:54:00:12:34:01"});
    let answer = http
        .post(format!("{inspector}/v1/continue"))
        .json(&inventory)
        .send()
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);

    let finished = status(&inspector, &uuid);
    assert_eq!(finished["state"], "finished", "{finished}");
    assert_eq!(finished["finished"], true);
    assert!(finished["error"].is_null());

    let saved = dir.path().join("data.json");
    introspection(
        &inspector,
        &["data", "save", "--file", saved.to_str().unwrap(), &uuid],
    );
    let data: Value = serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(data["inventory"]["cpu"]["count"], 4);

    let node: Value = http
        .get(server.url(&format!("/v1/nodes/{uuid}")))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(node["properties"]["cpus"], 4);
    assert_eq!(node["properties"]["local_gb"], 99);

    // Again, by name this time, and abort.
    introspection(&inspector, &["start", "box-1"]);
    introspection(&inspector, &["abort", "box-1"]);
    let aborted = status(&inspector, &uuid);
    assert_eq!(aborted["state"], "error");
    assert_eq!(aborted["error"], "Canceled by operator");
    let listed = introspection(&inspector, &["list", "-f", "json"]);
    assert!(listed.contains(&uuid), "{listed}");
}
