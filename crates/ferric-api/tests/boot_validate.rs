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
use tower::ServiceExt as _;

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
    available_node_with(
        api,
        address,
        boot_interface,
        mac,
        json!({"properties": properties}),
    )
    .await
}

/// As [`available_node`], with `fields` of the node's creation on top (`driver_info` entries
/// are added to the BMC's).
async fn available_node_with(
    api: &Api,
    address: &str,
    boot_interface: &str,
    mac: &str,
    fields: Value,
) -> String {
    let mut body = json!({
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
        "instance_info": {
            "image_source": "http://images.test/os.raw",
            "image_os_hash_algo": "sha256",
            "image_os_hash_value": "ab".repeat(32),
        },
    });
    for (key, value) in fields.as_object().unwrap() {
        match (key.as_str(), value) {
            ("driver_info", Value::Object(extra)) => {
                let info = body["driver_info"].as_object_mut().unwrap();
                info.extend(extra.clone());
            }
            _ => {
                body[key] = value.clone();
            }
        }
    }
    let created = api.send_latest(Method::POST, "/v1/nodes", Some(body)).await;
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

/// The lab's Redfish front-end for one UEFI fake machine, with every `VirtualMedia` link
/// taken out of its answers: a BMC without virtual media (no licence, old firmware).
async fn lab_bmc_without_virtual_media() -> (Arc<FakeMachine>, String) {
    let machine = Arc::new(
        FakeMachine::new(MachineInfo {
            name: "node-0".into(),
            uuid: "c0ffee00-0000-4000-8000-000000000024".into(),
            serial: "FERRIC-LAB-1".into(),
            mac: "52:54:00:fe:00:24".into(),
            memory_mib: 512,
            cpus: 1,
        })
        .with_firmware(Firmware::Uefi),
    );
    let lab = router(Arc::new(RedfishBmc::new(
        machine.clone(),
        "admin",
        "secret",
    )));
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let lab = lab.clone();
        async move {
            let response = lab.oneshot(request).await.unwrap();
            let (mut parts, body) = response.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            let bytes = match serde_json::from_slice::<Value>(&bytes) {
                Ok(Value::Object(mut object)) => {
                    object.remove("VirtualMedia");
                    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
                    serde_json::to_vec(&object).unwrap().into()
                }
                _ => bytes,
            };
            axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (machine, address)
}

/// Virtual media's bad input, refused at validate with the same reason the deploy gives,
/// before anything is powered: a DHCP-less node without `network_data`, an agent ramdisk
/// that is not on the boot file server (so no ISO can be built), a BMC without virtual media,
/// a boot mode that is neither uefi nor bios. The same machine with all of it right deploys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_refuses_virtual_media_it_cannot_build_or_insert() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("agent.kernel"), b"KERNEL").unwrap();
    std::fs::write(root.path().join("agent.ramdisk"), b"RAMDISK").unwrap();
    let api = api(root.path()).await;
    let (machine, bmc) = lab_bmc(Firmware::Uefi).await;
    let (bare_machine, bare_bmc) = lab_bmc_without_virtual_media().await;
    let vmedia = "redfish-virtual-media";

    let refused = |reason: Option<String>, status: StatusCode, fault: &str, uuid: &str| {
        let reason = reason.expect("validate must refuse");
        assert!(
            reason.contains(uuid) && reason.contains("redfish-virtual-media"),
            "{reason}"
        );
        assert_eq!(status, StatusCode::BAD_REQUEST, "{fault}");
        reason
    };

    // DHCP-less, and no network_data to give the agent static addresses with.
    let dhcp_less = available_node_with(
        &api,
        &bmc,
        vmedia,
        "52:54:00:fe:01:01",
        json!({"driver_info": {"dhcp_less": true}}),
    )
    .await;
    let (reason, status, fault) = validate_then_deploy(&api, &dhcp_less).await;
    let reason = refused(reason, status, &fault, &dhcp_less);
    assert!(
        reason.contains("network_data is empty") && reason.contains("set the node's network_data"),
        "{reason}"
    );
    assert!(fault.contains("network_data"), "{fault}");

    // The agent ramdisk the ISO is built around is not on the boot file server.
    let no_ramdisk = available_node_with(
        &api,
        &bmc,
        vmedia,
        "52:54:00:fe:01:02",
        json!({"driver_info": {"deploy_ramdisk": "missing.initramfs"}}),
    )
    .await;
    let (reason, status, fault) = validate_then_deploy(&api, &no_ramdisk).await;
    let reason = refused(reason, status, &fault, &no_ramdisk);
    assert!(
        reason.contains("missing.initramfs")
            && reason.contains("does not exist")
            && reason.contains("ferric ramdisk build"),
        "{reason}"
    );

    // A boot mode that is not one.
    let bad_mode = available_node(
        &api,
        &bmc,
        vmedia,
        json!({"capabilities": "boot_mode:efi"}),
        "52:54:00:fe:01:03",
    )
    .await;
    let (reason, status, fault) = validate_then_deploy(&api, &bad_mode).await;
    let reason = refused(reason, status, &fault, &bad_mode);
    assert!(
        reason.contains("boot mode 'efi'")
            && reason.contains("set boot_mode:uefi or boot_mode:bios"),
        "{reason}"
    );
    assert_eq!(
        machine.actions(),
        vec![],
        "a refused node's machine was powered"
    );

    // A BMC that has no virtual media at all.
    let no_media = available_node(&api, &bare_bmc, vmedia, json!({}), "52:54:00:fe:01:04").await;
    let (reason, status, fault) = validate_then_deploy(&api, &no_media).await;
    let reason = refused(reason, status, &fault, &no_media);
    assert!(reason.contains("has no virtual cdrom"), "{reason}");
    assert!(reason.contains("use a network boot interface"), "{reason}");
    assert_eq!(
        bare_machine.actions(),
        vec![],
        "a refused node's machine was powered"
    );

    // The same machine, asked for what it can do, deploys.
    let good = available_node(&api, &bmc, vmedia, json!({}), "52:54:00:fe:01:05").await;
    let (reason, status, fault) = validate_then_deploy(&api, &good).await;
    assert_eq!(reason, None);
    assert_eq!(status, StatusCode::ACCEPTED, "{fault}");
    api.settle().await;
}
