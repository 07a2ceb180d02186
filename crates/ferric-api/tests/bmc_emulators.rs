//! The `redfish` and `ipmi` hardware types through the HTTP API and the real conductor,
//! against BMC emulators other people wrote: sushy-tools' Redfish emulator, OpenIPMI's
//! `ipmi_sim` and pyghmi's `fakebmc`, each started on 127.0.0.1 for the test. Every change the API makes is read
//! back from the emulator's side (sushy's own Redfish resource, ipmi_sim's chassis state and
//! `ipmitool` as an independent client). Tests step the conductor (`settle`); the only waits
//! are the drivers' own polls for a power state to show.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;
mod emulators;

use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Api, LATEST, NodeSpec};
use emulators::{FakeBmc, IpmiSim, NoCommonSuiteBmc, Sushy, closed_tcp_port, closed_udp_port};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BmcSettings, Drivers};
use serde_json::{Value, json};

/// Quick retries and polls: emulators on loopback answer at once or never.
async fn api() -> Api {
    let settings = BmcSettings {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        retries: 1,
        retry_backoff: Duration::from_millis(50),
        power_state_poll_interval: Duration::from_millis(250),
        ipmi_retransmit_interval: Duration::from_millis(500),
        ..BmcSettings::default()
    };
    Api::with_drivers(
        TestDb::sqlite().await,
        ConductorConfig::default(),
        common::with_fake_boot_and_deploy(Drivers::default().with_bmc_settings(settings)),
    )
    .await
}

async fn enroll(api: &Api, driver: &str, driver_info: Value) -> String {
    api.enroll_node(NodeSpec::driver(driver).driver_info(driver_info))
        .await
}

async fn node(api: &Api, uuid: &str) -> Value {
    let shown = api
        .send_at(LATEST, Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    shown.body
}

/// `manage`, then lets the conductor finish verifying.
async fn manage(api: &Api, uuid: &str) -> Value {
    let answer = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "manage"})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    api.settle().await;
    node(api, uuid).await
}

async fn power(api: &Api, uuid: &str, target: &str) -> Value {
    let answer = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/power"),
            Some(json!({ "target": target })),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    api.settle().await;
    let node = node(api, uuid).await;
    assert_eq!(node["last_error"], Value::Null, "{target}: {node:#}");
    node
}

async fn set_boot_device(api: &Api, uuid: &str, device: &str, persistent: bool) {
    let answer = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/management/boot_device"),
            Some(json!({"boot_device": device, "persistent": persistent})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{}", answer.body);
}

async fn boot_device(api: &Api, uuid: &str) -> Value {
    let answer = api
        .send_at(
            LATEST,
            Method::GET,
            &format!("/v1/nodes/{uuid}/management/boot_device"),
            None,
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body
}

/// A node whose verification must fail: back in `enroll`, `last_error` naming the BMC and
/// containing `problem`.
async fn expect_verification_failure(api: &Api, uuid: &str, bmc: &str, problem: &str) {
    let node = manage(api, uuid).await;
    assert_eq!(node["provision_state"], "enroll", "{node:#}");
    let last_error = node["last_error"].as_str().unwrap_or_default();
    assert!(
        last_error.contains(bmc),
        "names the BMC {bmc}: {last_error}"
    );
    assert!(
        last_error.contains(problem),
        "says {problem:?}: {last_error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redfish_against_sushy_tools() {
    let sushy = Sushy::start("admin", "password").await;
    let api = api().await;
    // No redfish_system_id: the driver finds the emulator's only system itself.
    let uuid = enroll(
        &api,
        "redfish",
        json!({
            "redfish_address": sushy.address,
            "redfish_username": "admin",
            "redfish_password": "password",
        }),
    )
    .await;
    let shown = node(&api, &uuid).await;
    assert_eq!(shown["power_interface"], "redfish");
    assert_eq!(shown["management_interface"], "redfish");

    let managed = manage(&api, &uuid).await;
    assert_eq!(
        managed["provision_state"],
        "manageable",
        "{managed:#}\n{}",
        sushy.log()
    );
    assert_eq!(managed["power_state"], "power off");

    let on = power(&api, &uuid, "power on").await;
    assert_eq!(on["power_state"], "power on");
    assert_eq!(sushy.system().await["PowerState"], "On");

    set_boot_device(&api, &uuid, "pxe", true).await;
    assert_eq!(
        sushy.system().await["Boot"]["BootSourceOverrideTarget"],
        "Pxe"
    );
    assert_eq!(boot_device(&api, &uuid).await["boot_device"], "pxe");
    set_boot_device(&api, &uuid, "disk", false).await;
    assert_eq!(
        sushy.system().await["Boot"]["BootSourceOverrideTarget"],
        "Hdd"
    );

    let off = power(&api, &uuid, "power off").await;
    assert_eq!(off["power_state"], "power off");
    assert_eq!(sushy.system().await["PowerState"], "Off");

    // Rebooting a machine that is off powers it on.
    let rebooted = power(&api, &uuid, "rebooting").await;
    assert_eq!(rebooted["power_state"], "power on");
    assert_eq!(sushy.system().await["PowerState"], "On");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redfish_wrong_password_and_unreachable_bmc_explain_themselves() {
    let sushy = Sushy::start("admin", "password").await;
    let api = api().await;
    let wrong = enroll(
        &api,
        "redfish",
        json!({
            "redfish_address": sushy.address,
            "redfish_system_id": sushy.system_path,
            "redfish_username": "admin",
            "redfish_password": "not-the-password",
        }),
    )
    .await;
    expect_verification_failure(
        &api,
        &wrong,
        &sushy.address,
        "authentication failed (HTTP 401) — check redfish_username/redfish_password",
    )
    .await;

    let address = format!("http://127.0.0.1:{}", closed_tcp_port());
    let unreachable = enroll(
        &api,
        "redfish",
        json!({"redfish_address": address, "redfish_username": "admin", "redfish_password": "x"}),
    )
    .await;
    expect_verification_failure(&api, &unreachable, &address, "cannot connect").await;

    // A node without the required address never reaches the BMC: validation says why.
    let missing = enroll(&api, "redfish", json!({})).await;
    expect_verification_failure(&api, &missing, "", "redfish_address").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipmi_against_openipmi_ipmi_sim() {
    let sim = IpmiSim::start("admin", "password").await;
    let api = api().await;
    let uuid = enroll(
        &api,
        "ipmi",
        json!({
            "ipmi_address": "127.0.0.1",
            "ipmi_port": sim.port,
            "ipmi_username": "admin",
            "ipmi_password": "password",
        }),
    )
    .await;
    let shown = node(&api, &uuid).await;
    assert_eq!(shown["power_interface"], "ipmitool");

    // No ipmi_cipher_suite: ipmi_sim lists suites 0-14 (SHA1 only, no 17), so 3 is picked.
    let managed = manage(&api, &uuid).await;
    assert_eq!(managed["provision_state"], "manageable", "{managed:#}");
    assert_eq!(managed["power_state"], "power off");

    let on = power(&api, &uuid, "power on").await;
    assert_eq!(on["power_state"], "power on");
    assert_eq!(sim.power(), "1");
    let status = sim
        .ipmitool_as("admin", "password", &["chassis", "power", "status"])
        .unwrap();
    assert!(status.contains("Chassis Power is on"), "{status}");

    set_boot_device(&api, &uuid, "pxe", true).await;
    assert_eq!(sim.boot(), "pxe");
    assert_eq!(boot_device(&api, &uuid).await["boot_device"], "pxe");
    set_boot_device(&api, &uuid, "bios", false).await;
    assert_eq!(sim.boot(), "bios");
    let flags = sim
        .ipmitool_as("admin", "password", &["chassis", "bootparam", "get", "5"])
        .unwrap();
    assert!(flags.contains("Force Boot into BIOS Setup"), "{flags}");
    set_boot_device(&api, &uuid, "disk", true).await;
    assert_eq!(sim.boot(), "default");

    let off = power(&api, &uuid, "power off").await;
    assert_eq!(off["power_state"], "power off");
    assert_eq!(sim.power(), "0");
    let status = sim
        .ipmitool_as("admin", "password", &["chassis", "power", "status"])
        .unwrap();
    assert!(status.contains("Chassis Power is off"), "{status}");

    let rebooted = power(&api, &uuid, "rebooting").await;
    assert_eq!(rebooted["power_state"], "power on");
    assert_eq!(sim.power(), "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipmi_picks_suite_3_on_pyghmi_fakebmc_without_ipmi_cipher_suite() {
    let bmc = FakeBmc::start("admin", "password").await;
    let api = api().await;
    let endpoint = format!("127.0.0.1:{}", bmc.port);
    // fakebmc accepts an Open Session proposing 17 and answers in suite 3's algorithms, so
    // only asking which suites it lists finds the one that works.
    let uuid = enroll(
        &api,
        "ipmi",
        json!({"ipmi_address": "127.0.0.1", "ipmi_port": bmc.port,
               "ipmi_username": "admin", "ipmi_password": "password"}),
    )
    .await;
    let managed = manage(&api, &uuid).await;
    assert_eq!(managed["provision_state"], "manageable", "{managed:#}");
    assert_eq!(managed["power_state"], "power off");

    let on = power(&api, &uuid, "power on").await;
    assert_eq!(on["power_state"], "power on");
    assert!(bmc.log().contains("powered on"), "{}", bmc.log());
    let status = bmc
        .ipmitool_as("admin", "password", &["chassis", "power", "status"])
        .unwrap();
    assert!(status.contains("Chassis Power is on"), "{status}");
    let off = power(&api, &uuid, "power off").await;
    assert_eq!(off["power_state"], "power off");

    // Suite 17 named explicitly: the BMC's answer in other algorithms is said plainly.
    let suite17 = enroll(
        &api,
        "ipmi",
        json!({"ipmi_address": "127.0.0.1", "ipmi_port": bmc.port,
               "ipmi_username": "admin", "ipmi_password": "password", "ipmi_cipher_suite": 17}),
    )
    .await;
    expect_verification_failure(
        &api,
        &suite17,
        &endpoint,
        "cipher suite 17: the BMC answered with other algorithms (authentication 1, integrity 1",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipmi_bmc_listing_no_usable_cipher_suite_names_them_and_the_setting() {
    let bmc = NoCommonSuiteBmc::start().await;
    let api = api().await;
    let uuid = enroll(
        &api,
        "ipmi",
        json!({"ipmi_address": "127.0.0.1", "ipmi_port": bmc.port,
               "ipmi_username": "admin", "ipmi_password": "password"}),
    )
    .await;
    let endpoint = format!("127.0.0.1:{}", bmc.port);
    expect_verification_failure(&api, &uuid, &endpoint, "the BMC offers 1, 2").await;
    expect_verification_failure(&api, &uuid, &endpoint, "driver_info/ipmi_cipher_suite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipmi_wrong_password_unreachable_bmc_and_refused_suite_explain_themselves() {
    let sim = IpmiSim::start("admin", "password").await;
    let api = api().await;
    let endpoint = format!("127.0.0.1:{}", sim.port);
    let wrong = enroll(
        &api,
        "ipmi",
        json!({
            "ipmi_address": "127.0.0.1", "ipmi_port": sim.port,
            "ipmi_username": "admin", "ipmi_password": "not-the-password",
            "ipmi_cipher_suite": 3,
        }),
    )
    .await;
    expect_verification_failure(
        &api,
        &wrong,
        &endpoint,
        "authentication failed (the BMC's RAKP 2 code does not match the password) — check \
         ipmi_username/ipmi_password",
    )
    .await;

    let unknown_user = enroll(
        &api,
        "ipmi",
        json!({"ipmi_address": "127.0.0.1", "ipmi_port": sim.port,
               "ipmi_username": "nobody", "ipmi_password": "password"}),
    )
    .await;
    expect_verification_failure(&api, &unknown_user, &endpoint, "authentication failed").await;

    // Suite 17 asked for explicitly, and ipmi_sim only speaks SHA1: the BMC's refusal is shown.
    let suite17 = enroll(
        &api,
        "ipmi",
        json!({"ipmi_address": "127.0.0.1", "ipmi_port": sim.port,
               "ipmi_username": "admin", "ipmi_password": "password", "ipmi_cipher_suite": "17"}),
    )
    .await;
    expect_verification_failure(
        &api,
        &suite17,
        &endpoint,
        "cipher suite 17: Open Session refused: invalid authentication algorithm",
    )
    .await;

    let closed = format!("127.0.0.1:{}", closed_udp_port());
    let unreachable = enroll(
        &api,
        "ipmi",
        json!({"ipmi_address": "127.0.0.1", "ipmi_port": closed.rsplit(':').next().unwrap(),
               "ipmi_username": "admin", "ipmi_password": "password"}),
    )
    .await;
    expect_verification_failure(&api, &unreachable, &closed, "no answer after").await;
}

/// A redfish node with the `redfish` BIOS and firmware interfaces and no network boot, managed.
async fn managed_for_steps(api: &Api, sushy: &Sushy) -> String {
    let created = api
        .send_at(
            LATEST,
            Method::POST,
            "/v1/nodes",
            Some(json!({
                "driver": "redfish",
                "driver_info": {
                    "redfish_address": sushy.address,
                    "redfish_username": "admin",
                    "redfish_password": "password",
                },
                "boot_interface": "fake",
                "deploy_interface": "fake",
                "bios_interface": "redfish",
                "firmware_interface": "redfish",
            })),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let managed = manage(api, &uuid).await;
    assert_eq!(
        managed["provision_state"], "manageable",
        "a BMC without a BIOS resource is still manageable: {managed:#}"
    );
    uuid
}

async fn manual_clean(api: &Api, uuid: &str, step: Value) -> Value {
    let answer = api
        .send_at(
            LATEST,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "clean", "clean_steps": [step]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    api.settle().await;
    node(api, uuid).await
}

/// What sushy-tools' fake driver has of issue 14: a Manager with a `FirmwareVersion` (cached
/// as the `bmc` component) and an UpdateService whose SimpleUpdate needs a BIOS version the
/// fake driver does not keep (500); no BIOS resource. The positive BIOS and firmware flows run
/// against the lab's virtual BMC (`bios_firmware.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redfish_bios_and_firmware_against_sushy_tools() {
    let sushy = Sushy::start("admin", "password").await;
    let api = api().await;
    let uuid = managed_for_steps(&api, &sushy).await;

    let bios = api
        .send_at(LATEST, Method::GET, &format!("/v1/nodes/{uuid}/bios"), None)
        .await;
    assert_eq!(bios.body, json!({"bios": []}));
    let firmware = api
        .send_at(
            LATEST,
            Method::GET,
            &format!("/v1/nodes/{uuid}/firmware"),
            None,
        )
        .await;
    let components = firmware.body["firmware"].as_array().unwrap();
    assert_eq!(components.len(), 1, "{}", firmware.body);
    assert_eq!(components[0]["component"], "bmc");
    assert_eq!(components[0]["current_version"], "1.00");
    assert_eq!(components[0]["initial_version"], "1.00");

    let failed = manual_clean(
        &api,
        &uuid,
        json!({"interface": "bios", "step": "apply_configuration", "args": {
            "settings": [{"name": "ProcVirtualization", "value": "Disabled"}]}}),
    )
    .await;
    assert_eq!(failed["provision_state"], "clean failed", "{failed:#}");
    let last_error = failed["last_error"].as_str().unwrap();
    assert!(
        last_error.contains("has no Bios resource") && last_error.contains("no-bios"),
        "{last_error}"
    );

    let other = managed_for_steps(&api, &sushy).await;
    let failed = manual_clean(
        &api,
        &other,
        json!({"interface": "firmware", "step": "update", "args": {
            "settings": [{"component": "bios", "url": "http://images.example/bios.bin"}]}}),
    )
    .await;
    assert_eq!(failed["provision_state"], "clean failed", "{failed:#}");
    let last_error = failed["last_error"].as_str().unwrap();
    assert!(
        last_error.contains("firmware component bios") && last_error.contains("HTTP 500"),
        "{last_error}\n{}",
        sushy.log()
    );
}

/// `POST/GET/DELETE /v1/nodes/{node}/vmedia` through the `redfish` driver against
/// sushy-tools' VirtualMedia (under the system, as its Manager also links it): the emulator
/// fetches the image from a loopback web server, shows it inserted, and ejects it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_media_against_sushy_tools() {
    let sushy = Sushy::start("admin", "password").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let images = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/live.iso",
        axum::routing::get(|| async { vec![0x42_u8; 4096] }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    let api = api().await;
    let uuid = enroll(
        &api,
        "redfish",
        json!({
            "redfish_address": sushy.address,
            "redfish_username": "admin",
            "redfish_password": "password",
        }),
    )
    .await;
    let path = format!("/v1/nodes/{uuid}/vmedia");
    let url = format!("http://{images}/live.iso");
    // Older clients do not see the endpoint; bad bodies are refused before the BMC is asked.
    let old = api.send_at(88, Method::POST, &path, Some(json!({}))).await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
    for bad in [
        json!({"device_type": "tape", "image_url": url}),
        json!({"device_type": "cdrom", "image_url": "/srv/live.iso"}),
        json!({"device_type": "cdrom", "image_url": url, "image_download_source": "swift"}),
    ] {
        let refused = api.send_at(LATEST, Method::POST, &path, Some(bad)).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    }
    let attached = api
        .send_at(
            LATEST,
            Method::POST,
            &path,
            Some(json!({"device_type": "cdrom", "image_url": url})),
        )
        .await;
    assert_eq!(
        attached.status,
        StatusCode::NO_CONTENT,
        "{}\n{}",
        attached.body,
        sushy.log()
    );
    let listed = api.send_at(LATEST, Method::GET, &path, None).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    let cd = listed.body["vmedia"]
        .as_array()
        .unwrap()
        .iter()
        .find(|slot| slot["device_type"] == "cdrom")
        .cloned()
        .unwrap();
    assert_eq!(cd["inserted"], true, "{}", listed.body);
    assert_eq!(cd["image_url"], url.as_str());
    let location = cd["location"].as_str().unwrap().to_owned();
    assert!(location.starts_with(&sushy.system_path), "{location}");
    let detached = api
        .send_at(
            LATEST,
            Method::DELETE,
            &format!("{path}?device_types=cdrom"),
            None,
        )
        .await;
    assert_eq!(detached.status, StatusCode::NO_CONTENT, "{}", detached.body);
    let seen: Value = reqwest::Client::new()
        .get(format!("{}{location}", sushy.address))
        .basic_auth("admin", Some("password"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(seen["Inserted"], false, "{seen}");
}
