//! Bulk import (`Store::import`): records keep their own UUIDs and times, a re-run keeps what
//! is stored unless asked to update it, and a conflict writes nothing at all.

use chrono::{DateTime, TimeZone, Utc};
use ferric_db::{Error, ImportMode, ImportSet, Page, Store};
use ferric_model::resources::{
    BiosSetting, Chassis, Ident, JsonObject, NodeHistoryEntry, NodeInventory, Port, Portgroup,
};
use uuid::Uuid;

use crate::harness::backend_tests;
use crate::nodes::enrolled;

backend_tests!(
    imported_records_keep_their_uuids_and_times,
    a_rerun_keeps_or_updates_what_is_stored,
    a_conflict_writes_nothing,
);

fn at(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + seconds, 123_456_000)
        .unwrap()
}

/// A chassis, a node in it with a portgroup, a port in that portgroup, and node data.
fn set() -> ImportSet {
    let mut chassis = Chassis::new(Uuid::new_v4());
    chassis.created_at = at(0);
    let mut node = enrolled("imported");
    node.chassis_uuid = Some(chassis.uuid);
    node.traits = vec!["CUSTOM_A".to_owned()];
    node.created_at = at(1);
    node.updated_at = Some(at(2));
    let mut portgroup = Portgroup::new(Uuid::new_v4(), node.uuid);
    portgroup.name = Some("bond0".to_owned());
    portgroup.created_at = at(3);
    let mut port = Port::new(Uuid::new_v4(), node.uuid, "52:54:00:00:00:01");
    port.portgroup_uuid = Some(portgroup.uuid);
    port.created_at = at(4);
    let history = NodeHistoryEntry {
        uuid: Uuid::new_v4(),
        node: node.uuid,
        created_at: at(5),
        severity: "ERROR".to_owned(),
        event_type: "provisioning".to_owned(),
        event: "it failed".to_owned(),
        conductor: Some("old-conductor".to_owned()),
        user: None,
    };
    let bios = BiosSetting {
        name: "LogicalProc".to_owned(),
        value: Some("Enabled".to_owned()),
        registry: JsonObject::new(),
        created_at: at(6),
        updated_at: None,
    };
    let inventory = NodeInventory {
        node: node.uuid,
        inventory: serde_json::json!({"cpu": {"count": 2}})
            .as_object()
            .unwrap()
            .clone(),
        plugin_data: JsonObject::new(),
        created_at: at(7),
        updated_at: None,
    };
    ImportSet {
        chassis: vec![chassis],
        bios_settings: vec![(node.uuid, bios)],
        nodes: vec![node],
        portgroups: vec![portgroup],
        ports: vec![port],
        history: vec![history],
        inventories: vec![inventory],
        ..ImportSet::default()
    }
}

async fn imported_records_keep_their_uuids_and_times(store: Store) {
    let set = set();
    store.import(&set, ImportMode::KeepExisting).await.unwrap();
    let node = store
        .node_get(&Ident::Uuid(set.nodes[0].uuid))
        .await
        .unwrap();
    assert_eq!(node.created_at, at(1));
    assert_eq!(node.updated_at, Some(at(2)));
    assert_eq!(node.version, 1);
    assert_eq!(node.traits, ["CUSTOM_A"]);
    assert_eq!(node.chassis_uuid, Some(set.chassis[0].uuid));
    let port = store
        .port_get(&Ident::Uuid(set.ports[0].uuid))
        .await
        .unwrap();
    assert_eq!(port.created_at, at(4));
    assert_eq!(port.portgroup_uuid, Some(set.portgroups[0].uuid));
    let chassis = store.chassis_get(set.chassis[0].uuid).await.unwrap();
    assert_eq!(chassis.created_at, at(0));
    let history = store.node_history_list(node.uuid).await.unwrap();
    assert_eq!(history, set.history);
    let bios = store.node_bios_list(node.uuid).await.unwrap();
    assert_eq!(bios, [set.bios_settings[0].1.clone()]);
    let inventory = store.node_inventory_get(node.uuid).await.unwrap().unwrap();
    assert_eq!(inventory, set.inventories[0]);
}

async fn a_rerun_keeps_or_updates_what_is_stored(store: Store) {
    let mut set = set();
    store.import(&set, ImportMode::KeepExisting).await.unwrap();
    set.nodes[0].description = Some("changed".to_owned());
    set.ports[0].pxe_enabled = false;

    // Kept: nothing written, nothing changed.
    let written = store.import(&set, ImportMode::KeepExisting).await.unwrap();
    assert_eq!(written, 0);
    let node = store
        .node_get(&Ident::Uuid(set.nodes[0].uuid))
        .await
        .unwrap();
    assert_eq!(node.description, None);

    // Updated: every record overwritten, revisions bumped, creation times kept.
    let written = store.import(&set, ImportMode::Update).await.unwrap();
    assert!(written >= 7, "{written} rows written");
    let node = store
        .node_get(&Ident::Uuid(set.nodes[0].uuid))
        .await
        .unwrap();
    assert_eq!(node.description.as_deref(), Some("changed"));
    assert_eq!(node.version, 2);
    assert_eq!(node.created_at, at(1));
    let port = store
        .port_get(&Ident::Uuid(set.ports[0].uuid))
        .await
        .unwrap();
    assert!(!port.pxe_enabled);
    assert_eq!(store.node_history_list(node.uuid).await.unwrap().len(), 1);
}

async fn a_conflict_writes_nothing(store: Store) {
    // A different port already has the MAC address the import brings.
    let owner = store.node_create(&enrolled("owner")).await.unwrap();
    store
        .port_create(&Port::new(Uuid::new_v4(), owner.uuid, "52:54:00:00:00:01"))
        .await
        .unwrap();
    let set = set();
    let error = store
        .import(&set, ImportMode::KeepExisting)
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Import { table: "ports", .. }),
        "{error:?}"
    );
    // Nothing of the import is there: not its chassis, node or portgroup.
    assert!(store.chassis_list(&Page::all()).await.unwrap().is_empty());
    let nodes = store
        .node_list(&Default::default(), &Page::all())
        .await
        .unwrap();
    assert_eq!(nodes.len(), 1);
    assert!(
        store
            .portgroup_list(&Default::default(), &Page::all())
            .await
            .unwrap()
            .is_empty()
    );
}
