//! The site's enabled interfaces at the API (issue 21): a BMC hardware type cannot use a fake
//! interface unless the site enables it, the driver listing shows what the site allows, and a
//! node whose interface was disabled later can still be edited and fixed.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use ferric_api::ApiState;
use ferric_conductor::{Conductor, ConductorConfig};
use ferric_db::testing::TestDb;
use ferric_drivers::Drivers;
use serde_json::json;

#[tokio::test]
async fn a_redfish_node_cannot_use_fake_deploy_or_boot_by_default() {
    let api = Api::new().await;
    for interface in ["deploy_interface", "boot_interface"] {
        let refused = api
            .send_at(
                31,
                Method::POST,
                "/v1/nodes",
                Some(json!({"driver": "redfish", interface: "fake"})),
            )
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{interface}");
        let kind = interface.trim_end_matches("_interface");
        assert_eq!(
            faultstring(&refused.body),
            format!(
                "Could not find the following interface in the \
                 'ironic.hardware.interfaces.{kind}' entrypoint: fake. Valid interfaces are \
                 [{}]. Add it to the enabled_{kind}_interfaces setting to use it.",
                if kind == "deploy" {
                    "'direct', 'ramdisk', 'custom-agent', 'autodetect'"
                } else {
                    "'ipxe', 'pxe', 'http', 'http-ipxe', 'redfish-virtual-media', 'redfish-https'"
                }
            )
        );
    }
    // Nor can it switch to one later.
    let uuid = api.enroll(json!({"driver": "ipmi"})).await;
    let patched = api
        .send_at(
            31,
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "replace", "path": "/deploy_interface", "value": "fake"}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::BAD_REQUEST);
    let node = api
        .send_at(31, Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["deploy_interface"], "direct");
    assert_eq!(node.body["boot_interface"], "ipxe");

    let drivers = api
        .send_at(30, Method::GET, "/v1/drivers?detail=true", None)
        .await;
    let by_name = |name: &str| {
        drivers.body["drivers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|driver| driver["name"] == name)
            .unwrap()
            .clone()
    };
    let redfish = by_name("redfish");
    assert_eq!(
        redfish["enabled_deploy_interfaces"],
        json!(["direct", "ramdisk", "custom-agent", "autodetect"])
    );
    assert_eq!(
        redfish["enabled_boot_interfaces"],
        json!([
            "ipxe",
            "pxe",
            "http",
            "http-ipxe",
            "redfish-virtual-media",
            "redfish-https"
        ])
    );
    let fake = by_name("fake-hardware");
    assert_eq!(fake["default_deploy_interface"], "fake");
    assert_eq!(
        fake["enabled_deploy_interfaces"],
        json!(["fake", "direct", "ramdisk", "custom-agent", "autodetect"])
    );
}

#[tokio::test]
async fn enabled_fakes_are_usable_and_a_node_left_behind_can_be_fixed() {
    let mut api = Api::with_drivers(
        TestDb::sqlite().await,
        ConductorConfig::default(),
        common::with_fake_boot_and_deploy(Drivers::default()),
    )
    .await;
    let created = api
        .send_at(
            31,
            Method::POST,
            "/v1/nodes",
            Some(
                json!({"driver": "redfish", "deploy_interface": "fake", "boot_interface": "fake"}),
            ),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();

    // The site switches the fakes off again (a restart with the built-in settings).
    let conductor = Conductor::new(
        api.store().clone(),
        Drivers::default(),
        ConductorConfig {
            hostname: "restarted".to_owned(),
            periodic: false,
            ..ConductorConfig::default()
        },
    );
    api.state = ApiState::new(api.store().clone(), conductor);
    let path = format!("/v1/nodes/{uuid}");
    let edited = api
        .send_at(
            31,
            Method::PATCH,
            &path,
            Some(json!([{"op": "add", "path": "/extra/rack", "value": "r1"}])),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.body);
    let half_fixed = api
        .send_at(
            31,
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/deploy_interface", "value": "direct"}])),
        )
        .await;
    assert_eq!(half_fixed.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&half_fixed.body).contains("entrypoint: fake"),
        "{}",
        half_fixed.body
    );
    let fixed = api
        .send_at(
            31,
            Method::PATCH,
            &path,
            Some(json!([
                {"op": "replace", "path": "/deploy_interface", "value": "direct"},
                {"op": "remove", "path": "/boot_interface"},
            ])),
        )
        .await;
    assert_eq!(fixed.status, StatusCode::OK, "{}", fixed.body);
    assert_eq!(fixed.body["deploy_interface"], "direct");
    assert_eq!(fixed.body["boot_interface"], "ipxe");
}
