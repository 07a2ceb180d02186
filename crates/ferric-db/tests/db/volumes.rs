//! Volume connectors and targets: CRUD, the `(type, connector_id)` and per-node `boot_index`
//! uniqueness, listing by node with paging, a node that must exist, and deletion with the node.

use ferric_db::{
    Error, Kind, Page, SortDir, Store, VolumeConnectorSortKey, VolumeFilter, VolumeTargetSortKey,
};
use ferric_model::resources::{VolumeConnector, VolumeTarget};
use serde_json::json;
use uuid::Uuid;

use crate::harness::backend_tests;
use crate::nodes::enrolled;

backend_tests!(
    connector_lifecycle_and_uniqueness,
    target_lifecycle_and_boot_index_per_node,
    volume_lists_by_node_with_paging,
    volume_records_go_with_their_node,
);

fn connector(node: Uuid, kind: &str, id: &str) -> VolumeConnector {
    let mut connector = VolumeConnector::new(Uuid::new_v4(), node);
    connector.connector_type = kind.to_owned();
    connector.connector_id = id.to_owned();
    connector
}

fn target(node: Uuid, boot_index: i64, volume_id: &str) -> VolumeTarget {
    let mut target = VolumeTarget::new(Uuid::new_v4(), node);
    target.volume_type = "iscsi".to_owned();
    target.boot_index = boot_index;
    target.volume_id = volume_id.to_owned();
    target
}

async fn connector_lifecycle_and_uniqueness(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap();
    let mut new = connector(node.uuid, "iqn", "iqn.2024-01.org.example:n");
    new.extra = json!({"a": 1}).as_object().unwrap().clone();
    let created = store.volume_connector_create(&new).await.unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(created.extra, new.extra);
    assert_eq!(store.volume_connector_get(new.uuid).await.unwrap(), created);

    // The same (type, connector_id) on any node is taken; another type is not.
    let other = store.node_create(&enrolled("o")).await.unwrap();
    let error = store
        .volume_connector_create(&connector(other.uuid, "iqn", "iqn.2024-01.org.example:n"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Duplicate { kind: Kind::VolumeConnector, field: "type", value }
            if value == "iqn and connector ID iqn.2024-01.org.example:n"),
        "{error:?}"
    );
    let wwpn = connector(other.uuid, "wwpn", "iqn.2024-01.org.example:n");
    let wwpn = store.volume_connector_create(&wwpn).await.unwrap();

    // An update onto a taken pair is refused the same way; a stale one is refused too.
    let mut clash = wwpn.clone();
    clash.connector_type = "iqn".to_owned();
    let error = store
        .volume_connector_update(&clash, wwpn.version)
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::Duplicate { field: "type", .. }),
        "{error:?}"
    );
    let mut changed = created.clone();
    changed.connector_id = "iqn.2024-01.org.example:m".to_owned();
    let updated = store
        .volume_connector_update(&changed, created.version)
        .await
        .unwrap();
    assert_eq!(updated.version, 2);
    assert!(updated.updated_at.is_some());
    let stale = store
        .volume_connector_update(&changed, created.version)
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::StaleRevision { .. }), "{stale:?}");

    // A duplicate UUID names the UUID.
    let mut same_uuid = connector(node.uuid, "mac", "52:54:00:00:00:01");
    same_uuid.uuid = created.uuid;
    let error = store.volume_connector_create(&same_uuid).await.unwrap_err();
    assert!(
        matches!(error, Error::Duplicate { field: "uuid", .. }),
        "{error:?}"
    );

    // A node that does not exist.
    let error = store
        .volume_connector_create(&connector(Uuid::new_v4(), "ip", "10.0.0.1"))
        .await
        .unwrap_err();
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

    store.volume_connector_delete(created.uuid).await.unwrap();
    let error = store.volume_connector_get(created.uuid).await.unwrap_err();
    assert!(matches!(
        error,
        Error::NotFound {
            kind: Kind::VolumeConnector,
            ..
        }
    ));
    let error = store
        .volume_connector_delete(created.uuid)
        .await
        .unwrap_err();
    assert!(matches!(
        error,
        Error::NotFound {
            kind: Kind::VolumeConnector,
            ..
        }
    ));
}

async fn target_lifecycle_and_boot_index_per_node(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap();
    let other = store.node_create(&enrolled("o")).await.unwrap();
    let mut new = target(node.uuid, 0, "vol-1");
    new.properties = json!({"target_iqn": "iqn.x", "auth_password": "p"})
        .as_object()
        .unwrap()
        .clone();
    let created = store.volume_target_create(&new).await.unwrap();
    assert_eq!(created.properties, new.properties);
    assert_eq!(created.boot_index, 0);
    assert_eq!(store.volume_target_get(new.uuid).await.unwrap(), created);

    // boot_index 0 is taken on this node only.
    let error = store
        .volume_target_create(&target(node.uuid, 0, "vol-2"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Duplicate { kind: Kind::VolumeTarget, field: "boot_index", value }
            if value == "0"),
        "{error:?}"
    );
    store
        .volume_target_create(&target(other.uuid, 0, "vol-2"))
        .await
        .unwrap();
    let second = store
        .volume_target_create(&target(node.uuid, 1, "vol-3"))
        .await
        .unwrap();

    let mut clash = second.clone();
    clash.boot_index = 0;
    let error = store
        .volume_target_update(&clash, second.version)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Duplicate {
                field: "boot_index",
                ..
            }
        ),
        "{error:?}"
    );
    let mut changed = second.clone();
    changed.boot_index = 5;
    changed.volume_type = "fibre_channel".to_owned();
    let updated = store
        .volume_target_update(&changed, second.version)
        .await
        .unwrap();
    assert_eq!((updated.boot_index, updated.version), (5, 2));
    assert_eq!(updated.volume_type, "fibre_channel");

    store.volume_target_delete(second.uuid).await.unwrap();
    let error = store.volume_target_get(second.uuid).await.unwrap_err();
    assert!(matches!(
        error,
        Error::NotFound {
            kind: Kind::VolumeTarget,
            ..
        }
    ));
}

async fn volume_lists_by_node_with_paging(store: Store) {
    let mut owned = enrolled("a");
    owned.owner = Some("p1".to_owned());
    let a = store.node_create(&owned).await.unwrap();
    let b = store.node_create(&enrolled("b")).await.unwrap();
    for index in 0..3 {
        store
            .volume_connector_create(&connector(a.uuid, "ip", &format!("10.0.0.{index}")))
            .await
            .unwrap();
        store
            .volume_target_create(&target(a.uuid, index, &format!("a-{index}")))
            .await
            .unwrap();
    }
    store
        .volume_connector_create(&connector(b.uuid, "ip", "10.0.1.1"))
        .await
        .unwrap();
    store
        .volume_target_create(&target(b.uuid, 0, "b-0"))
        .await
        .unwrap();

    let all = store
        .volume_connector_list(&VolumeFilter::default(), &Page::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 4);
    let of_a = VolumeFilter {
        node_uuid: Some(a.uuid),
        ..VolumeFilter::default()
    };
    let first: Page<VolumeConnectorSortKey> = Page::first(2);
    let page = store.volume_connector_list(&of_a, &first).await.unwrap();
    assert_eq!(page.len(), 2);
    let next = Page {
        marker: Some(page[1].uuid),
        ..first
    };
    let rest = store.volume_connector_list(&of_a, &next).await.unwrap();
    assert_eq!(rest.len(), 1);
    assert!(rest.iter().all(|connector| connector.node_uuid == a.uuid));

    let of_p1 = VolumeFilter {
        project: Some("p1".to_owned()),
        ..VolumeFilter::default()
    };
    let by_index = Page {
        sort_key: VolumeTargetSortKey::BootIndex,
        sort_dir: SortDir::Desc,
        ..Page::default()
    };
    let targets = store.volume_target_list(&of_p1, &by_index).await.unwrap();
    let indexes: Vec<i64> = targets.iter().map(|target| target.boot_index).collect();
    assert_eq!(indexes, [2, 1, 0]);

    let unknown = Page::<VolumeTargetSortKey> {
        marker: Some(Uuid::new_v4()),
        ..Page::default()
    };
    let error = store
        .volume_target_list(&VolumeFilter::default(), &unknown)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::MarkerNotFound { .. }), "{error:?}");
}

async fn volume_records_go_with_their_node(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap();
    let connector = store
        .volume_connector_create(&connector(node.uuid, "mac", "52:54:00:00:00:02"))
        .await
        .unwrap();
    let target = store
        .volume_target_create(&target(node.uuid, 0, "vol"))
        .await
        .unwrap();
    store.node_delete(node.uuid).await.unwrap();
    assert!(store.volume_connector_get(connector.uuid).await.is_err());
    assert!(store.volume_target_get(target.uuid).await.is_err());
}
