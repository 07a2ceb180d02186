//! Node history: add, list oldest first, prune to the newest N.

use chrono::{Duration, TimeZone, Utc};
use ferric_db::{Error, Kind, Store};
use ferric_model::resources::NodeHistoryEntry;
use uuid::Uuid;

use crate::harness::backend_tests;
use crate::nodes::enrolled;

backend_tests!(add_list_prune);

fn entry(node: Uuid, n: i64) -> NodeHistoryEntry {
    NodeHistoryEntry {
        uuid: Uuid::new_v4(),
        node,
        created_at: Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap() + Duration::seconds(n),
        severity: if n % 2 == 0 { "INFO" } else { "ERROR" }.to_owned(),
        event_type: "provisioning".to_owned(),
        event: format!("event {n}"),
        conductor: Some("c1".to_owned()),
        user: (n == 0).then(|| "admin".to_owned()),
    }
}

async fn add_list_prune(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap().uuid;
    let other = store.node_create(&enrolled("m")).await.unwrap().uuid;
    let mut added = Vec::new();
    for n in 0..6 {
        added.push(store.node_history_add(&entry(node, n)).await.unwrap());
    }
    store.node_history_add(&entry(other, 0)).await.unwrap();
    assert_eq!(added[0], entry_with_uuid(node, 0, added[0].uuid));
    assert_eq!(store.node_history_list(node).await.unwrap(), added);

    assert_eq!(store.node_history_prune(node, 2).await.unwrap(), 4);
    assert_eq!(store.node_history_list(node).await.unwrap(), added[4..]);
    assert_eq!(store.node_history_list(other).await.unwrap().len(), 1);
    assert_eq!(store.node_history_prune(node, 5).await.unwrap(), 0);

    let orphan = store
        .node_history_add(&entry(Uuid::new_v4(), 0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            orphan,
            Error::NotFound {
                kind: Kind::Node,
                ..
            }
        ),
        "{orphan:?}"
    );
}

fn entry_with_uuid(node: Uuid, n: i64, uuid: Uuid) -> NodeHistoryEntry {
    NodeHistoryEntry {
        uuid,
        ..entry(node, n)
    }
}
