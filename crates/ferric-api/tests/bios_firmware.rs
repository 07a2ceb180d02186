//! BIOS settings and firmware updates as steps (issue 14), through the HTTP API, the real
//! conductor and the `redfish` driver, against the lab's virtual Redfish BMC served on
//! loopback in this process (over the fake machine: no QEMU). sushy-tools' fake driver has no
//! BIOS resource and cannot change a version, so the positive paths are shown here; what it
//! does have is checked in `bmc_emulators.rs`.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BmcSettings, Drivers};
use ferric_lab::machine::fake::FakeMachine;
use ferric_lab::machine::{MachineInfo, PowerAction};
use ferric_lab::redfish::{RedfishBmc, router};
use serde_json::{Value, json};

const SYSTEM: &str = "/redfish/v1/Systems/node-0";

struct Lab {
    bmc: Arc<RedfishBmc<FakeMachine>>,
    machine: Arc<FakeMachine>,
    address: String,
}

/// The lab's Redfish front-end for one fake machine, on a loopback port.
async fn lab_bmc() -> Lab {
    let machine = Arc::new(FakeMachine::new(MachineInfo {
        name: "node-0".into(),
        uuid: "c0ffee00-0000-4000-8000-000000000001".into(),
        serial: "FERRIC-LAB-0".into(),
        mac: "52:54:00:fe:00:01".into(),
        memory_mib: 512,
        cpus: 1,
    }));
    let bmc = Arc::new(RedfishBmc::new(machine.clone(), "admin", "secret"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let app = router(bmc.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    Lab {
        bmc,
        machine,
        address,
    }
}

async fn api() -> Api {
    let settings = BmcSettings {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        retries: 1,
        retry_backoff: Duration::from_millis(50),
        power_state_poll_interval: Duration::from_millis(20),
        ..BmcSettings::default()
    };
    Api::with_drivers(
        TestDb::sqlite().await,
        ConductorConfig::default(),
        common::with_fake_boot_and_deploy(Drivers::default().with_bmc_settings(settings)),
    )
    .await
}

async fn node(api: &Api, uuid: &str) -> Value {
    let shown = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    shown.body
}

async fn steps(api: &Api, uuid: &str, target: &str, key: &str, steps: Value) -> Value {
    let answer = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": target, key: steps})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    api.settle().await;
    node(api, uuid).await
}

async fn bios_setting(api: &Api, uuid: &str, name: &str) -> Value {
    let answer = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/bios/{name}"), None)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body[name].clone()
}

async fn bios_list(api: &Api, uuid: &str, query: &str) -> Value {
    let answer = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/bios{query}"), None)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body
}

async fn firmware(api: &Api, uuid: &str) -> Vec<Value> {
    let answer = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/firmware"), None)
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body["firmware"].as_array().unwrap().clone()
}

fn component<'a>(components: &'a [Value], name: &str) -> &'a Value {
    components
        .iter()
        .find(|component| component["component"] == name)
        .unwrap_or_else(|| panic!("no component {name} in {components:?}"))
}

/// A redfish node on the lab BMC, managed; BIOS through Redfish (the type's default) and
/// firmware through Redfish (asked for), no network boot.
async fn managed_node(api: &Api, lab: &Lab) -> String {
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({
                "driver": "redfish",
                "driver_info": {
                    "redfish_address": lab.address,
                    "redfish_username": "admin",
                    "redfish_password": "secret",
                    "redfish_system_id": SYSTEM,
                },
                "boot_interface": "fake",
                "deploy_interface": "fake",
            })),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let patched = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "replace", "path": "/firmware_interface", "value": "redfish"}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["bios_interface"], "redfish");
    api.provision(&uuid, "manage").await;
    api.settle().await;
    let managed = node(api, &uuid).await;
    assert_eq!(managed["provision_state"], "manageable", "{managed:#}");
    uuid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bios_settings_through_a_manual_clean_step_on_the_lab_bmc() {
    let lab = lab_bmc().await;
    let api = api().await;
    let uuid = managed_node(&api, &lab).await;

    // `manage` cached the settings with the registry's description (1.74 fields).
    let listed = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/bios"), None)
        .await;
    let names: Vec<&str> = listed.body["bios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|setting| setting["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "BootMode",
            "ProcHyperThreading",
            "ProcVirtualization",
            "SystemSerialNumber"
        ]
    );
    let virtualization = bios_setting(&api, &uuid, "ProcVirtualization").await;
    assert_eq!(virtualization["value"], "Enabled");
    assert_eq!(
        virtualization["allowable_values"],
        json!(["Enabled", "Disabled"])
    );
    assert_eq!(virtualization["attribute_type"], "Enumeration");
    assert_eq!(virtualization["read_only"], false);
    assert_eq!(virtualization["reset_required"], true);
    let serial = bios_setting(&api, &uuid, "SystemSerialNumber").await;
    assert_eq!(serial["value"], "FERRIC-LAB-0");
    assert_eq!(serial["read_only"], true);
    let old = api
        .send_at(
            74,
            Method::GET,
            &format!("/v1/nodes/{uuid}/bios/BootMode"),
            None,
        )
        .await;
    assert_eq!(
        old.body["BootMode"]["allowable_values"],
        json!(["Uefi", "Bios"])
    );

    // Apply one: pending until the reboot the driver does, then verified and re-read.
    let apply = json!([{"interface": "bios", "step": "apply_configuration", "args": {
        "settings": [{"name": "ProcVirtualization", "value": "Disabled"}]}}]);
    let cleaned = steps(&api, &uuid, "clean", "clean_steps", apply).await;
    assert_eq!(cleaned["provision_state"], "manageable", "{cleaned:#}");
    assert_eq!(cleaned["last_error"], Value::Null);
    assert_eq!(lab.bmc.bios_attributes()["ProcVirtualization"], "Disabled");
    let actions = lab.machine.actions();
    assert!(
        actions.contains(&PowerAction::On) && actions.ends_with(&[PowerAction::ForceOff]),
        "rebooted (from off: powered on) and left off as it was: {actions:?}"
    );
    assert_eq!(cleaned["power_state"], "power off");
    let applied = bios_setting(&api, &uuid, "ProcVirtualization").await;
    assert_eq!(applied["value"], "Disabled");

    // Factory defaults.
    let reset = json!([{"interface": "bios", "step": "factory_reset"}]);
    let cleaned = steps(&api, &uuid, "clean", "clean_steps", reset).await;
    assert_eq!(cleaned["provision_state"], "manageable", "{cleaned:#}");
    let restored = bios_setting(&api, &uuid, "ProcVirtualization").await;
    assert_eq!(restored["value"], "Enabled");

    // A name the BIOS does not have is refused before anything is written.
    let writes_before = lab.machine.actions().len();
    let unknown = json!([{"interface": "bios", "step": "apply_configuration", "args": {
        "settings": [{"name": "ProcVirtualization", "value": "Disabled"},
                     {"name": "TurboBoost", "value": "On"}]}}]);
    let failed = steps(&api, &uuid, "clean", "clean_steps", unknown).await;
    assert_eq!(failed["provision_state"], "clean failed", "{failed:#}");
    let last_error = failed["last_error"].as_str().unwrap();
    assert!(
        last_error.contains("bios.apply_configuration")
            && last_error.contains("Unknown BIOS setting 'TurboBoost'"),
        "{last_error}"
    );
    assert_eq!(lab.bmc.bios_attributes()["ProcVirtualization"], "Enabled");
    assert_eq!(lab.machine.actions().len(), writes_before, "no reboot");
}

/// Waits (generously) until the node shows `step` as its current deploy step.
async fn until_deploy_step(api: &Api, uuid: &str, interface: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let shown = node(api, uuid).await;
        if shown["provision_state"] == "deploying" && shown["deploy_step"]["interface"] == interface
        {
            return shown;
        }
        assert!(
            Instant::now() < deadline,
            "never reached {interface}: {shown:#}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firmware_update_through_simple_update_cannot_be_aborted_on_the_lab_bmc() {
    let lab = lab_bmc().await;
    let api = api().await;
    let uuid = managed_node(&api, &lab).await;

    let before = firmware(&api, &uuid).await;
    let bios = component(&before, "bios");
    assert_eq!(bios["current_version"], "1.0.0");
    assert_eq!(bios["initial_version"], "1.0.0");
    assert_eq!(bios["last_version_flashed"], Value::Null);
    let bmc_version = component(&before, "bmc")["current_version"].clone();
    let old = api
        .send_at(85, Method::GET, &format!("/v1/nodes/{uuid}/firmware"), None)
        .await;
    assert_eq!(old.status, StatusCode::NOT_FOUND, "added in 1.86");

    api.provision(&uuid, "provide").await;
    api.settle().await;
    assert_eq!(node(&api, &uuid).await["provision_state"], "available");

    // Hold the BMC's task so the node is seen mid-update. The image is served on loopback:
    // its checksum is checked before the BMC is asked.
    lab.bmc.hold_tasks(true);
    let (url, checksum) = image_server(b"BIOS 1.1 image").await;
    let update = json!([{"interface": "firmware", "step": "update", "priority": 150, "args": {
        "settings": [{"component": "bios", "url": url, "checksum": checksum}]}}]);
    let started = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "active", "deploy_steps": update})),
        )
        .await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.body);
    let updating = until_deploy_step(&api, &uuid, "firmware").await;
    assert_eq!(updating["deploy_step"]["step"], "update");

    let refused = api
        .send_latest(Method::DELETE, &format!("/v1/nodes/{uuid}/provision"), None)
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        faultstring(&refused.body).contains("firmware.update")
            && faultstring(&refused.body).contains("cannot be interrupted"),
        "{}",
        refused.body
    );

    lab.bmc.hold_tasks(false);
    api.settle().await;
    let deployed = node(&api, &uuid).await;
    assert_eq!(deployed["provision_state"], "active", "{deployed:#}");
    assert_eq!(deployed["last_error"], Value::Null);

    let after = firmware(&api, &uuid).await;
    let bios = component(&after, "bios");
    assert_eq!(bios["initial_version"], "1.0.0");
    assert_eq!(bios["current_version"], "1.1.0");
    assert_eq!(bios["last_version_flashed"], "1.1.0");
    assert!(bios["updated_at"].is_string());
    assert_eq!(component(&after, "bmc")["current_version"], bmc_version);
    assert_eq!(
        component(&after, "bmc")["last_version_flashed"],
        Value::Null
    );
    // 1.114 adds vendor, model and serial_number (not read from any BMC yet: null).
    for (minor, shown) in [(113, false), (114, true)] {
        let answer = api
            .send_at(
                minor,
                Method::GET,
                &format!("/v1/nodes/{uuid}/firmware"),
                None,
            )
            .await;
        let bmc = component(answer.body["firmware"].as_array().unwrap(), "bmc");
        for field in ["vendor", "model", "serial_number"] {
            assert_eq!(bmc.get(field).is_some(), shown, "1.{minor} {field}: {bmc}");
            assert!(bmc.get(field).is_none_or(Value::is_null), "{bmc}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_flash_names_the_component_in_last_error() {
    let lab = lab_bmc().await;
    let api = api().await;
    let uuid = managed_node(&api, &lab).await;
    let update = json!([{"interface": "firmware", "step": "update", "args": {
        "settings": [{"component": "bmc", "url": "ftp://images.example/bmc.bin"}]}}]);
    let failed = steps(&api, &uuid, "clean", "clean_steps", update).await;
    assert_eq!(failed["provision_state"], "clean failed", "{failed:#}");
    let last_error = failed["last_error"].as_str().unwrap();
    assert!(
        last_error.contains("firmware component bmc") && last_error.contains("only http and https"),
        "{last_error}"
    );
    let history = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/history"), None)
        .await;
    assert!(
        history.body.to_string().contains("firmware component bmc"),
        "{}",
        history.body
    );
}

/// Serves `image` on loopback; its URL and SHA-256.
async fn image_server(image: &'static [u8]) -> (String, String) {
    use sha2::Digest;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/firmware.bin", listener.local_addr().unwrap());
    let app = axum::Router::new().route(
        "/firmware.bin",
        axum::routing::get(move || async move { image }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let digest = sha2::Sha256::digest(image);
    (
        url,
        digest.iter().map(|byte| format!("{byte:02x}")).collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_that_does_not_match_its_checksum_is_not_flashed() {
    let lab = lab_bmc().await;
    let api = api().await;
    let uuid = managed_node(&api, &lab).await;
    let before = firmware(&api, &uuid).await;
    let (url, _) = image_server(b"a tampered image").await;
    let wrong = "0".repeat(64);
    let update = json!([{"interface": "firmware", "step": "update", "args": {
        "settings": [{"component": "bmc", "url": url, "checksum": wrong}]}}]);
    let failed = steps(&api, &uuid, "clean", "clean_steps", update).await;
    assert_eq!(failed["provision_state"], "clean failed", "{failed:#}");
    let last_error = failed["last_error"].as_str().unwrap();
    assert!(
        last_error.contains("firmware component bmc")
            && last_error.contains("does not match its checksum")
            && last_error.contains("nothing was flashed"),
        "{last_error}"
    );
    let after = firmware(&api, &uuid).await;
    assert_eq!(
        component(&after, "bmc")["current_version"],
        component(&before, "bmc")["current_version"]
    );

    // A checksum Ferric cannot check fails the step before anything is downloaded.
    api.provision(&uuid, "manage").await;
    api.settle().await;
    let unknown = json!([{"interface": "firmware", "step": "update", "args": {
        "settings": [{"component": "bmc", "url": "http://x/bmc.bin", "checksum": "md5:abc"}]}}]);
    let failed = steps(&api, &uuid, "clean", "clean_steps", unknown).await;
    assert_eq!(failed["provision_state"], "clean failed", "{failed:#}");
    assert!(
        failed["last_error"].as_str().unwrap().contains("SHA-256"),
        "{failed:#}"
    );
}

/// The fake BIOS and firmware answer as Ironic's do, which Metal3's manual cleaning relies
/// on (tests/clients/README.md, the BMO replay): no settings and no components at first, any
/// setting name taken and then listed, a factory reset empties the list again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_driver_answers_bios_and_firmware_as_ironics_fake() {
    let api = api().await;
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware"})),
        )
        .await;
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    api.provision(&uuid, "manage").await;
    api.settle().await;
    let managed = node(&api, &uuid).await;
    assert_eq!(managed["provision_state"], "manageable", "{managed:#}");
    assert_eq!(bios_list(&api, &uuid, "").await, json!({"bios": []}));
    assert_eq!(
        bios_list(&api, &uuid, "?detail=True").await,
        json!({"bios": []})
    );
    assert_eq!(firmware(&api, &uuid).await, Vec::<Value>::new());

    // BMO's manual cleaning (pkg/provisioner/ironic/ironic.go:964): settings the fake never
    // heard of, a number as a value, and a firmware update, in one go.
    let both = json!([
        {"interface": "bios", "step": "apply_configuration", "args": {
            "settings": [{"name": "ProcTurboMode", "value": "Disabled"},
                         {"name": "NumCores", "value": 8}]}},
        {"interface": "firmware", "step": "update", "args": {
            "settings": [{"component": "bios", "url": "http://images.example/bios.bin"}]}},
    ]);
    let cleaned = steps(&api, &uuid, "clean", "clean_steps", both).await;
    assert_eq!(cleaned["provision_state"], "manageable", "{cleaned:#}");
    assert_eq!(cleaned["last_error"], Value::Null);
    assert_eq!(
        bios_setting(&api, &uuid, "ProcTurboMode").await["value"],
        "Disabled"
    );
    assert_eq!(bios_setting(&api, &uuid, "NumCores").await["value"], "8");
    assert_eq!(firmware(&api, &uuid).await, Vec::<Value>::new());

    let reset = json!([{"interface": "bios", "step": "factory_reset"}]);
    let cleaned = steps(&api, &uuid, "clean", "clean_steps", reset).await;
    assert_eq!(cleaned["provision_state"], "manageable", "{cleaned:#}");
    assert_eq!(bios_list(&api, &uuid, "").await, json!({"bios": []}));
}

/// `disable_ramdisk`: an out-of-band step runs without booting the agent (no `clean wait`),
/// and a step that needs the agent is refused before anything starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_band_steps_run_without_the_ramdisk_when_asked() {
    let api = api().await;
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "deploy_interface": "direct"})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    api.provision(&uuid, "manage").await;
    api.settle().await;

    let in_band = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(
                json!({"target": "clean", "disable_ramdisk": true, "clean_steps": [
                {"interface": "deploy", "step": "erase_devices_metadata"}]}),
            ),
        )
        .await;
    assert_eq!(in_band.status, StatusCode::BAD_REQUEST, "{}", in_band.body);
    assert!(
        faultstring(&in_band.body).contains("runs in the agent ramdisk"),
        "{}",
        in_band.body
    );

    let bios = json!([{"interface": "bios", "step": "apply_configuration", "args": {
        "settings": [{"name": "ProcVirtualization", "value": "Disabled"}]}}]);
    let started = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "clean", "disable_ramdisk": true, "clean_steps": bios})),
        )
        .await;
    assert_eq!(started.status, StatusCode::ACCEPTED, "{}", started.body);
    api.settle().await;
    let cleaned = node(&api, &uuid).await;
    assert_eq!(cleaned["provision_state"], "manageable", "{cleaned:#}");
    assert_eq!(
        bios_setting(&api, &uuid, "ProcVirtualization").await["value"],
        "Disabled"
    );
    assert!(
        cleaned["driver_internal_info"]
            .get("clean_disable_ramdisk")
            .is_none(),
        "{cleaned:#}"
    );

    // Without it, the same step waits for the agent ramdisk to boot first.
    let waits = steps(&api, &uuid, "clean", "clean_steps", bios).await;
    assert_eq!(waits["provision_state"], "clean wait", "{waits:#}");
}
