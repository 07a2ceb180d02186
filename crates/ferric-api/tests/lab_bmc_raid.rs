//! Out-of-band RAID (issue 27) through the HTTP API, the real conductor and the `redfish`
//! raid interface, against the lab's virtual Redfish BMC served on loopback in this process
//! (over the fake machine: no QEMU): the BMC's Volumes collection builds a RAID-1 at the reset
//! the driver does, Ferric records `raid_config` and the volume's WWN as the root device hint,
//! and the machine is given that disk; `delete_configuration` takes it away again. The same
//! BMC behind QEMU, deployed onto, is `crates/ferric/tests/lab_raid.rs`.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Api, LATEST};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BmcSettings, Drivers};
use ferric_lab::machine::fake::FakeMachine;
use ferric_lab::machine::{MachineInfo, PowerAction};
use ferric_lab::redfish::{RedfishBmc, router};
use serde_json::{Value, json};

const SYSTEM: &str = "/redfish/v1/Systems/node-0";

async fn node(api: &Api, uuid: &str) -> Value {
    let shown = api
        .send_at(LATEST, Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    shown.body
}

async fn clean(api: &Api, uuid: &str, steps: Value) -> Value {
    let answer = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "clean", "clean_steps": steps})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    api.settle().await;
    node(api, uuid).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redfish_raid_interface_builds_a_mirror_on_the_lab_bmc() {
    let machine = Arc::new(FakeMachine::new(MachineInfo {
        name: "node-0".into(),
        uuid: "c0ffee00-0000-4000-8000-000000000002".into(),
        serial: "FERRIC-LAB-0".into(),
        mac: "52:54:00:fe:00:02".into(),
        memory_mib: 512,
        cpus: 1,
    }));
    let bmc = Arc::new(RedfishBmc::new(machine.clone(), "admin", "secret"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let app = router(bmc);
    tokio::spawn(async move { axum::serve(listener, app).await });

    let settings = BmcSettings {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        retries: 1,
        retry_backoff: Duration::from_millis(50),
        power_state_poll_interval: Duration::from_millis(20),
        ..BmcSettings::default()
    };
    let api = Api::with_drivers(
        TestDb::sqlite().await,
        ConductorConfig::default(),
        common::with_fake_boot_and_deploy(Drivers::default().with_bmc_settings(settings)),
    )
    .await;
    let created = api
        .send_at(
            LATEST,
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
                "boot_interface": "fake",
                "deploy_interface": "fake",
                "raid_interface": "redfish",
            })),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    api.provision(&uuid, "manage").await;
    api.settle().await;
    assert_eq!(node(&api, &uuid).await["provision_state"], "manageable");

    let target = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/raid"),
            Some(json!({"logical_disks": [
                {"size_gb": "MAX", "raid_level": "1", "is_root_volume": true},
            ]})),
        )
        .await;
    assert_eq!(target.status, StatusCode::NO_CONTENT, "{}", target.body);

    let built = clean(
        &api,
        &uuid,
        json!([{"interface": "raid", "step": "create_configuration"}]),
    )
    .await;
    assert_eq!(built["provision_state"], "manageable", "{built:#}");
    assert_eq!(built["last_error"], Value::Null);
    // The BMC built the volume at the reboot the driver asked for, and the machine has it.
    let disks = machine.volumes();
    assert_eq!(disks.len(), 1, "{disks:?}");
    let wwn = format!("0x{:016x}", disks[0].wwn);
    let disk = &built["raid_config"]["logical_disks"][0];
    assert_eq!(disk["raid_level"], "1");
    assert_eq!(disk["size_gb"], 2);
    assert_eq!(disk["root_device_hint"], json!({"wwn": wwn}));
    assert_eq!(
        disk["volume"],
        format!("{SYSTEM}/Storage/RAID.Integrated.1/Volumes/1")
    );
    assert_eq!(built["properties"]["root_device"], json!({"wwn": wwn}));
    let actions = machine.actions();
    assert!(
        actions.contains(&PowerAction::On) && actions.ends_with(&[PowerAction::ForceOff]),
        "rebooted (from off: powered on) and left off as it was: {actions:?}"
    );
    assert_eq!(built["power_state"], "power off", "left as it was");

    let deleted = clean(
        &api,
        &uuid,
        json!([{"interface": "raid", "step": "delete_configuration"}]),
    )
    .await;
    assert_eq!(deleted["provision_state"], "manageable", "{deleted:#}");
    assert_eq!(deleted["raid_config"], json!({}));
    assert_eq!(deleted["properties"]["root_device"], Value::Null);
    assert!(machine.volumes().is_empty());
}
