//! Ports, portgroups and chassis: CRUD, MAC uniqueness regardless of case, listing by node and
//! address, references that must exist, and deletes refused while something depends on them.

use ferric_db::{Error, Kind, Page, PortFilter, PortSortKey, PortgroupFilter, SortDir, Store};
use ferric_model::resources::{Chassis, Ident, Port, Portgroup};
use serde_json::json;
use uuid::Uuid;

use crate::harness::backend_tests;
use crate::nodes::enrolled;

backend_tests!(
    port_create_get_update_delete,
    ports_list_by_node_and_address_with_paging,
    duplicate_mac_is_refused_in_any_case,
    port_references_must_exist,
    portgroup_lifecycle,
    chassis_lifecycle,
);

async fn port_create_get_update_delete(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap();
    let mut port = Port::new(Uuid::new_v4(), node.uuid, "52:54:00:AB:CD:EF");
    port.name = Some("eth0".into());
    port.local_link_connection = json!({"switch_id": "0a:1b:2c:3d:4e:5f", "port_id": "Eth1/1"})
        .as_object()
        .unwrap()
        .clone();
    port.physical_network = Some("physnet1".into());
    port.is_smartnic = true;
    let created = store.port_create(&port).await.unwrap();
    assert_eq!(created.address, "52:54:00:ab:cd:ef");
    assert_eq!(created.version, 1);
    assert!(created.pxe_enabled);
    assert_eq!(created.local_link_connection, port.local_link_connection);

    assert_eq!(
        store.port_get(&Ident::Uuid(port.uuid)).await.unwrap(),
        created
    );
    assert_eq!(
        store.port_get(&Ident::parse("eth0")).await.unwrap(),
        created
    );

    let mut changed = created.clone();
    changed.pxe_enabled = false;
    changed.address = "52:54:00:AB:CD:00".into();
    let updated = store.port_update(&changed, created.version).await.unwrap();
    assert!(!updated.pxe_enabled);
    assert_eq!(updated.address, "52:54:00:ab:cd:00");
    assert_eq!(updated.version, 2);
    let stale = store
        .port_update(&changed, created.version)
        .await
        .unwrap_err();
    assert!(
        matches!(
            stale,
            Error::StaleRevision {
                kind: Kind::Port,
                ..
            }
        ),
        "{stale:?}"
    );

    store.port_delete(port.uuid).await.unwrap();
    let gone = store.port_get(&Ident::Uuid(port.uuid)).await.unwrap_err();
    assert!(matches!(
        gone,
        Error::NotFound {
            kind: Kind::Port,
            ..
        }
    ));
}

async fn ports_list_by_node_and_address_with_paging(store: Store) {
    let a = store.node_create(&enrolled("a")).await.unwrap();
    let b = store.node_create(&enrolled("b")).await.unwrap();
    let mut on_a = Vec::new();
    for n in 0..7 {
        let port = Port::new(Uuid::new_v4(), a.uuid, format!("52:54:00:00:0a:{n:02x}"));
        on_a.push(store.port_create(&port).await.unwrap());
    }
    store
        .port_create(&Port::new(Uuid::new_v4(), b.uuid, "52:54:00:00:0b:01"))
        .await
        .unwrap();

    let filter = PortFilter {
        node_uuid: Some(a.uuid),
        ..Default::default()
    };
    let mut listed = Vec::new();
    let mut page = Page::first(3);
    loop {
        let batch = store.port_list(&filter, &page).await.unwrap();
        let full = batch.len() == 3;
        listed.extend(batch);
        if !full {
            break;
        }
        page = page.after(listed.last().map(|port: &Port| port.uuid).unwrap());
    }
    assert_eq!(listed, on_a);

    let by_address = PortFilter {
        address: Some("52:54:00:00:0B:01".into()),
        ..Default::default()
    };
    let found = store.port_list(&by_address, &Page::all()).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].node_uuid, b.uuid);

    let desc = Page {
        sort_key: PortSortKey::Address,
        sort_dir: SortDir::Desc,
        ..Page::first(2)
    };
    let top = store
        .port_list(&PortFilter::default(), &desc)
        .await
        .unwrap();
    let addresses: Vec<_> = top.iter().map(|port| port.address.as_str()).collect();
    assert_eq!(addresses, ["52:54:00:00:0b:01", "52:54:00:00:0a:06"]);
}

async fn duplicate_mac_is_refused_in_any_case(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap();
    store
        .port_create(&Port::new(Uuid::new_v4(), node.uuid, "52:54:00:aa:bb:cc"))
        .await
        .unwrap();
    let twin = Port::new(Uuid::new_v4(), node.uuid, "52:54:00:AA:BB:CC");
    let error = store.port_create(&twin).await.unwrap_err();
    assert!(
        matches!(&error, Error::Duplicate { kind: Kind::Port, field: "address", value } if value == "52:54:00:aa:bb:cc"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "a port with address '52:54:00:aa:bb:cc' already exists"
    );
    assert!(error.is_conflict());

    // Moving another port onto a taken address is refused the same way.
    let other = store
        .port_create(&Port::new(Uuid::new_v4(), node.uuid, "52:54:00:aa:bb:cd"))
        .await
        .unwrap();
    let mut moved = other.clone();
    moved.address = "52:54:00:Aa:Bb:Cc".into();
    let error = store.port_update(&moved, other.version).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::Duplicate {
                field: "address",
                ..
            }
        ),
        "{error:?}"
    );
}

async fn port_references_must_exist(store: Store) {
    let missing_node = Port::new(Uuid::new_v4(), Uuid::new_v4(), "52:54:00:00:00:01");
    let error = store.port_create(&missing_node).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                kind: Kind::Node,
                ..
            }
        ),
        "{error:?}"
    );

    let node = store.node_create(&enrolled("n")).await.unwrap();
    let mut missing_group = Port::new(Uuid::new_v4(), node.uuid, "52:54:00:00:00:02");
    missing_group.portgroup_uuid = Some(Uuid::new_v4());
    let error = store.port_create(&missing_group).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                kind: Kind::Portgroup,
                ..
            }
        ),
        "{error:?}"
    );
}

async fn portgroup_lifecycle(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap();
    let mut portgroup = Portgroup::new(Uuid::new_v4(), node.uuid);
    portgroup.name = Some("bond0".into());
    portgroup.address = Some("52:54:00:0F:00:01".into());
    portgroup.mode = Some("802.3ad".into());
    portgroup.properties.insert("miimon".into(), json!(100));
    let created = store.portgroup_create(&portgroup).await.unwrap();
    assert_eq!(created.address.as_deref(), Some("52:54:00:0f:00:01"));
    assert_eq!(
        store.portgroup_get(&Ident::parse("bond0")).await.unwrap(),
        created
    );

    let twin = Portgroup {
        uuid: Uuid::new_v4(),
        name: Some("bond1".into()),
        ..portgroup.clone()
    };
    let error = store.portgroup_create(&twin).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::Duplicate {
                kind: Kind::Portgroup,
                field: "address",
                ..
            }
        ),
        "{error:?}"
    );

    let mut member = Port::new(Uuid::new_v4(), node.uuid, "52:54:00:00:00:03");
    member.portgroup_uuid = Some(created.uuid);
    let member = store.port_create(&member).await.unwrap();
    let in_group = PortFilter {
        portgroup_uuid: Some(created.uuid),
        ..Default::default()
    };
    assert_eq!(
        store.port_list(&in_group, &Page::all()).await.unwrap(),
        std::slice::from_ref(&member)
    );

    let error = store.portgroup_delete(created.uuid).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InUse {
                kind: Kind::Portgroup,
                dependents: "ports",
                ..
            }
        ),
        "{error:?}"
    );

    let mut changed = created.clone();
    changed.standalone_ports_supported = false;
    let updated = store
        .portgroup_update(&changed, created.version)
        .await
        .unwrap();
    assert!(!updated.standalone_ports_supported);
    let listed = store
        .portgroup_list(
            &PortgroupFilter {
                node_uuid: Some(node.uuid),
                ..Default::default()
            },
            &Page::all(),
        )
        .await
        .unwrap();
    assert_eq!(listed, [updated]);

    store.port_delete(member.uuid).await.unwrap();
    store.portgroup_delete(created.uuid).await.unwrap();
}

async fn chassis_lifecycle(store: Store) {
    let mut chassis = Chassis::new(Uuid::new_v4());
    chassis.description = Some("rack 1".into());
    chassis.extra.insert("row".into(), json!(3));
    let created = store.chassis_create(&chassis).await.unwrap();
    assert_eq!(store.chassis_get(chassis.uuid).await.unwrap(), created);

    let mut node = enrolled("n");
    node.chassis_uuid = Some(chassis.uuid);
    let node = store.node_create(&node).await.unwrap();
    let error = store.chassis_delete(chassis.uuid).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InUse {
                kind: Kind::Chassis,
                dependents: "nodes",
                ..
            }
        ),
        "{error:?}"
    );

    let mut changed = created.clone();
    changed.description = None;
    let updated = store.chassis_update(&changed, 1).await.unwrap();
    assert_eq!(updated.description, None);
    assert!(matches!(
        store.chassis_update(&changed, 1).await,
        Err(Error::StaleRevision { .. })
    ));
    assert_eq!(store.chassis_list(&Page::all()).await.unwrap(), [updated]);

    store.node_delete(node.uuid).await.unwrap();
    store.chassis_delete(chassis.uuid).await.unwrap();
    assert!(store.chassis_list(&Page::all()).await.unwrap().is_empty());
}
