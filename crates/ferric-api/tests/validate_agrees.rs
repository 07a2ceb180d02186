//! `GET /v1/nodes/{node}/validate` and the deploy it vouches for can never disagree (issue
//! #27): for nodes valid and invalid in the ways operators meet — an `ipxe` node with its
//! PXE port (which validate once refused because it built the interfaces without the ports),
//! without one, with only a port that may not netboot, with an unsupported image checksum — validate's
//! power, deploy and boot answers are all true exactly when `active` is accepted, and when it
//! is refused the refusal is the reason validate gave.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::Path;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BootSettings, DriverSettings, Drivers};
use serde_json::{Value, json};

async fn api(root: &Path) -> Api {
    let drivers =
        common::with_fake_boot_and_deploy(Drivers::default().with_settings(DriverSettings {
            boot: BootSettings {
                http_url: Some("http://10.9.0.1:8080".into()),
                http_root: root.to_owned(),
                api_url: Some("http://10.9.0.1:6385".into()),
                ..BootSettings::default()
            },
            ..DriverSettings::default()
        }));
    Api::with_drivers(TestDb::sqlite().await, ConductorConfig::default(), drivers).await
}

/// One way a node can be set up: its create body and its ports (MAC, `pxe_enabled`).
struct Case {
    name: &'static str,
    node: Value,
    ports: &'static [(&'static str, bool)],
    /// Whether a deploy should start (what the case is about; validate must say the same).
    deployable: bool,
}

fn image(algorithm: &str) -> Value {
    json!({
        "image_source": "http://images.test/os.raw",
        "image_os_hash_algo": algorithm,
        "image_os_hash_value": "ab".repeat(32),
    })
}

fn cases() -> Vec<Case> {
    let good = "sha256";
    let ipxe = |algorithm: &str| {
        json!({
            "driver": "fake-hardware",
            "boot_interface": "ipxe",
            "deploy_interface": "direct",
            "automated_clean": false,
            "instance_info": image(algorithm),
        })
    };
    vec![
        Case {
            name: "ipxe with a PXE port",
            node: ipxe(good),
            ports: &[("52:54:00:ee:00:01", true)],
            deployable: true,
        },
        Case {
            name: "ipxe with a second, non-PXE port",
            node: ipxe(good),
            ports: &[("52:54:00:ee:00:02", false), ("52:54:00:ee:00:03", true)],
            deployable: true,
        },
        Case {
            name: "ipxe without ports",
            node: ipxe(good),
            ports: &[],
            deployable: false,
        },
        Case {
            name: "ipxe with only a non-PXE port",
            node: ipxe(good),
            ports: &[("52:54:00:ee:00:04", false)],
            deployable: false,
        },
        Case {
            name: "ipxe with an unsupported checksum algorithm",
            node: ipxe("crc32"),
            ports: &[("52:54:00:ee:00:05", true)],
            deployable: false,
        },
        Case {
            name: "fake boot and deploy",
            node: json!({
                "driver": "fake-hardware",
                "boot_interface": "fake",
                "deploy_interface": "fake",
                "automated_clean": false,
            }),
            ports: &[],
            deployable: true,
        },
    ]
}

async fn available_node(api: &Api, case: &Case) -> String {
    let created = api
        .send_latest(Method::POST, "/v1/nodes", Some(case.node.clone()))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    for (mac, pxe) in case.ports {
        let port = api
            .send_latest(
                Method::POST,
                "/v1/ports",
                Some(json!({"node_uuid": uuid, "address": mac, "pxe_enabled": pxe})),
            )
            .await;
        assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    }
    api.provision(&uuid, "manage").await;
    api.settle().await;
    api.provision(&uuid, "provide").await;
    api.settle().await;
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["provision_state"], "available", "{}", case.name);
    uuid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_says_yes_exactly_when_a_deploy_starts_and_no_with_its_reason() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path()).await;
    for case in cases() {
        let uuid = available_node(&api, &case).await;
        let validated = api
            .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/validate"), None)
            .await;
        assert_eq!(validated.status, StatusCode::OK, "{}", validated.body);
        let reasons: Vec<String> = ["power", "deploy", "boot"]
            .iter()
            .filter(|kind| validated.body[**kind]["result"] != true)
            .map(|kind| {
                validated.body[*kind]["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        let deploy = api
            .send_latest(
                Method::PUT,
                &format!("/v1/nodes/{uuid}/states/provision"),
                Some(json!({"target": "active"})),
            )
            .await;
        api.settle().await;
        assert_eq!(
            reasons.is_empty(),
            case.deployable,
            "{}: validate said {:#}",
            case.name,
            validated.body
        );
        if case.deployable {
            assert_eq!(
                deploy.status,
                StatusCode::ACCEPTED,
                "{}: {}",
                case.name,
                deploy.body
            );
        } else {
            assert_eq!(
                deploy.status,
                StatusCode::BAD_REQUEST,
                "{}: {}",
                case.name,
                deploy.body
            );
            let refusal = faultstring(&deploy.body);
            assert!(
                reasons
                    .iter()
                    .any(|reason| refusal.contains(reason.as_str())),
                "{}: the deploy was refused with {refusal:?}, validate said {reasons:?}",
                case.name
            );
        }
    }
}
