//! The inspection service's state: introspections (upsert, compare-and-set moves, listing
//! newest first with a marker), their stored data, and introspection rules.

use chrono::{Duration, TimeZone, Utc};
use ferric_db::{Error, Introspection, IntrospectionRule, Kind, Store};
use ferric_model::resources::JsonObject;
use serde_json::json;
use uuid::Uuid;

use crate::harness::backend_tests;
use crate::nodes::enrolled;

backend_tests!(
    introspections_move_only_from_expected_states,
    introspections_list_newest_first,
    introspection_data_is_kept_per_node,
    rules_keep_their_order_and_content,
);

fn object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

fn waiting(node: Uuid, second: i64) -> Introspection {
    Introspection {
        node,
        state: "waiting".to_owned(),
        manage_boot: false,
        macs: vec!["52:54:00:00:00:01".to_owned()],
        bmc_addresses: vec!["10.0.0.7".to_owned()],
        error: None,
        started_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + Duration::seconds(second),
        finished_at: None,
    }
}

async fn introspections_move_only_from_expected_states(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap().uuid;
    assert_eq!(store.introspection_get(node).await.unwrap(), None);
    let missing = store
        .introspection_upsert(&waiting(Uuid::new_v4(), 0))
        .await;
    assert!(
        matches!(
            missing,
            Err(Error::NotFound {
                kind: Kind::Node,
                ..
            })
        ),
        "{missing:?}"
    );

    let stored = store.introspection_upsert(&waiting(node, 0)).await.unwrap();
    assert_eq!(stored, waiting(node, 0));
    assert_eq!(store.introspection_get(node).await.unwrap(), Some(stored));
    assert_eq!(
        store.introspection_list_unfinished().await.unwrap().len(),
        1
    );

    // Compare-and-set: only one of two racing callbacks takes the node to processing.
    assert!(
        store
            .introspection_transition(node, &["waiting"], "processing")
            .await
            .unwrap()
    );
    assert!(
        !store
            .introspection_transition(node, &["waiting"], "processing")
            .await
            .unwrap()
    );
    // An abort (from starting or waiting) loses against the running processing.
    assert!(
        !store
            .introspection_finish(node, &["starting", "waiting"], "error", Some("aborted"))
            .await
            .unwrap()
    );
    assert!(
        store
            .introspection_finish(node, &["processing"], "finished", None)
            .await
            .unwrap()
    );
    let finished = store.introspection_get(node).await.unwrap().unwrap();
    assert_eq!(finished.state, "finished");
    assert!(finished.finished_at.is_some());
    assert_eq!(finished.error, None);
    assert!(
        store
            .introspection_list_unfinished()
            .await
            .unwrap()
            .is_empty()
    );
    // A finished introspection does not move again, whatever it is asked.
    assert!(
        !store
            .introspection_transition(node, &[], "waiting")
            .await
            .unwrap()
    );

    // A new introspection replaces it; an error is kept with the state.
    store.introspection_upsert(&waiting(node, 5)).await.unwrap();
    assert!(
        store
            .introspection_finish(node, &[], "error", Some("Introspection timeout"))
            .await
            .unwrap()
    );
    let failed = store.introspection_get(node).await.unwrap().unwrap();
    assert_eq!(
        (failed.state.as_str(), failed.error.as_deref()),
        ("error", Some("Introspection timeout"))
    );

    // Deleting the node deletes its introspection.
    store.node_delete(node).await.unwrap();
    assert_eq!(store.introspection_get(node).await.unwrap(), None);
}

async fn introspections_list_newest_first(store: Store) {
    let mut nodes = Vec::new();
    for (n, second) in [0, 10, 10, 20].into_iter().enumerate() {
        let node = store
            .node_create(&enrolled(&format!("n{n}")))
            .await
            .unwrap();
        store
            .introspection_upsert(&waiting(node.uuid, second))
            .await
            .unwrap();
        nodes.push((second, node.uuid));
    }
    // Newest first; equal start times by node UUID.
    nodes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let expected: Vec<Uuid> = nodes.iter().map(|(_, uuid)| *uuid).collect();
    let all: Vec<Uuid> = store
        .introspection_list(None, 100)
        .await
        .unwrap()
        .iter()
        .map(|introspection| introspection.node)
        .collect();
    assert_eq!(all, expected);

    // Pages of two, each after the last of the one before, cover the list once.
    let mut paged = Vec::new();
    let mut marker = None;
    loop {
        let page = store.introspection_list(marker, 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        marker = page.last().map(|introspection| introspection.node);
        paged.extend(page.iter().map(|introspection| introspection.node));
    }
    assert_eq!(paged, expected);

    let unknown = Uuid::new_v4();
    assert!(matches!(
        store.introspection_list(Some(unknown), 2).await,
        Err(Error::MarkerNotFound { marker, .. }) if marker == unknown
    ));
}

async fn introspection_data_is_kept_per_node(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap().uuid;
    let data =
        object(json!({"inventory": {"cpu": {"count": 2}}, "root_disk": {"name": "/dev/vda"}}));
    // Data belongs to an introspection.
    assert!(matches!(
        store.introspection_data_set(node, &data).await,
        Err(Error::NotFound {
            kind: Kind::Introspection,
            ..
        })
    ));
    store.introspection_upsert(&waiting(node, 0)).await.unwrap();
    assert_eq!(store.introspection_data_get(node).await.unwrap(), None);
    store.introspection_data_set(node, &data).await.unwrap();
    assert_eq!(
        store.introspection_data_get(node).await.unwrap(),
        Some(data)
    );
    let newer = object(json!({"inventory": {"cpu": {"count": 4}}}));
    store.introspection_data_set(node, &newer).await.unwrap();
    assert_eq!(
        store.introspection_data_get(node).await.unwrap(),
        Some(newer)
    );

    assert!(store.introspection_data_delete(node).await.unwrap());
    assert!(!store.introspection_data_delete(node).await.unwrap());
    assert_eq!(store.introspection_data_get(node).await.unwrap(), None);
}

fn rule(description: &str, second: i64) -> IntrospectionRule {
    IntrospectionRule {
        uuid: Uuid::new_v4(),
        description: Some(description.to_owned()),
        scope: (second == 0).then(|| "rack-1".to_owned()),
        conditions: vec![object(
            json!({"op": "ge", "field": "inventory.cpu.count", "value": 2}),
        )],
        actions: vec![object(
            json!({"action": "set-attribute", "path": "/extra/big", "value": true}),
        )],
        created_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + Duration::seconds(second),
    }
}

async fn rules_keep_their_order_and_content(store: Store) {
    assert!(store.introspection_rule_list().await.unwrap().is_empty());
    // Created in this order, listed in this order (the order they apply in), whatever
    // their UUIDs or timestamps.
    let rules = [rule("c", 30), rule("a", 0), rule("b", 10)];
    for rule in &rules {
        assert_eq!(&store.introspection_rule_create(rule).await.unwrap(), rule);
    }
    assert_eq!(store.introspection_rule_list().await.unwrap(), rules);
    assert_eq!(
        store.introspection_rule_get(rules[1].uuid).await.unwrap(),
        rules[1]
    );
    assert!(matches!(
        store.introspection_rule_create(&rules[0]).await,
        Err(Error::Duplicate {
            kind: Kind::IntrospectionRule,
            field: "uuid",
            ..
        })
    ));

    store
        .introspection_rule_delete(rules[0].uuid)
        .await
        .unwrap();
    assert!(matches!(
        store.introspection_rule_delete(rules[0].uuid).await,
        Err(Error::NotFound {
            kind: Kind::IntrospectionRule,
            ..
        })
    ));
    assert!(matches!(
        store.introspection_rule_get(rules[0].uuid).await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(store.introspection_rule_list().await.unwrap(), rules[1..]);
    assert_eq!(store.introspection_rule_delete_all().await.unwrap(), 2);
    assert!(store.introspection_rule_list().await.unwrap().is_empty());
}
