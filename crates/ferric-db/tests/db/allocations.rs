//! Allocations (create, lookup, filters, guarded update, delete, unique node), BIOS settings
//! (replace-all semantics) and node inventories (upsert), and that deleting a node takes all
//! three with it.

use chrono::Utc;
use ferric_db::{AllocationFilter, Error, Kind, Page, Store};
use ferric_model::resources::{Allocation, AllocationState, BiosSetting, Ident, JsonObject};
use serde_json::json;
use uuid::Uuid;

use crate::harness::backend_tests;
use crate::nodes::enrolled;

backend_tests!(
    allocation_lifecycle,
    a_node_serves_one_allocation,
    bios_settings_are_replaced_as_a_whole,
    inventory_is_upserted_and_goes_with_the_node,
    firmware_components_keep_their_first_and_flashed_versions,
);

fn object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

async fn allocation_lifecycle(store: Store) {
    let mut allocation = Allocation::new(Uuid::new_v4());
    allocation.name = Some("a1".to_owned());
    allocation.resource_class = Some("baremetal".to_owned());
    allocation.traits = vec!["CUSTOM_GPU".to_owned()];
    allocation.extra = object(json!({"team": "ml"}));
    let created = store.allocation_create(&allocation).await.unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(created.state, AllocationState::Allocating);
    assert_eq!(created.traits, ["CUSTOM_GPU"]);

    let by_name = store
        .allocation_get(&Ident::Name("a1".to_owned()))
        .await
        .unwrap();
    assert_eq!(by_name.uuid, allocation.uuid);

    let duplicate = store
        .allocation_create(&Allocation {
            uuid: Uuid::new_v4(),
            ..allocation.clone()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            duplicate,
            Error::Duplicate {
                kind: Kind::Allocation,
                field: "name",
                ..
            }
        ),
        "{duplicate:?}"
    );

    let node = store.node_create(&enrolled("n1")).await.unwrap();
    let mut active = created.clone();
    active.state = AllocationState::Active;
    active.node_uuid = Some(node.uuid);
    let saved = store
        .allocation_update(&active, created.version)
        .await
        .unwrap();
    assert_eq!(saved.node_uuid, Some(node.uuid));
    let stale = store
        .allocation_update(&active, created.version)
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::StaleRevision { .. }), "{stale:?}");

    let filter = AllocationFilter {
        state: Some(AllocationState::Active),
        ..AllocationFilter::default()
    };
    let listed = store
        .allocation_list(&filter, &Page::first(10))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let none = AllocationFilter {
        state: Some(AllocationState::Error),
        ..AllocationFilter::default()
    };
    assert!(
        store
            .allocation_list(&none, &Page::first(10))
            .await
            .unwrap()
            .is_empty()
    );

    store.allocation_delete(allocation.uuid).await.unwrap();
    assert!(matches!(
        store.allocation_delete(allocation.uuid).await,
        Err(Error::NotFound { .. })
    ));
}

async fn a_node_serves_one_allocation(store: Store) {
    let node = store.node_create(&enrolled("n1")).await.unwrap();
    let mut first = Allocation::new(Uuid::new_v4());
    first.node_uuid = Some(node.uuid);
    store.allocation_create(&first).await.unwrap();
    let mut second = Allocation::new(Uuid::new_v4());
    second.node_uuid = Some(node.uuid);
    let taken = store.allocation_create(&second).await.unwrap_err();
    assert!(
        matches!(
            taken,
            Error::Duplicate {
                field: "node_uuid",
                ..
            }
        ),
        "{taken:?}"
    );
    // Deleting the node deletes its allocation, as Ironic's node destroy does.
    store.node_delete(node.uuid).await.unwrap();
    assert!(matches!(
        store.allocation_get(&Ident::Uuid(first.uuid)).await,
        Err(Error::NotFound { .. })
    ));
}

fn setting(name: &str, value: &str) -> BiosSetting {
    BiosSetting {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        registry: object(json!({"attribute_type": "Enumeration"})),
        created_at: Utc::now(),
        updated_at: None,
    }
}

async fn bios_settings_are_replaced_as_a_whole(store: Store) {
    let node = store.node_create(&enrolled("n1")).await.unwrap().uuid;
    assert!(store.node_bios_list(node).await.unwrap().is_empty());
    store
        .node_bios_set(
            node,
            &[setting("BootMode", "Uefi"), setting("HyperThreading", "On")],
            None,
        )
        .await
        .unwrap();
    store
        .node_bios_set(
            node,
            &[setting("BootMode", "Bios"), setting("SecureBoot", "Off")],
            None,
        )
        .await
        .unwrap();
    let stored = store.node_bios_list(node).await.unwrap();
    let pairs: Vec<(&str, Option<&str>)> = stored
        .iter()
        .map(|setting| (setting.name.as_str(), setting.value.as_deref()))
        .collect();
    assert_eq!(
        pairs,
        [("BootMode", Some("Bios")), ("SecureBoot", Some("Off"))]
    );
    assert!(stored[0].updated_at.is_some(), "BootMode was rewritten");
    assert_eq!(stored[0].registry["attribute_type"], "Enumeration");

    let missing = store
        .node_bios_set(Uuid::new_v4(), &[setting("BootMode", "Uefi")], None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            missing,
            Error::NotFound {
                kind: Kind::Node,
                ..
            }
        ),
        "{missing:?}"
    );
}

async fn inventory_is_upserted_and_goes_with_the_node(store: Store) {
    let node = store.node_create(&enrolled("n1")).await.unwrap().uuid;
    assert!(store.node_inventory_get(node).await.unwrap().is_none());
    let first = store
        .node_inventory_set(
            node,
            &object(json!({"cpu": {"count": 4}})),
            &JsonObject::new(),
            None,
        )
        .await
        .unwrap();
    assert!(first.updated_at.is_none());
    let second = store
        .node_inventory_set(
            node,
            &object(json!({"cpu": {"count": 8}})),
            &object(json!({"root_disk": "sda"})),
            None,
        )
        .await
        .unwrap();
    assert_eq!(second.inventory["cpu"]["count"], 8);
    assert_eq!(second.plugin_data["root_disk"], "sda");
    assert!(second.updated_at.is_some());
    store
        .node_bios_set(node, &[setting("A", "1")], None)
        .await
        .unwrap();

    store.node_delete(node).await.unwrap();
    assert!(store.node_inventory_get(node).await.unwrap().is_none());
    assert!(store.node_bios_list(node).await.unwrap().is_empty());
}

fn versions(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(component, version)| ((*component).to_owned(), (*version).to_owned()))
        .collect()
}

async fn firmware_components_keep_their_first_and_flashed_versions(store: Store) {
    let node = store.node_create(&enrolled("n1")).await.unwrap().uuid;
    assert!(store.node_firmware_list(node).await.unwrap().is_empty());
    store
        .node_firmware_set(
            node,
            &versions(&[("bios", "1.0"), ("bmc", "2.0")]),
            &[],
            None,
        )
        .await
        .unwrap();
    store
        .node_firmware_set(
            node,
            &versions(&[("bios", "1.1")]),
            &["bios".to_owned()],
            None,
        )
        .await
        .unwrap();
    store
        .node_firmware_set(
            node,
            &versions(&[("bios", "1.1"), ("bmc", "2.0")]),
            &[],
            None,
        )
        .await
        .unwrap();
    let stored = store.node_firmware_list(node).await.unwrap();
    let rows: Vec<(&str, &str, &str, Option<&str>)> = stored
        .iter()
        .map(|c| {
            (
                c.component.as_str(),
                c.initial_version.as_str(),
                c.current_version.as_str(),
                c.last_version_flashed.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("bios", "1.0", "1.1", Some("1.1")),
            ("bmc", "2.0", "2.0", None)
        ]
    );
    assert!(stored[0].updated_at.is_some());

    let missing = store
        .node_firmware_set(Uuid::new_v4(), &versions(&[("bios", "1.0")]), &[], None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            missing,
            Error::NotFound {
                kind: Kind::Node,
                ..
            }
        ),
        "{missing:?}"
    );
    store.node_delete(node).await.unwrap();
    assert!(store.node_firmware_list(node).await.unwrap().is_empty());
}
