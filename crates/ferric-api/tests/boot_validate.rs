//! Validate refuses a boot the BMC cannot give before anything is powered (issue #23): through
//! the HTTP API, the real conductor and the `redfish` driver against the lab's virtual Redfish
//! BMC on loopback (fake machines, no QEMU). A BIOS-only machine lists neither `UEFI` among its
//! `BootSourceOverrideMode` allowable values nor `UefiHttp` among its targets, so a node asking
//! it for UEFI HTTP boot, or for the default UEFI mode, is refused by `GET …/validate` and by
//! the deploy with the same reason, naming the node, the boot interface and what to set; the
//! same node with `boot_mode:bios`, and a UEFI machine with `http`, deploy. The refused
//! machine never receives a power action.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BmcSettings, BootSettings, DriverSettings, Drivers};
use ferric_lab::machine::Firmware;
use ferric_lab::machine::MachineInfo;
use ferric_lab::machine::fake::FakeMachine;
use ferric_lab::redfish::{RedfishBmc, router};
use serde_json::{Value, json};

const SYSTEM: &str = "/redfish/v1/Systems/node-0";

/// The lab's Redfish front-end for one fake machine with `firmware`, on a loopback port.
async fn lab_bmc(firmware: Firmware) -> (Arc<FakeMachine>, String) {
    let machine = Arc::new(
        FakeMachine::new(MachineInfo {
            name: "node-0".into(),
            uuid: "c0ffee00-0000-4000-8000-000000000023".into(),
            serial: "FERRIC-LAB-0".into(),
            mac: "52:54:00:fe:00:23".into(),
            memory_mib: 512,
            cpus: 1,
        })
        .with_firmware(firmware),
    );
    let bmc = Arc::new(RedfishBmc::new(machine.clone(), "admin", "secret"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let app = router(bmc);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (machine, address)
}

async fn api(root: &Path) -> Api {
    let bmc = BmcSettings {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        retries: 1,
        retry_backoff: Duration::from_millis(50),
        power_state_poll_interval: Duration::from_millis(20),
        ..BmcSettings::default()
    };
    let drivers = Drivers::default()
        .with_bmc_settings(bmc)
        .with_settings(DriverSettings {
            boot: BootSettings {
                http_url: Some("http://10.9.0.1:8080".into()),
                http_root: root.to_owned(),
                api_url: Some("http://10.9.0.1:6385".into()),
                ..BootSettings::default()
            },
            ..DriverSettings::default()
        });
    Api::with_drivers(TestDb::sqlite().await, ConductorConfig::default(), drivers).await
}

/// A redfish node on the BMC at `address` with `boot_interface` and `properties`, with a PXE
/// port of `mac`, made available.
async fn available_node(
    api: &Api,
    address: &str,
    boot_interface: &str,
    properties: Value,
    mac: &str,
) -> String {
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({
                "driver": "redfish",
                "driver_info": {
                    "redfish_address": address,
                    "redfish_username": "admin",
                    "redfish_password": "secret",
                    "redfish_system_id": SYSTEM,
                },
                "boot_interface": boot_interface,
                "deploy_interface": "direct",
                "automated_clean": false,
                "properties": properties,
                "instance_info": {
                    "image_source": "http://images.test/os.raw",
                    "image_os_hash_algo": "sha256",
                    "image_os_hash_value": "ab".repeat(32),
                },
            })),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let port = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": mac, "pxe_enabled": true})),
        )
        .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    api.provision(&uuid, "manage").await;
    api.settle().await;
    api.provision(&uuid, "provide").await;
    api.settle().await;
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["provision_state"], "available", "{:#}", node.body);
    uuid
}

/// Validate's boot answer (`None`: valid), then the deploy's status and fault string.
async fn validate_then_deploy(api: &Api, uuid: &str) -> (Option<String>, StatusCode, String) {
    let validated = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/validate"), None)
        .await;
    assert_eq!(validated.status, StatusCode::OK, "{}", validated.body);
    let boot = &validated.body["boot"];
    let reason = (boot["result"] != true).then(|| boot["reason"].as_str().unwrap().to_owned());
    let deploy = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "active"})),
        )
        .await;
    let fault = if deploy.status == StatusCode::ACCEPTED {
        String::new()
    } else {
        faultstring(&deploy.body).to_owned()
    };
    (reason, deploy.status, fault)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_refuses_what_the_bmc_cannot_boot_before_powering_anything() {
    let root = tempfile::tempdir().unwrap();
    // The boot file server's copy of iPXE that UEFI HTTP boot fetches.
    std::fs::write(root.path().join("snponly.efi"), b"iPXE").unwrap();
    let api = api(root.path()).await;
    let (bios_machine, bios_bmc) = lab_bmc(Firmware::Bios).await;
    let (_uefi_machine, uefi_bmc) = lab_bmc(Firmware::Uefi).await;

    // UEFI HTTP boot on a machine without it.
    let http = available_node(&api, &bios_bmc, "http", json!({}), "52:54:00:fe:00:01").await;
    let (reason, status, fault) = validate_then_deploy(&api, &http).await;
    let reason = reason.expect("validate must refuse http on a BIOS-only BMC");
    assert!(
        reason.contains(&http)
            && reason.contains("Boot interface http")
            && reason.contains("cannot boot from UefiHttp")
            && reason.contains("set boot_interface pxe or ipxe"),
        "{reason}"
    );
    assert_eq!(status, StatusCode::BAD_REQUEST, "{fault}");
    assert!(fault.contains("cannot boot from UefiHttp"), "{fault}");

    // The default boot mode (UEFI) on a machine that boots Legacy only.
    let uefi = available_node(&api, &bios_bmc, "ipxe", json!({}), "52:54:00:fe:00:02").await;
    let (reason, status, fault) = validate_then_deploy(&api, &uefi).await;
    let reason = reason.expect("validate must refuse UEFI on a BIOS-only BMC");
    assert!(
        reason.contains(&uefi)
            && reason.contains("Boot interface ipxe")
            && reason.contains("allows boot mode Legacy only")
            && reason.contains("set boot_mode:bios"),
        "{reason}"
    );
    assert_eq!(status, StatusCode::BAD_REQUEST, "{fault}");
    assert!(fault.contains("set boot_mode:bios"), "{fault}");
    assert_eq!(
        bios_machine.actions(),
        vec![],
        "a refused node's machine was powered"
    );

    // The same machine asked for what it has, and a UEFI machine asked for HTTP boot.
    let bios = available_node(
        &api,
        &bios_bmc,
        "ipxe",
        json!({"capabilities": "boot_mode:bios"}),
        "52:54:00:fe:00:03",
    )
    .await;
    let (reason, status, fault) = validate_then_deploy(&api, &bios).await;
    assert_eq!(reason, None);
    assert_eq!(status, StatusCode::ACCEPTED, "{fault}");
    let uefi_http = available_node(&api, &uefi_bmc, "http", json!({}), "52:54:00:fe:00:04").await;
    let (reason, status, fault) = validate_then_deploy(&api, &uefi_http).await;
    assert_eq!(reason, None);
    assert_eq!(status, StatusCode::ACCEPTED, "{fault}");
    api.settle().await;
}
