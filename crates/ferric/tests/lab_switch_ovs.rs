//! The `ironic-networking` network interface against a real Open vSwitch driven over a real
//! SSH session (issue 44): nodes on fake power and deploy go through cleaning, deployment
//! and undeploy through the HTTP API and the real conductor, and each stage's VLAN is read off
//! the switch with `ovs-vsctl get port … tag`; a tag changed by hand is found by the drift
//! check and put back; a switch nobody answers on fails the deployment naming it.
//!
//! The test runs its own switch in a temporary directory: `ovsdb-server` and `ovs-vswitchd`
//! (this kernel has no openvswitch module, so the bridge is userspace, `datapath_type=netdev`,
//! its ports `dummy` interfaces: OVS's own test mode, `--enable-dummy`) and an `sshd` on a free
//! port of 127.0.0.1 that lets in the key the test makes. It needs `scripts/install-deps.sh
//! --lab` (openvswitch-switch, openssh-server) and root (sshd logs in as the user running it
//! and wants `/run/sshd`), hence the `lab-e2e` feature; it boots no machine and takes seconds.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::Drivers;
use ferric_drivers::switch::NetworkSettings;
use ferric_testkit::api::{Api, NodeSpec};
use serde_json::{Value, json};

const IDLE: &str = "10";
const PROVISIONING: &str = "100";
const CLEANING: &str = "101";
const TENANT_A: &str = "200";
const TENANT_B: &str = "201";
const SWITCH_ID: &str = "52:54:00:00:5e:01";
const TIMEOUT: Duration = Duration::from_secs(300);

/// An Open vSwitch and the sshd in front of it, stopped when dropped.
struct Switch {
    dir: tempfile::TempDir,
    sshd: Child,
    port: u16,
}

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Switch {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path();
        let db = path.join("conf.db");
        run(Command::new("ovsdb-tool")
            .arg("create")
            .arg(&db)
            .arg("/usr/share/openvswitch/vswitch.ovsschema"));
        let daemon = |name: &str| {
            [
                format!("--pidfile={}", path.join(format!("{name}.pid")).display()),
                format!("--unixctl={}", path.join(format!("{name}.ctl")).display()),
                format!("--log-file={}", path.join(format!("{name}.log")).display()),
                "--detach".to_owned(),
            ]
        };
        run(Command::new("ovsdb-server")
            .arg(&db)
            .arg(format!("--remote=punix:{}", path.join("db.sock").display()))
            .args(daemon("ovsdb-server")));
        let switch = |args: &[&str]| {
            run(Command::new("ovs-vsctl").env("OVS_RUNDIR", path).args(args));
        };
        switch(&["--no-wait", "init"]);
        run(Command::new("ovs-vswitchd")
            .arg(format!("unix:{}", path.join("db.sock").display()))
            .arg("--enable-dummy")
            .args(daemon("ovs-vswitchd")));
        switch(&[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
        ]);
        for port in ["node0-nic0", "node1-nic0"] {
            switch(&[
                "add-port",
                "br0",
                port,
                "--",
                "set",
                "interface",
                port,
                "type=dummy",
            ]);
            switch(&[
                "set",
                "port",
                port,
                "vlan_mode=access",
                &format!("tag={IDLE}"),
            ]);
        }
        // The SSH server, with a host key and a client key made here.
        for key in ["host_key", "client_key"] {
            run(Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", ""])
                .arg("-f")
                .arg(path.join(key)));
        }
        std::fs::copy(path.join("client_key.pub"), path.join("authorized_keys")).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {keys}\n\
             PidFile {dir}/sshd.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n\
             SetEnv OVS_RUNDIR={dir}\n",
            host = path.join("host_key").display(),
            keys = path.join("authorized_keys").display(),
            dir = path.display(),
        );
        std::fs::write(path.join("sshd_config"), config).unwrap();
        let sshd = Command::new("/usr/sbin/sshd")
            .arg("-D")
            .arg("-f")
            .arg(path.join("sshd_config"))
            .arg("-E")
            .arg(path.join("sshd.log"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        // Ready when it accepts a connection.
        let ready = (0..3000).any(|_| {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() || {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(ready, "sshd did not listen on {port}");
        Self { dir, sshd, port }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn vsctl(&self, args: &[&str]) -> String {
        run(Command::new("ovs-vsctl")
            .env("OVS_RUNDIR", self.path())
            .args(args))
    }

    /// `ovs-vsctl get port <port> tag`: the VLAN, or `[]`.
    fn tag(&self, port: &str) -> String {
        self.vsctl(&["get", "port", port, "tag"])
    }

    /// The switch file: this switch, and one on a port nobody listens on.
    fn settings(&self) -> PathBuf {
        let user = run(Command::new("id").arg("-un"));
        let file = self.path().join("switches.toml");
        let text = format!(
            r#"
[networks]
idle = {IDLE}
provisioning = {PROVISIONING}
cleaning = {CLEANING}

[tenant_networks]
tenant-a = {TENANT_A}

[ssh]
connect_timeout = 5
attempts = 2
retry_delay_ms = 0
persist = 5
state_dir = "{state}"

[[switches]]
name = "sw0"
switch_id = "{SWITCH_ID}"
address = "127.0.0.1"
port = {port}
user = "{user}"
private_key_file = "{key}"
device_type = "netmiko_ovs_linux"

[[switches]]
name = "sw-dead"
address = "127.0.0.1"
port = {dead}
user = "{user}"
private_key_file = "{key}"
device_type = "netmiko_ovs_linux"
"#,
            state = self.path().join("ssh").display(),
            port = self.port,
            key = self.path().join("client_key").display(),
            dead = free_port(),
        );
        std::fs::write(&file, text).unwrap();
        file
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
        for daemon in ["ovs-vswitchd", "ovsdb-server"] {
            if let Ok(pid) = std::fs::read_to_string(self.path().join(format!("{daemon}.pid"))) {
                let _ = Command::new("kill").arg(pid.trim()).status();
            }
        }
    }
}

async fn send(api: &Api, method: Method, path: &str, body: Value) -> Value {
    let answer = api.send_latest(method, path, Some(body)).await;
    assert!(answer.status.is_success(), "{path}: {}", answer.body);
    answer.body
}

async fn provision(api: &Api, node: &str, body: Value) {
    let answer = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{node}/states/provision"),
            Some(body),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
}

async fn history(api: &Api, node: &str) -> Vec<String> {
    let answer = api
        .send_latest(Method::GET, &format!("/v1/nodes/{node}/history"), None)
        .await;
    answer.body["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["event"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// A node on `ironic-networking` with one port cabled to `port` of `sw0`, in `manageable`.
async fn node_on(api: &Api, name: &str, port: &str, mac: &str, extra: Value) -> String {
    let node = api
        .enroll_node(
            NodeSpec::fake()
                .with("name", json!(name))
                .with("network_interface", json!("ironic-networking")),
        )
        .await;
    send(
        api,
        Method::POST,
        "/v1/ports",
        json!({
            "address": mac,
            "node_uuid": node,
            "local_link_connection": {"switch_id": SWITCH_ID, "port_id": port},
            "extra": extra,
        }),
    )
    .await;
    provision(api, &node, json!({"target": "manage"})).await;
    api.run_until_state(&node, "manageable", TIMEOUT).await;
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switch_ports_follow_the_node_and_the_switch_is_checked() {
    let switch = Switch::start();
    let settings = NetworkSettings::from_file(&switch.settings()).unwrap();
    let drivers = Drivers::default().with_switches(settings).unwrap();
    let metrics = drivers.metrics().clone();
    let config = ConductorConfig {
        switch_drift_check_interval: None,
        switch_drift_repair: true,
        ..ConductorConfig::default()
    };
    let api = Api::with_drivers(TestDb::sqlite().await, config, drivers).await;

    let node0 = node_on(&api, "node-0", "node0-nic0", "52:54:00:12:34:00", json!({})).await;
    // node-1's tenant network is its port's own switchport (Ironic's standalone field).
    let node1 = node_on(
        &api,
        "node-1",
        "node1-nic0",
        "52:54:00:12:34:01",
        json!({"switchport": {"mode": "access", "native_vlan": 201}}),
    )
    .await;

    // Manual cleaning holds on the cleaning network; done, the port rests on the idle one.
    provision(
        &api,
        &node0,
        json!({"target": "clean", "clean_steps": [
            {"interface": "deploy", "step": "erase_devices_metadata"},
            {"interface": "deploy", "step": "hold"}
        ]}),
    )
    .await;
    api.run_until_state(&node0, "clean hold", TIMEOUT).await;
    assert_eq!(switch.tag("node0-nic0"), CLEANING);
    provision(&api, &node0, json!({"target": "unhold"})).await;
    api.run_until_state(&node0, "manageable", TIMEOUT).await;
    assert_eq!(switch.tag("node0-nic0"), IDLE);

    for node in [&node0, &node1] {
        provision(&api, node, json!({"target": "provide"})).await;
        api.run_until_state(node, "available", TIMEOUT).await;
    }
    assert_eq!(switch.tag("node0-nic0"), IDLE);

    // node-0's VIF names tenant network A; the deployment holds on the provisioning network.
    send(
        &api,
        Method::POST,
        &format!("/v1/nodes/{node0}/vifs"),
        json!({"id": "tenant-a"}),
    )
    .await;
    provision(
        &api,
        &node0,
        json!({"target": "active", "deploy_steps": [
            {"interface": "deploy", "step": "hold", "priority": 50, "args": {}}
        ]}),
    )
    .await;
    api.run_until_state(&node0, "deploy hold", TIMEOUT).await;
    assert_eq!(switch.tag("node0-nic0"), PROVISIONING);
    provision(&api, &node0, json!({"target": "unhold"})).await;
    let active = api.run_until_state(&node0, "active", TIMEOUT).await;
    assert_eq!(switch.tag("node0-nic0"), TENANT_A);
    let recorded = &active["driver_internal_info"]["switch_ports"]["sw0|node0-nic0"];
    assert_eq!(recorded["network"], "tenant", "{active:#}");
    assert_eq!(recorded["vlan"], 200);

    provision(&api, &node1, json!({"target": "active"})).await;
    api.run_until_state(&node1, "active", TIMEOUT).await;
    assert_eq!(switch.tag("node1-nic0"), TENANT_B);
    assert_eq!(switch.tag("node0-nic0"), TENANT_A);

    // Someone moves node-0's port by hand: the drift check reports it and puts it back.
    assert_eq!(
        api.conductor()
            .run_reconciler("switch_drift")
            .await
            .unwrap(),
        0
    );
    switch.vsctl(&["set", "port", "node0-nic0", "tag=999"]);
    assert_eq!(
        api.conductor()
            .run_reconciler("switch_drift")
            .await
            .unwrap(),
        1
    );
    assert_eq!(switch.tag("node0-nic0"), TENANT_A);
    let events = history(&api, &node0).await;
    assert!(
        events
            .iter()
            .any(|event| event.contains("Switch port drift")
                && event.contains("node0-nic0")
                && event.contains("VLAN 999")
                && event.contains("VLAN 200")),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|event| event.starts_with("Repaired")),
        "{events:#?}"
    );
    let scraped = metrics.encode(&ferric_metrics::Snapshot::default());
    assert!(
        scraped.contains(r#"ferric_switch_port_drifts_total{switch="sw0"} 1"#),
        "{scraped}"
    );
    assert!(
        scraped.contains(r#"ferric_switch_port_repairs_total{switch="sw0"} 1"#),
        "{scraped}"
    );
    assert_eq!(
        api.conductor()
            .run_reconciler("switch_drift")
            .await
            .unwrap(),
        0
    );

    // Undeploy: off the tenant network, through cleaning, back to rest on the idle one.
    provision(&api, &node0, json!({"target": "deleted"})).await;
    api.run_until_state(&node0, "available", TIMEOUT).await;
    assert_eq!(switch.tag("node0-nic0"), IDLE);
    assert_eq!(switch.tag("node1-nic0"), TENANT_B);

    // node-0 recabled to a switch nobody answers on: its deployment fails naming the switch.
    let ports = api
        .send_latest(Method::GET, &format!("/v1/nodes/{node0}/ports"), None)
        .await;
    let port = ports.body["ports"][0]["uuid"].as_str().unwrap().to_owned();
    // A port's connection changes only in maintenance once the node is available (Ironic's
    // rule); the node stays available.
    let maintenance = format!("/v1/nodes/{node0}/maintenance");
    send(
        &api,
        Method::PUT,
        &maintenance,
        json!({"reason": "recabling"}),
    )
    .await;
    send(
        &api,
        Method::PATCH,
        &format!("/v1/ports/{port}"),
        json!([{"op": "replace", "path": "/local_link_connection",
                "value": {"switch_id": "52:54:00:00:5e:99", "switch_info": "sw-dead",
                          "port_id": "node0-nic0"}}]),
    )
    .await;
    let answer = api.send_latest(Method::DELETE, &maintenance, None).await;
    assert!(answer.status.is_success(), "{}", answer.body);
    provision(&api, &node0, json!({"target": "active"})).await;
    let failed = api.run_until_state(&node0, "deploy failed", TIMEOUT).await;
    let last_error = failed["last_error"].as_str().unwrap();
    assert!(
        last_error.contains("Switch sw-dead (127.0.0.1:"),
        "{last_error}"
    );
    assert!(last_error.contains("node0-nic0"), "{last_error}");
    assert!(
        last_error.contains("ovs-vsctl set port node0-nic0 tag=100"),
        "{last_error}"
    );
    assert!(last_error.contains("unknown"), "{last_error}");
    let recorded = &failed["driver_internal_info"]["switch_ports"]["sw-dead|node0-nic0"];
    assert_eq!(recorded["network"], "unknown", "{failed:#}");
}
