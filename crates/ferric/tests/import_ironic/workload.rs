//! The scripted workload: a real Ironic 39 populated through its own API with nodes in
//! several stable states, failed and waiting ones, and every kind of record `ferric import`
//! brings over; then the list of every `GET` whose answers Ferric must repeat.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use reqwest::blocking::Client;
use serde_json::{Value, json};

/// Both services are asked at this microversion (the newest of each: Ironic 39's and
/// Ferric's).
pub(crate) const MICROVERSION: &str = "1.115";

/// One API client against `base` (`http://host:port`).
pub(crate) struct Api<'a> {
    pub(crate) http: &'a Client,
    pub(crate) base: String,
}

impl Api<'_> {
    pub(crate) fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .http
            .request(method, &url)
            .header("X-OpenStack-Ironic-API-Version", MICROVERSION);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .unwrap_or_else(|error| panic!("{url}: {error}"));
        let status = response.status().as_u16();
        let text = response.text().unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, body)
    }

    pub(crate) fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, None)
    }

    /// A write that must succeed; returns its body.
    pub(crate) fn ok(&self, method: &str, path: &str, body: Value) -> Value {
        let (status, answer) = self.send(method, path, Some(body));
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {answer}"
        );
        answer
    }

    /// Sets the node's provision state with `target` and waits until it settles in `state`.
    pub(crate) fn provision(&self, node: &str, target: &str, state: &str) -> Value {
        self.ok(
            "PUT",
            &format!("/v1/nodes/{node}/states/provision"),
            json!({"target": target}),
        );
        self.settle(node, state)
    }

    /// Waits for the node to reach `state` with no target (the deadline only catches hangs).
    pub(crate) fn settle(&self, node: &str, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (_, body) = self.get(&format!("/v1/nodes/{node}"));
            if body["provision_state"] == state
                && (body["target_provision_state"].is_null()
                    || state.ends_with("wait")
                    || state.ends_with("failed"))
                && body["reservation"].is_null()
            {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "node {node} never reached {state}: {body}"
            );
            thread::sleep(Duration::from_millis(200));
        }
    }
}

fn node(api: &Api<'_>, name: &str, extra: Value) -> String {
    let mut body = json!({
        "name": name,
        "driver": "fake-hardware",
        "driver_info": {"fake_password": "s3cret-bmc", "fake_address": "10.0.0.1"},
        "properties": {"cpus": 8, "memory_mb": 16384, "local_gb": 100, "cpu_arch": "x86_64"},
        "extra": {"rack": "r1"},
        "resource_class": "baremetal",
    });
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    api.ok("POST", "/v1/nodes", body)["uuid"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Populates Ironic; returns the UUIDs of the nodes by name.
pub(crate) fn populate(api: &Api<'_>) -> Vec<(String, String)> {
    let chassis = api.ok(
        "POST",
        "/v1/chassis",
        json!({"description": "rack 1", "extra": {"row": "a"}}),
    )["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    api.ok("POST", "/v1/chassis", json!({"description": "empty"}));

    let mut nodes = Vec::new();
    // enroll, with everything an operator sets on a node.
    let enroll = node(
        api,
        "node-enroll",
        json!({"chassis_uuid": chassis, "description": "new", "conductor_group": "", "shard": "shard-1",
               "automated_clean": false,
               "instance_info": {"image_source": "http://images/x.qcow2",
                                 "image_checksum": "abc"}}),
    );
    // A project-scoped rule refuses an owner at creation (noauth is such an admin).
    api.ok(
        "PATCH",
        &format!("/v1/nodes/{enroll}"),
        json!([{"op": "add", "path": "/owner", "value": "project-a"},
               {"op": "add", "path": "/lessee", "value": "project-b"}]),
    );
    nodes.push(("node-enroll".to_owned(), enroll.clone()));

    let manageable = node(api, "node-manageable", json!({"chassis_uuid": chassis}));
    api.provision(&manageable, "manage", "manageable");
    api.ok(
        "PUT",
        &format!("/v1/nodes/{manageable}/traits"),
        json!({"traits": ["CUSTOM_GPU", "HW_CPU_X86_VMX"]}),
    );
    nodes.push(("node-manageable".to_owned(), manageable.clone()));

    let available = node(api, "node-available", json!({}));
    api.provision(&available, "manage", "manageable");
    api.provision(&available, "provide", "available");
    nodes.push(("node-available".to_owned(), available.clone()));

    let maintenance = node(api, "node-maintenance", json!({"parent_node": available}));
    api.provision(&maintenance, "manage", "manageable");
    api.provision(&maintenance, "provide", "available");
    api.ok(
        "PUT",
        &format!("/v1/nodes/{maintenance}/maintenance"),
        json!({"reason": "disk replaced"}),
    );
    nodes.push(("node-maintenance".to_owned(), maintenance));

    let active = node(
        api,
        "node-active",
        json!({"instance_info": {"image_source": "http://images/y.qcow2"}}),
    );
    api.provision(&active, "manage", "manageable");
    api.provision(&active, "provide", "available");
    api.ok(
        "PATCH",
        &format!("/v1/nodes/{active}"),
        json!([{"op": "add", "path": "/instance_uuid",
                "value": "5e9a7c36-5d9b-4f0e-9a55-30f0d2b0c1e7"},
               {"op": "add", "path": "/instance_name", "value": "vm-1"}]),
    );
    api.provision(&active, "active", "active");
    api.ok(
        "PATCH",
        &format!("/v1/nodes/{active}"),
        json!([{"op": "replace", "path": "/protected", "value": true},
               {"op": "add", "path": "/protected_reason", "value": "tenant workload"}]),
    );
    api.ok(
        "PUT",
        &format!("/v1/nodes/{active}/traits/CUSTOM_ACTIVE"),
        Value::Null,
    );
    nodes.push(("node-active".to_owned(), active.clone()));

    // Failed: cleaning cannot reach its deploy kernel.
    let failed = node(
        api,
        "node-clean-failed",
        json!({"deploy_interface": "direct", "boot_interface": "ipxe",
               "driver_info": {"deploy_kernel": "http://127.0.0.1:1/kernel",
                               "deploy_ramdisk": "http://127.0.0.1:1/ramdisk"}}),
    );
    api.provision(&failed, "manage", "manageable");
    api.ok(
        "PUT",
        &format!("/v1/nodes/{failed}/states/provision"),
        json!({"target": "provide"}),
    );
    api.settle(&failed, "clean failed");
    nodes.push(("node-clean-failed".to_owned(), failed));

    // Waiting for a ramdisk that never comes: taken over mid-work (docs/import.md).
    let waiting = node(
        api,
        "node-clean-wait",
        json!({"deploy_interface": "direct", "boot_interface": "ipxe",
               "driver_info": {"deploy_kernel": format!("{}/v1", api.base),
                               "deploy_ramdisk": format!("{}/v1", api.base)}}),
    );
    api.provision(&waiting, "manage", "manageable");
    api.ok(
        "PUT",
        &format!("/v1/nodes/{waiting}/states/provision"),
        json!({"target": "provide"}),
    );
    api.settle(&waiting, "clean wait");
    nodes.push(("node-clean-wait".to_owned(), waiting));

    // Ports, one in a portgroup, one on the active node.
    let portgroup = api.ok(
        "POST",
        "/v1/portgroups",
        json!({"node_uuid": manageable, "name": "bond0", "address": "52:54:00:aa:bb:01",
               "mode": "802.3ad", "properties": {"miimon": "100"}, "extra": {"lag": 1},
               "standalone_ports_supported": false, "physical_network": "physnet1"}),
    )["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    api.ok(
        "POST",
        "/v1/ports",
        json!({"node_uuid": manageable, "address": "52:54:00:AA:BB:02",
               "portgroup_uuid": portgroup, "pxe_enabled": false,
               "physical_network": "physnet1", "name": "eth0",
               "local_link_connection": {"switch_id": "0a:1b:2c:3d:4e:5f",
                                         "port_id": "Ethernet1/1",
                                         "switch_info": "tor-1"},
               "extra": {"cable": "blue"}}),
    );
    api.ok(
        "POST",
        "/v1/ports",
        json!({"node_uuid": enroll, "address": "52:54:00:aa:bb:03",
               "description": "provisioning NIC", "vendor": "acme", "category": "boot"}),
    );
    // Ports may not be added to an active node without maintenance; use the available one.
    api.ok(
        "POST",
        "/v1/ports",
        json!({"node_uuid": available, "address": "52:54:00:aa:bb:04"}),
    );

    // Volume connector and target (storage interface noop still stores them).
    api.ok(
        "POST",
        "/v1/volume/connectors",
        json!({"node_uuid": enroll, "type": "iqn",
               "connector_id": "iqn.2017-07.org.example:01", "extra": {"a": 1}}),
    );
    api.ok(
        "POST",
        "/v1/volume/targets",
        json!({"node_uuid": enroll, "volume_type": "iscsi", "boot_index": 0,
               "volume_id": "04452bed-5367-4202-8bf5-de4335ac56d2",
               "properties": {"target_lun": 0}}),
    );

    // Allocations: one satisfied by the available node, one that waits for a match.
    let allocation = api.ok(
        "POST",
        "/v1/allocations",
        json!({"name": "alloc-1", "resource_class": "baremetal",
               "candidate_nodes": [available], "extra": {"for": "vm-2"}}),
    )["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    while api.get(&format!("/v1/allocations/{allocation}")).1["state"] == "allocating" {
        assert!(Instant::now() < deadline, "allocation never processed");
        thread::sleep(Duration::from_millis(200));
    }
    api.ok(
        "POST",
        "/v1/allocations",
        json!({"name": "alloc-none", "resource_class": "no-such-class",
               "traits": ["CUSTOM_NONE"]}),
    );

    api.ok(
        "POST",
        "/v1/deploy_templates",
        json!({"name": "CUSTOM_HYPERTHREADING_ON", "extra": {"k": "v"},
               "steps": [{"interface": "bios", "step": "apply_configuration",
                          "args": {"settings": [{"name": "LogicalProc", "value": "Enabled"}]},
                          "priority": 150}]}),
    );
    api.ok(
        "POST",
        "/v1/runbooks",
        json!({"name": "CUSTOM_RAID_RESET", "description": "reset",
               "steps": [{"interface": "raid", "step": "delete_configuration", "args": {},
                          "order": 1},
                         {"interface": "bios", "step": "apply_configuration",
                          "args": {"settings": []}, "order": 2}]}),
    );
    nodes
}

/// The UUID of the workload's node `name`.
pub(crate) fn uuid_of(nodes: &[(String, String)], name: &str) -> String {
    nodes
        .iter()
        .find(|(node, _)| node == name)
        .map(|(_, uuid)| uuid.clone())
        .unwrap()
}

/// What fake-hardware cannot produce through the API, written into a stopped Ironic's SQLite
/// tables as its drivers would: BIOS settings with their registry, firmware components, an
/// inspection inventory, and node tags (which no API shows; the import reports them).
pub(crate) fn seed_node_data(database: &Path, nodes: &[(String, String)]) {
    let uuid = |name: &str| uuid_of(nodes, name);
    let script = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
node = lambda uuid: db.execute("SELECT id FROM nodes WHERE uuid = ?", (uuid,)).fetchone()[0]
manageable, active = node(sys.argv[2]), node(sys.argv[3])
when = "2026-01-02 03:04:05.678901"
db.execute('INSERT INTO bios_settings (node_id, name, value, attribute_type, allowable_values, '
           'lower_bound, max_length, min_length, read_only, reset_required, "unique", '
           'upper_bound, created_at, version) VALUES (?, ?, ?, ?, ?, NULL, NULL, NULL, 0, 1, 0, '
           'NULL, ?, ?)', (manageable, "LogicalProc", "Enabled", "Enumeration",
           '["Enabled", "Disabled"]', when, "1.1"))
db.execute('INSERT INTO bios_settings (node_id, name, value, attribute_type, lower_bound, '
           'upper_bound, read_only, created_at, updated_at, version) VALUES '
           '(?, ?, ?, ?, ?, ?, 1, ?, ?, ?)',
           (manageable, "ProcCores", "8", "Integer", 1, 64, when, when, "1.1"))
db.execute('INSERT INTO firmware_information (node_id, component, initial_version, '
           'current_version, last_version_flashed, created_at, updated_at, version) VALUES '
           '(?, ?, ?, ?, ?, ?, ?, ?)', (active, "bios", "1.0.0", "1.2.0", "1.2.0", when, when, "1.0"))
db.execute('INSERT INTO node_inventory (node_id, inventory_data, plugin_data, created_at, '
           'version) VALUES (?, ?, ?, ?, ?)', (active,
           '{"cpu": {"count": 8, "architecture": "x86_64"}, "memory": {"physical_mb": 16384}, '
           '"interfaces": [{"name": "eth0", "mac_address": "52:54:00:aa:bb:05"}]}',
           '{"root_disk": {"name": "/dev/sda"}}', when, "1.0"))
for tag in ("blue", "green"):
    db.execute("INSERT INTO node_tags (node_id, tag, created_at, version) VALUES (?, ?, ?, ?)",
               (active, tag, when, "1.0"))
db.commit()
"#;
    let status = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(database)
        .arg(uuid("node-manageable"))
        .arg(uuid("node-active"))
        .status()
        .unwrap();
    assert!(status.success(), "seeding Ironic's node data failed");
}

/// Every `GET` compared: each list, each record, each node's sub-resources.
pub(crate) fn paths(api: &Api<'_>, nodes: &[(String, String)]) -> Vec<String> {
    let mut paths: Vec<String> = [
        "/v1/nodes",
        "/v1/nodes/detail",
        "/v1/ports",
        "/v1/ports/detail",
        "/v1/portgroups",
        "/v1/portgroups/detail",
        "/v1/chassis",
        "/v1/chassis/detail",
        "/v1/allocations",
        "/v1/deploy_templates",
        "/v1/deploy_templates?detail=True",
        "/v1/runbooks",
        "/v1/runbooks?detail=True",
        "/v1/volume/connectors?detail=True",
        "/v1/volume/targets?detail=True",
    ]
    .map(str::to_owned)
    .to_vec();
    for (_, uuid) in nodes {
        for sub in [
            "",
            "/ports",
            "/ports/detail",
            "/portgroups",
            "/traits",
            "/states",
            "/history",
            "/bios",
            "/firmware",
            "/volume/connectors",
            "/volume/targets",
            "/inventory",
            "/bios?detail=True",
        ] {
            paths.push(format!("/v1/nodes/{uuid}{sub}"));
        }
    }
    for (collection, key) in [
        ("ports", "ports"),
        ("portgroups", "portgroups"),
        ("chassis", "chassis"),
        ("allocations", "allocations"),
        ("deploy_templates", "deploy_templates"),
        ("runbooks", "runbooks"),
        ("volume/connectors", "connectors"),
        ("volume/targets", "targets"),
    ] {
        let (_, listing) = api.get(&format!("/v1/{collection}"));
        for item in listing[key].as_array().unwrap() {
            let uuid = item["uuid"].as_str().unwrap();
            paths.push(format!("/v1/{collection}/{uuid}"));
            match collection {
                "portgroups" => paths.push(format!("/v1/portgroups/{uuid}/ports")),
                "chassis" => paths.push(format!("/v1/chassis/{uuid}/nodes")),
                _ => {}
            }
        }
    }
    paths
}
