//! The inspection service's ironic-inspector API over a real socket, with a real HTTP
//! client: introspection start/status/list/abort/data, `/v1/continue` and its node cache,
//! rules, version headers, the PXE filter and the timeout.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::time::Duration;

use ferric_db::testing::TestDb;
use ferric_drivers::Drivers;
use ferric_inspector::{Service, ServiceConfig};
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, Node, Port};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const MAC: &str = "52:54:00:12:34:01";

struct Harness {
    url: String,
    http: reqwest::Client,
    service: Arc<Service>,
    db: TestDb,
    hostsdir: tempfile::TempDir,
    config: ServiceConfig,
    shutdown: CancellationToken,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn harness() -> Harness {
    harness_with(false).await
}

async fn harness_with(discovery: bool) -> Harness {
    let db = TestDb::sqlite().await;
    let hostsdir = tempfile::tempdir().unwrap();
    let config = ServiceConfig {
        dhcp_hostsdir: Some(hostsdir.path().to_owned()),
        callback_url: Some("http://10.0.0.1:5050".into()),
        discovery,
        ..ServiceConfig::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut h = Harness {
        url: format!("http://{}", listener.local_addr().unwrap()),
        http: reqwest::Client::new(),
        service: Arc::new(Service::new(
            db.store.clone(),
            Drivers::default(),
            config.clone(),
        )),
        db,
        hostsdir,
        config,
        shutdown: CancellationToken::new(),
        server: None,
    };
    h.serve(listener);
    h
}

impl Harness {
    fn serve(&mut self, listener: tokio::net::TcpListener) {
        self.server = Some(tokio::spawn(ferric_inspector::serve(
            self.service.clone(),
            listener,
            Duration::from_secs(3600),
            self.shutdown.clone(),
        )));
    }

    /// Stops the service and starts a new one on the same database and address, as a
    /// restart of `ferric inspector` does: nothing survives but what is in the store.
    async fn restart(&mut self) {
        self.shutdown.cancel();
        self.server.take().unwrap().await.unwrap().unwrap();
        let address = self.url.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind(&address).await.unwrap();
        self.service = Arc::new(Service::new(
            self.db.store.clone(),
            Drivers::default(),
            self.config.clone(),
        ));
        self.shutdown = CancellationToken::new();
        self.serve(listener);
        // A fresh client: the old one's pooled connections went with the old server.
        self.http = reqwest::Client::new();
    }
}

impl Harness {
    async fn node(&self, state: ProvisionState, mac: &str) -> Node {
        let mut node = Node::new(Uuid::new_v4(), "fake-hardware", state);
        node.driver_info
            .insert("redfish_address".into(), "http://10.1.0.7:8000".into());
        let node = self.db.store.node_create(&node).await.unwrap();
        self.db
            .store
            .port_create(&Port::new(Uuid::new_v4(), node.uuid, mac))
            .await
            .unwrap();
        node
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body)
    }
}

fn payload(mac: &str) -> Value {
    let mut payload: Value = serde_json::from_str(include_str!("fixtures/qemu.json")).unwrap();
    payload["inventory"]["interfaces"][1]["mac_address"] = mac.into();
    payload["boot_interface"] = mac.into();
    payload
}

#[tokio::test]
async fn introspection_from_start_to_data() {
    let h = harness().await;
    let mut node = h.node(ProvisionState::Manageable, MAC).await;
    node.properties.insert("cpus".into(), 8.into());
    let node = h.db.store.node_update(&node, node.version).await.unwrap();

    let (status, _) = h
        .call(
            reqwest::Method::POST,
            &format!("/v1/introspection/{}?manage_boot=false", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, body) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["state"], "waiting");
    assert_eq!(body["finished"], false);
    assert!(body["error"].is_null());
    // The PXE filter lets the node's MAC boot.
    let entry = h.hostsdir.path().join("inspector-52-54-00-12-34-01");
    assert_eq!(
        std::fs::read_to_string(&entry).unwrap(),
        "52:54:00:12:34:01,set:ferric\n"
    );

    // Data before it exists: 404.
    let (status, _) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}/data", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, body) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(payload(MAC)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["uuid"], node.uuid.to_string());

    let (_, body) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}", node.uuid),
            None,
        )
        .await;
    assert_eq!(body["state"], "finished");
    assert_eq!(body["finished"], true);
    assert!(body["finished_at"].is_string());
    assert!(
        !entry.exists(),
        "the filter closes when the introspection ends"
    );

    let stored = h.db.store.node_get(&Ident::Uuid(node.uuid)).await.unwrap();
    assert_eq!(stored.properties["cpus"], 8, "existing properties are kept");
    assert_eq!(stored.properties["memory_mb"], 2048);
    assert_eq!(stored.properties["local_gb"], 9);
    assert_eq!(stored.properties["cpu_arch"], "x86_64");

    let (status, data) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}/data", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(data["inventory"]["cpu"]["count"], 2);
    assert_eq!(
        data["root_disk"]["name"], "/dev/vdb",
        "the chosen root disk"
    );
    // The inventory is in the store too, where the node's inventory endpoint reads it.
    let inventory =
        h.db.store
            .node_inventory_get(node.uuid)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(inventory.inventory["cpu"]["count"], 2);

    // A second post for a finished introspection is refused.
    let (status, _) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(payload(MAC)))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (_, list) = h
        .call(reqwest::Method::GET, "/v1/introspection", None)
        .await;
    assert_eq!(list["introspection"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn continue_needs_a_node_under_introspection() {
    let h = harness().await;
    let idle = h
        .node(ProvisionState::Manageable, "52:54:00:00:00:09")
        .await;
    // Unknown MAC, and a known MAC whose node is not under introspection: both 404.
    for mac in ["52:54:00:ff:ff:ff", "52:54:00:00:00:09"] {
        let (status, body) = h
            .call(reqwest::Method::POST, "/v1/continue", Some(payload(mac)))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Could not find a node")
        );
    }
    let stored = h.db.store.node_get(&Ident::Uuid(idle.uuid)).await.unwrap();
    assert!(!stored.properties.contains_key("cpus"));

    // Matched by BMC address when the node has no port with the MAC yet.
    let node = h
        .node(ProvisionState::Manageable, "52:54:00:00:00:0a")
        .await;
    h.service
        .start(&node.uuid.to_string(), false)
        .await
        .unwrap();
    let mut data = payload("52:54:00:77:77:77");
    data["inventory"]["bmc_address"] = "10.1.0.7".into();
    // Two nodes share that BMC (the idle one too), but only one is under introspection.
    let (status, body) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(data))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ports =
        h.db.store
            .port_list(
                &ferric_db::PortFilter {
                    node_uuid: Some(node.uuid),
                    ..Default::default()
                },
                &ferric_db::Page::all(),
            )
            .await
            .unwrap();
    let macs: Vec<&str> = ports.iter().map(|port| port.address.as_str()).collect();
    assert!(macs.contains(&"52:54:00:77:77:77"), "{macs:?}");

    let (status, _) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(json!([1])))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn ramdisk_errors_and_rules_fail_the_introspection() {
    let h = harness().await;
    let node = h.node(ProvisionState::Manageable, MAC).await;
    h.service
        .start(&node.uuid.to_string(), false)
        .await
        .unwrap();
    let mut data = payload(MAC);
    data["error"] = "no disks found".into();
    let (status, _) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(data))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, body) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}", node.uuid),
            None,
        )
        .await;
    assert_eq!(body["state"], "error");
    assert_eq!(
        body["error"],
        "The inspection ramdisk reported an error: no disks found"
    );

    // Rules: create (201), list, apply; a fail action fails the introspection.
    let (status, rule) = h
        .call(
            reqwest::Method::POST,
            "/v1/rules",
            Some(json!({
                "description": "small machines are refused",
                "conditions": [{"op": "lt", "field": "inventory.memory.physical_mb", "value": 4096}],
                "actions": [{"action": "fail", "message": "only {data[inventory][memory][physical_mb]} MiB"}]
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rule}");
    let (_, rules) = h.call(reqwest::Method::GET, "/v1/rules", None).await;
    assert_eq!(rules["rules"][0]["uuid"], rule["uuid"]);
    let (status, _) = h
        .call(
            reqwest::Method::POST,
            "/v1/rules",
            Some(json!({"actions": []})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    h.service
        .start(&node.uuid.to_string(), false)
        .await
        .unwrap();
    let (status, _) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(payload(MAC)))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (_, body) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}", node.uuid),
            None,
        )
        .await;
    assert_eq!(body["error"], "only 2048 MiB");

    let path = format!("/v1/rules/{}", rule["uuid"].as_str().unwrap());
    let (status, _) = h.call(reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = h.call(reqwest::Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn abort_timeout_states_and_versions() {
    let h = harness().await;
    let node = h.node(ProvisionState::Manageable, MAC).await;
    // manage_boot (the default): the service boots the node through its (fake) interfaces.
    let (status, _) = h
        .call(
            reqwest::Method::POST,
            &format!("/v1/introspection/{}", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = h
        .call(
            reqwest::Method::POST,
            &format!("/v1/introspection/{}/abort", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, body) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}", node.uuid),
            None,
        )
        .await;
    assert_eq!(body["state"], "error");
    assert_eq!(body["error"], "Canceled by operator");
    // Nothing left to abort.
    let (status, _) = h
        .call(
            reqwest::Method::POST,
            &format!("/v1/introspection/{}/abort", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Timeout.
    h.service
        .start(&node.uuid.to_string(), false)
        .await
        .unwrap();
    let later = chrono::Utc::now() + chrono::TimeDelta::hours(2);
    assert_eq!(h.service.periodic(later).await, 1);
    let status = h.service.status(&node.uuid.to_string()).await.unwrap();
    assert_eq!(status.error.as_deref(), Some("Introspection timeout"));

    // Nodes in other states cannot be introspected; unknown nodes are 404.
    let active = h.node(ProvisionState::Active, "52:54:00:00:00:0b").await;
    let (status, body) = h
        .call(
            reqwest::Method::POST,
            &format!("/v1/introspection/{}", active.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid provision state")
    );
    let (status, _) = h
        .call(reqwest::Method::GET, "/v1/introspection/nope", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Version headers on every answer; no header means the latest; out of range is 406.
    let response = h.http.get(format!("{}/", h.url)).send().await.unwrap();
    let headers = response.headers().clone();
    assert_eq!(
        headers["x-openstack-ironic-inspector-api-minimum-version"],
        "1.0"
    );
    assert_eq!(
        headers["x-openstack-ironic-inspector-api-maximum-version"],
        "1.18"
    );
    assert_eq!(headers["x-openstack-ironic-inspector-api-version"], "1.18");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["versions"][0]["id"], "1.18");
    let response = h
        .http
        .get(format!("{}/v1/introspection", h.url))
        .header("X-OpenStack-Ironic-Inspector-API-Version", "2.0")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_ACCEPTABLE);
    assert_eq!(
        response.headers()["x-openstack-ironic-inspector-api-maximum-version"],
        "1.18"
    );
}

#[tokio::test]
async fn a_restart_continues_a_running_introspection_and_keeps_rules() {
    let mut h = harness().await;
    let node = h.node(ProvisionState::Manageable, MAC).await;
    let (status, rule) = h
        .call(
            reqwest::Method::POST,
            "/v1/rules",
            Some(json!({
                "description": "two CPUs go to rack 1",
                "conditions": [{"op": "ge", "field": "inventory.cpu.count", "value": 2}],
                "actions": [{"action": "set-attribute", "path": "/extra/rack", "value": "r1"}]
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rule}");
    let (status, _) = h
        .call(
            reqwest::Method::POST,
            &format!("/v1/introspection/{}?manage_boot=false", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // The filter entry goes missing while the service is down; the restarted service
    // writes it again from the introspections in the store.
    let entry = h.hostsdir.path().join("inspector-52-54-00-12-34-01");
    std::fs::remove_file(&entry).unwrap();

    h.restart().await;
    h.service.sync_filter().await;
    assert!(entry.exists(), "the PXE filter is rebuilt from the store");
    let (status, body) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "waiting");
    let (_, rules) = h.call(reqwest::Method::GET, "/v1/rules", None).await;
    assert_eq!(rules["rules"].as_array().unwrap().len(), 1, "{rules}");
    assert_eq!(rules["rules"][0]["uuid"], rule["uuid"]);

    // The ramdisk's data reaches the new process, which matches it to the node.
    let (status, body) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(payload(MAC)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["uuid"], node.uuid.to_string());
    let stored = h.db.store.node_get(&Ident::Uuid(node.uuid)).await.unwrap();
    assert_eq!(stored.properties["memory_mb"], 2048);
    assert_eq!(
        stored.extra["rack"], "r1",
        "the rule from before the restart"
    );
    assert!(
        !entry.exists(),
        "the filter closes when the introspection ends"
    );

    // A crash in the middle of processing leaves the introspection `processing`; the next
    // start puts it back to `waiting`, so the ramdisk's retry is processed.
    let other = h
        .node(ProvisionState::Manageable, "52:54:00:12:34:09")
        .await;
    h.service
        .start(&other.uuid.to_string(), false)
        .await
        .unwrap();
    assert!(
        h.db.store
            .introspection_transition(other.uuid, &["waiting"], "processing")
            .await
            .unwrap()
    );
    h.restart().await;
    // `serve()` recovers at start, concurrently with this test; recovering is idempotent.
    h.service.recover().await.unwrap();
    let (_, body) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}", other.uuid),
            None,
        )
        .await;
    assert_eq!(body["state"], "waiting", "{body}");
    // An abort cut short ends in `error`, saying so.
    assert!(
        h.db.store
            .introspection_transition(other.uuid, &["waiting"], "aborting")
            .await
            .unwrap()
    );
    h.service.recover().await.unwrap();
    let status = h.service.status(&other.uuid.to_string()).await.unwrap();
    assert_eq!(status.state.as_str(), "error");
    assert!(
        status
            .error
            .as_deref()
            .unwrap()
            .contains("stopped while ending"),
        "{status:?}"
    );

    // And once more: the finished introspection and its data are still there.
    h.restart().await;
    let (_, body) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}", node.uuid),
            None,
        )
        .await;
    assert_eq!(body["state"], "finished", "{body}");
    assert!(body["error"].is_null());
    let (status, data) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{}/data", node.uuid),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(data["inventory"]["cpu"]["count"], 2);
    assert_eq!(data["root_disk"]["name"], "/dev/vdb");
}

/// The data of a machine Ferric does not know: two NICs, booted from the first, and a BMC.
fn unknown_machine(boot_mac: &str, other_mac: &str, bmc: &str) -> Value {
    let mut data = payload(boot_mac);
    data["inventory"]["interfaces"][2]["mac_address"] = other_mac.into();
    data["inventory"]["bmc_address"] = bmc.into();
    data
}

async fn node_count(h: &Harness) -> usize {
    h.db.store
        .node_list(&ferric_db::NodeFilter::default(), &ferric_db::Page::all())
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn discovery_enrolls_an_unknown_machine() {
    let h = harness_with(true).await;
    h.service.sync_filter().await;
    assert_eq!(
        std::fs::read_to_string(h.hostsdir.path().join("inspector-unknown")).unwrap(),
        "*:*:*:*:*:*,set:ferric\n",
        "unknown machines may boot the ramdisk"
    );
    // Rules can tell discovered machines apart (`auto_discovered` in the data).
    let (status, _) = h
        .call(
            reqwest::Method::POST,
            "/v1/rules",
            Some(json!({
                "description": "credentials for discovered machines",
                "conditions": [{"op": "eq", "field": "data://auto_discovered", "value": true}],
                "actions": [{"action": "set-attribute", "path": "/driver_info/ipmi_username",
                             "value": "admin"}]
            })),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    // Bad data from an unknown machine enrolls nothing.
    let mut broken = unknown_machine("52:54:00:aa:00:01", "52:54:00:aa:00:02", "10.1.0.99");
    broken["error"] = "no disks".into();
    let (status, _) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(broken))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(node_count(&h).await, 0);

    let data = unknown_machine("52:54:00:aa:00:01", "52:54:00:aa:00:02", "10.1.0.99");
    let (status, body) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(data.clone()))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let uuid = Uuid::parse_str(body["uuid"].as_str().unwrap()).unwrap();
    let node = h.db.store.node_get(&Ident::Uuid(uuid)).await.unwrap();
    assert_eq!(node.provision_state, ProvisionState::Enroll);
    assert_eq!(node.driver, "fake-hardware");
    assert_eq!(node.driver_info["ipmi_address"], "10.1.0.99");
    assert_eq!(node.driver_info["ipmi_username"], "admin", "the rule ran");
    assert_eq!(node.properties["memory_mb"], 2048);
    assert_eq!(node.properties["cpu_arch"], "x86_64");
    assert!(
        node.power_interface.is_some(),
        "the hardware type's default interfaces, as the API sets them"
    );
    let inventory = h.db.store.node_inventory_get(uuid).await.unwrap().unwrap();
    assert_eq!(inventory.inventory["cpu"]["count"], 2);
    assert_eq!(inventory.plugin_data["auto_discovered"], true);
    let mut ports: Vec<(String, bool)> =
        h.db.store
            .port_list(
                &ferric_db::PortFilter {
                    node_uuid: Some(uuid),
                    ..Default::default()
                },
                &ferric_db::Page::all(),
            )
            .await
            .unwrap()
            .into_iter()
            .map(|port| (port.address, port.pxe_enabled))
            .collect();
    ports.sort();
    assert_eq!(
        ports,
        [
            ("52:54:00:aa:00:01".to_owned(), true),
            ("52:54:00:aa:00:02".to_owned(), false)
        ],
        "a port per NIC, PXE on the one it booted from"
    );
    let (_, status_body) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{uuid}"),
            None,
        )
        .await;
    assert_eq!(status_body["state"], "finished", "{status_body}");
    let (status, stored) = h
        .call(
            reqwest::Method::GET,
            &format!("/v1/introspection/{uuid}/data"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(stored["auto_discovered"], true);
    // Its MACs are enrolled now: the filter stops answering them.
    h.service.sync_filter().await;
    assert_eq!(
        std::fs::read_to_string(h.hostsdir.path().join("inspector-52-54-00-aa-00-01")).unwrap(),
        "52:54:00:aa:00:01,ignore\n"
    );

    // The same machine again, or another one claiming its BMC: known, so refused.
    let again = h
        .call(reqwest::Method::POST, "/v1/continue", Some(data))
        .await;
    assert_eq!(again.0, StatusCode::NOT_FOUND, "{}", again.1);
    let same_bmc = unknown_machine("52:54:00:bb:00:01", "52:54:00:bb:00:02", "10.1.0.99");
    let (status, body) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(same_bmc))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already has BMC address"),
        "{body}"
    );
    assert_eq!(node_count(&h).await, 1);

    // A machine that reports no BMC is enrolled without one.
    let no_bmc = unknown_machine("52:54:00:cc:00:01", "52:54:00:cc:00:02", "0.0.0.0");
    let (status, body) = h
        .call(reqwest::Method::POST, "/v1/continue", Some(no_bmc))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let uuid = Uuid::parse_str(body["uuid"].as_str().unwrap()).unwrap();
    let node = h.db.store.node_get(&Ident::Uuid(uuid)).await.unwrap();
    assert!(!node.driver_info.contains_key("ipmi_address"));
    assert_eq!(node_count(&h).await, 2);
}
