//! Out-of-band inspection (the `redfish` inspect interface) through the HTTP API and the real
//! conductor: enroll, manage, inspect — `inspecting` → `manageable` at once, no ramdisk — then
//! the properties, the ports and `GET /v1/nodes/{node}/inventory`.
//!
//! Against two BMCs: the lab's virtual Redfish BMC (in this process, over the fake machine),
//! which reports processors, memory, a disk and a NIC; and sushy-tools' emulator with its fake
//! driver, which reports NICs, the boot mode and (configured here) Storage drives, but no CPUs
//! or memory — so a node without those properties fails inspection naming the BMC and what it
//! lacked, and one whose operator set them is inspected for the rest.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;
#[allow(dead_code, reason = "this binary uses only the Redfish emulator")]
mod emulators;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::Api;
use emulators::{SUSHY_SYSTEM_UUID, Sushy};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BmcSettings, Drivers};
use ferric_lab::machine::MachineInfo;
use ferric_lab::machine::fake::FakeMachine;
use ferric_lab::redfish::{RedfishBmc, router};
use serde_json::{Value, json};

const GIB: u64 = 1 << 30;
const LAB_MAC: &str = "52:54:00:fe:00:07";

/// The lab's Redfish BMC for a machine with 4 vCPUs, 3 GiB and two disks of `disk_bytes`.
async fn lab_bmc(disk_bytes: u64) -> String {
    let machine = Arc::new(FakeMachine::new(MachineInfo {
        name: "node-7".into(),
        uuid: "c0ffee00-0000-4000-8000-000000000007".into(),
        serial: "FERRIC-LAB-7".into(),
        mac: LAB_MAC.into(),
        memory_mib: 3072,
        cpus: 4,
    }));
    let bmc = Arc::new(RedfishBmc::new(machine, "admin", "secret").with_disk_bytes(disk_bytes));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let app = router(bmc);
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

async fn api() -> Api {
    let settings = BmcSettings {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        retries: 1,
        retry_backoff: Duration::from_millis(50),
        power_state_poll_interval: Duration::from_millis(50),
        ..BmcSettings::default()
    };
    Api::with_drivers(
        TestDb::sqlite().await,
        ConductorConfig::default(),
        Drivers::default().with_bmc_settings(settings),
    )
    .await
}

async fn get(api: &Api, path: &str) -> Value {
    let answer = api.send_latest(Method::GET, path, None).await;
    assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
    answer.body
}

/// Enrolls a `redfish` node (default interfaces) and manages it.
async fn managed(api: &Api, driver_info: Value, properties: Value) -> String {
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(
                json!({"driver": "redfish", "driver_info": driver_info, "properties": properties}),
            ),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(
        created.body["inspect_interface"], "redfish",
        "the redfish hardware type inspects out of band by default, as Ironic's"
    );
    provision(api, &uuid, "manage").await;
    let node = get(api, &format!("/v1/nodes/{uuid}")).await;
    assert_eq!(node["provision_state"], "manageable", "{node:#}");
    uuid
}

async fn provision(api: &Api, uuid: &str, target: &str) -> Value {
    let answer = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({ "target": target })),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    api.settle().await;
    get(api, &format!("/v1/nodes/{uuid}")).await
}

async fn port_macs(api: &Api, uuid: &str) -> Vec<(String, bool)> {
    let ports = get(api, &format!("/v1/nodes/{uuid}/ports/detail")).await;
    let mut macs: Vec<(String, bool)> = ports["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|port| {
            (
                port["address"].as_str().unwrap().to_owned(),
                port["pxe_enabled"].as_bool().unwrap(),
            )
        })
        .collect();
    macs.sort();
    macs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_bmc_inspection_fills_properties_ports_and_inventory() {
    let address = lab_bmc(40 * GIB).await;
    let api = api().await;
    let uuid = managed(
        &api,
        json!({
            "redfish_address": address,
            "redfish_system_id": "/redfish/v1/Systems/node-7",
            "redfish_username": "admin",
            "redfish_password": "secret",
        }),
        json!({}),
    )
    .await;
    assert!(port_macs(&api, &uuid).await.is_empty());

    let node = provision(&api, &uuid, "inspect").await;
    assert_eq!(node["provision_state"], "manageable", "{node:#}");
    assert_eq!(node["last_error"], Value::Null, "{node:#}");
    assert!(node["inspection_finished_at"].is_string(), "{node:#}");
    let properties = &node["properties"];
    assert_eq!(properties["cpus"], 4, "{properties}");
    assert_eq!(properties["memory_mb"], 3072, "{properties}");
    assert_eq!(properties["cpu_arch"], "x86_64", "{properties}");
    // A 40 GiB disk, minus one GiB for partitioning (as Ironic).
    assert_eq!(properties["local_gb"], 39, "{properties}");
    // The fake machine boots in legacy mode.
    assert_eq!(properties["capabilities"], "boot_mode:bios", "{properties}");
    assert_eq!(port_macs(&api, &uuid).await, [(LAB_MAC.to_owned(), true)]);

    let stored = get(&api, &format!("/v1/nodes/{uuid}/inventory")).await;
    let inventory = &stored["inventory"];
    assert_eq!(inventory["cpu"]["count"], 4, "{inventory:#}");
    assert_eq!(inventory["cpu"]["architecture"], "x86_64");
    assert_eq!(inventory["cpu"]["model_name"], "QEMU TCG x86-64");
    assert_eq!(inventory["memory"]["physical_mb"], 3072);
    // The machine's two disks (SimpleStorage, for software RAID-1), then the RAID
    // controller's four drives: its Storage has no volume yet, so the drives are what the
    // inventory shows (ferric-drivers redfish/inspect.rs).
    let disks = inventory["disks"].as_array().unwrap();
    assert_eq!(disks.len(), 6, "{inventory:#}");
    assert!(
        disks[2..].iter().all(|disk| disk["size"] == 2 * GIB),
        "{inventory:#}"
    );
    assert_eq!(inventory["disks"][0]["size"], 40 * GIB);
    assert_eq!(inventory["interfaces"][0]["mac_address"], LAB_MAC);
    assert_eq!(inventory["system_vendor"]["serial_number"], "FERRIC-LAB-7");
    assert_eq!(inventory["boot"]["current_boot_mode"], "bios");
    assert_eq!(inventory["bmc_address"], "127.0.0.1");
    assert_eq!(stored["plugin_data"]["root_disk"]["size"], 40 * GIB);

    // Again, with operator-set properties: kept (as the agent inspection keeps them), no
    // second port for the known MAC.
    let patched = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "replace", "path": "/properties/memory_mb", "value": 1000}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let node = provision(&api, &uuid, "inspect").await;
    assert_eq!(node["provision_state"], "manageable", "{node:#}");
    assert_eq!(node["properties"]["memory_mb"], 1000);
    assert_eq!(node["properties"]["cpus"], 4);
    assert_eq!(port_macs(&api, &uuid).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_bmc_without_a_disk_and_a_wrong_password() {
    // No disk: local_gb 0 (Ironic: "assuming this is a disk-less node"), not a failure.
    let address = lab_bmc(0).await;
    let api = api().await;
    let info = json!({
        "redfish_address": address,
        "redfish_username": "admin",
        "redfish_password": "secret",
    });
    let uuid = managed(&api, info.clone(), json!({})).await;
    let node = provision(&api, &uuid, "inspect").await;
    assert_eq!(node["provision_state"], "manageable", "{node:#}");
    assert_eq!(node["properties"]["local_gb"], 0);

    // Credentials changed after manage: the failure names the BMC and the fix.
    let patched = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "replace", "path": "/driver_info/redfish_password", "value": "wrong"}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let node = provision(&api, &uuid, "inspect").await;
    assert_eq!(node["provision_state"], "inspect failed", "{node:#}");
    let last_error = node["last_error"].as_str().unwrap();
    assert!(
        last_error.contains(&format!("Redfish BMC {address}"))
            && last_error.contains("authentication failed")
            && last_error.contains("redfish_password"),
        "{last_error}"
    );
}

/// What sushy-tools' fake driver offers besides NICs: Storage with two drives (configured).
fn sushy_storage() -> String {
    format!(
        "SUSHY_EMULATOR_STORAGE = {{'{SUSHY_SYSTEM_UUID}': [{{'Id': '1', 'Name': 'Local \
         Storage Controller', 'StorageControllers': [{{'MemberId': '0', 'Name': 'RAID', \
         'SpeedGbps': 12}}], 'Drives': ['disk-a', 'disk-b']}}]}}\n\
         SUSHY_EMULATOR_DRIVES = {{('{SUSHY_SYSTEM_UUID}', '1'): [\
         {{'Id': 'disk-a', 'Name': 'Drive A', 'CapacityBytes': {a}, 'Protocol': 'SAS'}}, \
         {{'Id': 'disk-b', 'Name': 'Drive B', 'CapacityBytes': {b}, 'Protocol': 'SATA'}}]}}\n\
         SUSHY_EMULATOR_VOLUMES = {{('{SUSHY_SYSTEM_UUID}', '1'): []}}\n",
        a = 100 * GIB,
        b = 50 * GIB,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sushy_tools_inspection_fails_without_cpus_and_memory_then_succeeds_with_them() {
    let sushy = Sushy::start_with("admin", "password", &sushy_storage()).await;
    let api = api().await;
    let info = json!({
        "redfish_address": sushy.address,
        "redfish_system_id": sushy.system_path,
        "redfish_username": "admin",
        "redfish_password": "password",
    });

    // The fake driver reports no CPUs or memory: the inspection fails and says so.
    let bare = managed(&api, info.clone(), json!({})).await;
    let node = provision(&api, &bare, "inspect").await;
    assert_eq!(
        node["provision_state"],
        "inspect failed",
        "{node:#}\n{}",
        sushy.log()
    );
    let last_error = node["last_error"].as_str().unwrap();
    for needle in [
        format!("Redfish BMC {}", sushy.address),
        sushy.system_path.clone(),
        "the CPU count".to_owned(),
        "the CPU architecture".to_owned(),
        "the memory size".to_owned(),
        "inspect_interface=agent".to_owned(),
    ] {
        assert!(last_error.contains(&needle), "{needle:?} in: {last_error}");
    }
    assert!(
        port_macs(&api, &bare).await.is_empty(),
        "a failed inspection creates no port"
    );
    let inventory = api
        .send_latest(Method::GET, &format!("/v1/nodes/{bare}/inventory"), None)
        .await;
    assert_eq!(
        inventory.status,
        StatusCode::NOT_FOUND,
        "{}",
        inventory.body
    );

    // The operator sets what the BMC cannot tell; inspect again from `inspect failed`.
    let patched = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{bare}"),
            Some(json!([
                {"op": "add", "path": "/properties/cpus", "value": 2},
                {"op": "add", "path": "/properties/cpu_arch", "value": "x86_64"},
                {"op": "add", "path": "/properties/memory_mb", "value": 4096},
            ])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let node = provision(&api, &bare, "inspect").await;
    assert_eq!(
        node["provision_state"],
        "manageable",
        "{node:#}\n{}",
        sushy.log()
    );
    assert_eq!(node["last_error"], Value::Null);
    let properties = &node["properties"];
    assert_eq!(properties["cpus"], 2);
    assert_eq!(properties["memory_mb"], 4096);
    // The smallest drive of at least 4 GiB (50 GiB), minus one.
    assert_eq!(properties["local_gb"], 49, "{properties}");
    assert_eq!(properties["capabilities"], "boot_mode:uefi");
    // The emulator's one NIC, reported Enabled, became a port.
    assert_eq!(
        port_macs(&api, &bare).await,
        [("52:54:00:aa:bb:01".to_owned(), true)]
    );
    let stored = get(&api, &format!("/v1/nodes/{bare}/inventory")).await;
    let inventory = &stored["inventory"];
    let mut sizes: Vec<u64> = inventory["disks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|disk| disk["size"].as_u64().unwrap())
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [50 * GIB, 100 * GIB], "{inventory:#}");
    assert_eq!(inventory["system_vendor"]["manufacturer"], "Sushy Emulator");
    assert_eq!(
        inventory["interfaces"][0]["mac_address"],
        "52:54:00:aa:bb:01"
    );
    // The emulator's state is untouched: inspection only reads.
    assert_eq!(sushy.system().await["PowerState"], "Off");
}
