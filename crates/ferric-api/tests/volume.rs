//! Volume connectors and targets (1.32), boot mode and secure boot (1.76) and NMI (1.29)
//! through the real router, on a real SQLite file and on PostgreSQL, with the fake-hardware
//! conductor behind the hand-off.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use common::{Api, NodeSpec, faultstring};
use ferric_model::resources::{Ident, PowerState};
use serde_json::{Value, json};

macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::Api::new().await).await;
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::Api::postgres().await).await;
                }
            )+
        }
    };
}

on_both_backends!(
    connectors_crud_uniqueness_and_node_state,
    targets_crud_boot_index_and_listing,
    boot_mode_secure_boot_and_nmi,
    a_write_right_after_a_power_change_sees_its_result,
    indicators_list_read_and_set,
);

async fn power(api: &Api, uuid: &str, target: &str) {
    let answer = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/power"),
            Some(json!({"target": target})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
    api.settle().await;
}

/// Enrolls at the newest version: the node starts in `enroll`.
async fn enroll(api: &Api, body: Value) -> String {
    api.enroll_node(NodeSpec::body(body)).await
}

async fn node(api: &Api, uuid: &str) -> Value {
    api.send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await
        .body
}

async fn connectors_crud_uniqueness_and_node_state(api: Api) {
    let uuid = enroll(&api, json!({"driver": "fake-hardware", "name": "n1"})).await;
    power(&api, &uuid, "power off").await;

    // Below 1.32 the endpoints do not exist.
    let old = api
        .send_at(31, Method::GET, "/v1/volume/connectors", None)
        .await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
    let root = api.send_latest(Method::GET, "/v1/volume", None).await;
    assert_eq!(root.status, StatusCode::OK, "{}", root.body);
    assert_eq!(
        root.body["connectors"][0]["href"],
        "http://ferric.test/v1/volume/connectors"
    );

    let body = json!({"node_uuid": uuid, "type": "iqn", "connector_id": "iqn.2024-01.org.example:n1",
        "extra": {"rack": 4}});
    let created = api
        .send_latest(Method::POST, "/v1/volume/connectors", Some(body.clone()))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let connector = created.body["uuid"].as_str().unwrap().to_owned();
    let path = format!("/v1/volume/connectors/{connector}");
    assert_eq!(
        created.headers["location"],
        format!("http://ferric.test{path}")
    );
    assert_eq!(created.body["node_uuid"], uuid);
    assert_eq!(created.body["extra"], json!({"rack": 4}));

    // Same (type, connector_id): 409 with Ironic's words.
    let other = enroll(&api, json!({"driver": "fake-hardware"})).await;
    let mut clash = body.clone();
    clash["node_uuid"] = json!(other);
    let duplicate = api
        .send_latest(Method::POST, "/v1/volume/connectors", Some(clash))
        .await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT);
    assert_eq!(
        faultstring(&duplicate.body),
        "A volume connector with type iqn and connector ID iqn.2024-01.org.example:n1 already \
         exists."
    );

    // Validation: the type, a missing field, a node that does not exist.
    let bad_type = api
        .send_latest(
            Method::POST,
            "/v1/volume/connectors",
            Some(json!({"node_uuid": uuid, "type": "nfs", "connector_id": "x"})),
        )
        .await;
    assert_eq!(bad_type.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&bad_type.body).contains("Value should be one of: iqn, ip, mac, wwnn, wwpn"),
        "{}",
        bad_type.body
    );
    let missing = api
        .send_latest(
            Method::POST,
            "/v1/volume/connectors",
            Some(json!({"node_uuid": uuid, "type": "ip"})),
        )
        .await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&missing.body),
        "Mandatory field missing: 'connector_id'."
    );
    let no_node = api
        .send_latest(
            Method::POST,
            "/v1/volume/connectors",
            Some(
                json!({"node_uuid": "8e1a8d7c-2c7b-4a43-9a4f-0d6f3c2b1a10", "type": "ip",
                "connector_id": "10.0.0.9"}),
            ),
        )
        .await;
    assert_eq!(no_node.status, StatusCode::BAD_REQUEST, "{}", no_node.body);
    assert!(faultstring(&no_node.body).contains("node_uuid"));

    // Listing: default fields, the node filter by name, the node's own path, detail.
    let listed = api
        .send_latest(Method::GET, "/v1/volume/connectors?node=n1", None)
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    let items = listed.body["connectors"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    let mut keys: Vec<&str> = items[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["connector_id", "links", "node_uuid", "type", "uuid"]);
    let detail = api
        .send_latest(
            Method::GET,
            &format!("/v1/nodes/{uuid}/volume/connectors?detail=true"),
            None,
        )
        .await;
    assert_eq!(detail.body["connectors"][0]["extra"], json!({"rack": 4}));
    let both = api
        .send_latest(
            Method::GET,
            "/v1/volume/connectors?detail=true&fields=uuid",
            None,
        )
        .await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST);
    let unknown = api
        .send_latest(Method::GET, "/v1/volume/connectors?shard=x", None)
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);

    // PATCH while powered off; refused (400) once the node is on, as Ironic's conductor does.
    let patched = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/connector_id", "value": "iqn.2024-01.org.example:n1b"}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["connector_id"], "iqn.2024-01.org.example:n1b");
    let read_only = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/created_at", "value": "x"}])),
        )
        .await;
    assert_eq!(read_only.status, StatusCode::BAD_REQUEST);

    power(&api, &uuid, "power on").await;
    let refused = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([{"op": "add", "path": "/extra/a", "value": 1}])),
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&refused.body).starts_with(&format!(
            "The requested action \"volume connector update\" can not be performed on node \
             \"{uuid}\" while it is in state \"power on\"."
        )),
        "{}",
        refused.body
    );
    // enroll is a state a node may be deleted in: deleting the connector is allowed.
    let deleted = api.send_latest(Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    let gone = api.send_latest(Method::GET, &path, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&gone.body),
        format!("Volume connector {connector} could not be found.")
    );
}

async fn targets_crud_boot_index_and_listing(api: Api) {
    let uuid = enroll(&api, json!({"driver": "fake-hardware"})).await;
    api.provision(&uuid, "manage").await;
    api.settle().await;
    power(&api, &uuid, "power off").await;
    let create = |boot_index: i64, volume_id: &str| {
        json!({"node_uuid": uuid, "volume_type": "iscsi", "boot_index": boot_index,
            "volume_id": volume_id, "properties": {"target_iqn": "iqn.t", "auth_password": "s3cret"}})
    };
    let first = api
        .send_latest(Method::POST, "/v1/volume/targets", Some(create(0, "vol-0")))
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert_eq!(
        first.body["properties"],
        json!({"target_iqn": "iqn.t", "auth_password": "******"})
    );
    let target = first.body["uuid"].as_str().unwrap().to_owned();
    let taken = api
        .send_latest(Method::POST, "/v1/volume/targets", Some(create(0, "vol-1")))
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT);
    assert_eq!(
        faultstring(&taken.body),
        "A volume target with boot index '0' for the same node already exists."
    );
    let mut text_index = create(1, "vol-1");
    text_index["boot_index"] = json!("one");
    let text_index = api
        .send_latest(Method::POST, "/v1/volume/targets", Some(text_index))
        .await;
    assert_eq!(text_index.status, StatusCode::BAD_REQUEST);
    for index in 1..=3 {
        let created = api
            .send_latest(
                Method::POST,
                "/v1/volume/targets",
                Some(create(index, &format!("vol-{index}"))),
            )
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    }

    // Paging with the next link, sorted by boot_index descending.
    let page = api
        .send_latest(
            Method::GET,
            "/v1/volume/targets?limit=2&sort_key=boot_index&sort_dir=desc",
            None,
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let indexes: Vec<i64> = page.body["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|target| target["boot_index"].as_i64().unwrap())
        .collect();
    assert_eq!(indexes, [3, 2]);
    let next = page.body["next"].as_str().unwrap();
    assert!(
        next.starts_with("http://ferric.test/v1/volume/targets?"),
        "{next}"
    );
    let unsortable = api
        .send_latest(Method::GET, "/v1/volume/targets?sort_key=properties", None)
        .await;
    assert_eq!(unsortable.status, StatusCode::BAD_REQUEST);
    let node_root = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}/volume"), None)
        .await;
    assert_eq!(
        node_root.body["targets"][0]["href"],
        format!("http://ferric.test/v1/nodes/{uuid}/volume/targets")
    );
    let of_node = api
        .send_latest(
            Method::GET,
            &format!("/v1/nodes/{uuid}/volume/targets"),
            None,
        )
        .await;
    assert_eq!(of_node.body["targets"].as_array().unwrap().len(), 4);

    // Patch onto a taken boot index: 409; a free one: 200.
    let path = format!("/v1/volume/targets/{target}");
    let onto = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/boot_index", "value": 2}])),
        )
        .await;
    assert_eq!(onto.status, StatusCode::CONFLICT);
    let moved = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/boot_index", "value": 9}])),
        )
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);
    assert_eq!(moved.body["boot_index"], 9);

    // A powered-on node that may not be deleted (active) refuses deletion.
    power(&api, &uuid, "power on").await;
    api.provision(&uuid, "provide").await;
    api.settle().await;
    api.provision(&uuid, "active").await;
    api.settle().await;
    assert_eq!(node(&api, &uuid).await["provision_state"], "active");
    power(&api, &uuid, "power on").await;
    let refused = api.send_latest(Method::DELETE, &path, None).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(faultstring(&refused.body).contains("\"volume target deletion\""));
    power(&api, &uuid, "power off").await;
    let deleted = api.send_latest(Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
}

async fn boot_mode_secure_boot_and_nmi(api: Api) {
    let uuid = enroll(&api, json!({"driver": "fake-hardware"})).await;
    let path = |tail: &str| format!("/v1/nodes/{uuid}/{tail}");

    let old = api
        .send_at(
            75,
            Method::PUT,
            &path("states/boot_mode"),
            Some(json!({"target": "bios"})),
        )
        .await;
    assert_eq!(old.status, StatusCode::NOT_FOUND);
    let bad = api
        .send_latest(
            Method::PUT,
            &path("states/boot_mode"),
            Some(json!({"target": "efi"})),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&bad.body),
        "Invalid boot mode efi requested for node. Allowed boot modes are: bios, uefi"
    );
    let set = api
        .send_latest(
            Method::PUT,
            &path("states/boot_mode"),
            Some(json!({"target": "bios"})),
        )
        .await;
    assert_eq!(set.status, StatusCode::ACCEPTED, "{}", set.body);
    assert_eq!(
        set.headers["location"],
        format!("http://ferric.test/v1/nodes/{uuid}/states")
    );
    api.settle().await;
    let states = api.send_latest(Method::GET, &path("states"), None).await;
    assert_eq!(states.body["boot_mode"], "bios");

    // The fake firmware wants UEFI for secure boot: the driver's refusal is a 400.
    let secure = api
        .send_latest(
            Method::PUT,
            &path("states/secure_boot"),
            Some(json!({"target": true})),
        )
        .await;
    assert_eq!(secure.status, StatusCode::BAD_REQUEST, "{}", secure.body);
    assert!(faultstring(&secure.body).contains("uefi"));
    api.send_latest(
        Method::PUT,
        &path("states/boot_mode"),
        Some(json!({"target": "uefi"})),
    )
    .await;
    let secure = api
        .send_latest(
            Method::PUT,
            &path("states/secure_boot"),
            Some(json!({"target": "true"})),
        )
        .await;
    assert_eq!(secure.status, StatusCode::ACCEPTED, "{}", secure.body);
    let bad_secure = api
        .send_latest(
            Method::PUT,
            &path("states/secure_boot"),
            Some(json!({"target": null})),
        )
        .await;
    assert_eq!(bad_secure.status, StatusCode::BAD_REQUEST);
    let shown = node(&api, &uuid).await;
    assert_eq!(
        (shown["boot_mode"].clone(), shown["secure_boot"].clone()),
        (json!("uefi"), json!(true))
    );

    // NMI: 204 on fake-hardware; 404 below 1.29; a driver failure is the driver's message.
    let nmi = api
        .send_latest(Method::PUT, &path("management/inject_nmi"), Some(json!({})))
        .await;
    assert_eq!(nmi.status, StatusCode::NO_CONTENT, "{}", nmi.body);
    let nmi_old = api
        .send_at(
            28,
            Method::PUT,
            &path("management/inject_nmi"),
            Some(json!({})),
        )
        .await;
    assert_eq!(nmi_old.status, StatusCode::NOT_FOUND);
    let nmi_extra = api
        .send_latest(
            Method::PUT,
            &path("management/inject_nmi"),
            Some(json!({"x": 1})),
        )
        .await;
    assert_eq!(nmi_extra.status, StatusCode::BAD_REQUEST);

    // manual-management has no boot mode or NMI: 400 naming the driver.
    let manual = enroll(&api, json!({"driver": "manual-management"})).await;
    let unsupported = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{manual}/management/inject_nmi"),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        unsupported.status,
        StatusCode::BAD_REQUEST,
        "{}",
        unsupported.body
    );
    assert!(faultstring(&unsupported.body).contains("does not support management"));
}

/// Tempest's volume tests, unretried: `PUT …/states/power` answers 202, and the very next
/// request PATCHes a connector and a target of the node, which Ironic allows only on a node
/// powered off. Whatever the conductor's worker has done by then (still holding the node, or
/// done and gone), the PATCH waits for the node and sees the power state it left.
async fn a_write_right_after_a_power_change_sees_its_result(api: Api) {
    let uuid = enroll(&api, json!({"driver": "fake-hardware"})).await;
    assert!(node(&api, &uuid).await["power_state"].is_null());
    let connector = api
        .send_latest(
            Method::POST,
            "/v1/volume/connectors",
            Some(json!({"node_uuid": uuid, "type": "iqn", "connector_id": "iqn.race"})),
        )
        .await;
    assert_eq!(connector.status, StatusCode::CREATED, "{}", connector.body);
    let target = api
        .send_latest(
            Method::POST,
            "/v1/volume/targets",
            Some(
                json!({"node_uuid": uuid, "volume_type": "iscsi", "boot_index": 0,
                "volume_id": "vol-race"}),
            ),
        )
        .await;
    assert_eq!(target.status, StatusCode::CREATED, "{}", target.body);
    let paths = [
        format!(
            "/v1/volume/connectors/{}",
            connector.body["uuid"].as_str().unwrap()
        ),
        format!(
            "/v1/volume/targets/{}",
            target.body["uuid"].as_str().unwrap()
        ),
    ];
    for (round, path) in paths.iter().enumerate() {
        let accepted = api
            .send_latest(
                Method::PUT,
                &format!("/v1/nodes/{uuid}/states/power"),
                Some(json!({"target": if round == 0 { "power off" } else { "power on" }})),
            )
            .await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
        if round == 1 {
            // On, the PATCH is refused with the power state the conductor left.
            let refused = api
                .send_latest(
                    Method::PATCH,
                    path,
                    Some(json!([{"op": "add", "path": "/extra/round", "value": round}])),
                )
                .await;
            assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
            assert!(
                faultstring(&refused.body).contains("state \"power on\""),
                "{}",
                refused.body
            );
            continue;
        }
        let patched = api
            .send_latest(
                Method::PATCH,
                path,
                Some(json!([{"op": "add", "path": "/extra/round", "value": round}])),
            )
            .await;
        assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
        assert_eq!(patched.body["extra"]["round"], round);
    }
    api.settle().await;
}

/// The order that makes the above hold, step by step: a conductor holds the node (power state
/// still null) when the PATCH arrives; the PATCH is polled once — on SQLite every statement
/// runs on the caller's thread, so whatever the handler reads before it waits is read now —
/// and can only be waiting (the node is held). Then the conductor writes the node powered off
/// and gives it back; the PATCH, resumed, must judge the node as it is now (200), not as it was
/// when the request came (400, "Power the node off first").
#[tokio::test]
async fn a_volume_patch_reads_the_node_once_the_conductor_gave_it_back() {
    let api = Api::new().await;
    let uuid = enroll(&api, json!({"driver": "fake-hardware"})).await;
    let created = api
        .send_latest(
            Method::POST,
            "/v1/volume/connectors",
            Some(json!({"node_uuid": uuid, "type": "iqn", "connector_id": "iqn.held"})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let path = format!(
        "/v1/volume/connectors/{}",
        created.body["uuid"].as_str().unwrap()
    );
    let node_uuid = uuid.parse().unwrap();
    let store = api.store();
    store
        .node_lease_acquire(node_uuid, "conductor-held", Duration::from_secs(600))
        .await
        .unwrap();

    let mut patch = std::pin::pin!(api.send_latest(
        Method::PATCH,
        &path,
        Some(json!([{"op": "add", "path": "/extra/held", "value": true}])),
    ));
    let first = std::future::poll_fn(|cx| Poll::Ready(patch.as_mut().poll(cx))).await;
    assert!(first.is_pending(), "the PATCH went through a held node");

    let mut record = store.node_get(&Ident::Uuid(node_uuid)).await.unwrap();
    let version = record.version;
    record.power_state = Some(PowerState::Off);
    store.node_update(&record, version).await.unwrap();
    store
        .node_lease_release(node_uuid, "conductor-held")
        .await
        .unwrap();

    let answer = patch.await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["extra"]["held"], true);
}

/// Indicators (1.63) on fake hardware, which has Ironic's fake indicators: the chassis'
/// read-only `led-0` and the system's `led`, both `on` until set; the state set is remembered.
/// Served at every version, as Ironic 39 does.
async fn indicators_list_read_and_set(api: Api) {
    let uuid = enroll(&api, json!({"driver": "fake-hardware", "name": "lit"})).await;
    let base = "/v1/nodes/lit/management/indicators";
    let listed = api.send_latest(Method::GET, base, None).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(
        listed.body["indicators"][1],
        json!({
            "name": "led@system",
            "component": "system",
            "readonly": false,
            "states": ["blinking", "off", "on"],
            "links": [
                {"href": "http://ferric.test/v1/nodes/lit/management/indicators/led@system",
                    "rel": "self"},
                {"href": "http://ferric.test/nodes/lit/management/indicators/led@system",
                    "rel": "bookmark"},
            ],
        })
    );
    assert_eq!(listed.body["indicators"][0]["name"], "led-0@chassis");
    assert_eq!(listed.body["indicators"][0]["readonly"], true);

    let led = format!("/v1/nodes/{uuid}/management/indicators/led@system");
    let shown = api.send(Method::GET, &led, None).await;
    assert_eq!(shown.status, StatusCode::OK, "at 1.1: {}", shown.body);
    assert_eq!(shown.body, json!({"state": "on"}));
    let set = api
        .send_latest(Method::PUT, &led, Some(json!({"state": "blinking"})))
        .await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{}", set.body);
    let shown = api.send_latest(Method::GET, &led, None).await;
    assert_eq!(shown.body, json!({"state": "blinking"}));
    // Upper case, as ironic-tempest-plugin's client sends it, reads the same.
    let set = api
        .send_latest(Method::PUT, &led, Some(json!({"state": "OFF"})))
        .await;
    assert_eq!(set.status, StatusCode::NO_CONTENT, "{}", set.body);
    assert_eq!(
        api.send_latest(Method::GET, &led, None).await.body,
        json!({"state": "off"})
    );

    // Refusals: 400 each, with what is wrong.
    let cases = [
        ("led-0@chassis", json!({"state": "off"}), "read-only"),
        (
            "led@system",
            json!({"state": "purple"}),
            "Invalid indicator state",
        ),
        ("led@system", json!({}), "state"),
        ("led@disk", json!({"state": "on"}), "Invalid component disk"),
        (
            "led-9@system",
            json!({"state": "on"}),
            "Invalid indicator led-9",
        ),
        ("led", json!({"state": "on"}), "Malformed indicator name"),
    ];
    for (indicator, body, words) in cases {
        let refused = api
            .send_latest(
                Method::PUT,
                &format!("/v1/nodes/{uuid}/management/indicators/{indicator}"),
                Some(body.clone()),
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{indicator} {body}"
        );
        assert!(
            faultstring(&refused.body).contains(words),
            "{indicator} {body}: {}",
            refused.body
        );
    }
    let missing = api
        .send_latest(
            Method::GET,
            "/v1/nodes/nope/management/indicators/led@system",
            None,
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}
