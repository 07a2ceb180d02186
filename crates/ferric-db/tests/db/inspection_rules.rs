//! Inspection rules: create with their conditions and actions, unique UUIDs, guarded
//! update, paging and the phase filter, the conductor's priority order, and delete.

use ferric_db::{Error, InspectionRuleFilter, InspectionRuleSortKey, Kind, Page, SortDir, Store};
use ferric_model::resources::{InspectionRule, JsonObject};
use serde_json::json;
use uuid::Uuid;

use crate::harness::backend_tests;

backend_tests!(inspection_rule_lifecycle, inspection_rules_page_and_order);

fn item(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

fn rule(priority: i64) -> InspectionRule {
    let mut rule = InspectionRule::new(Uuid::new_v4());
    rule.priority = priority;
    rule.description = Some(format!("priority {priority}"));
    rule.conditions = vec![item(json!({
        "op": "eq", "args": ["{inventory[cpu][count]}", "{item}"], "loop": ["8", "16"],
        "multiple": "any",
    }))];
    rule.actions = vec![item(
        json!({"op": "add-trait", "args": {"name": "CUSTOM_BIG"}}),
    )];
    rule
}

async fn inspection_rule_lifecycle(store: Store) {
    let new = rule(10);
    let created = store.inspection_rule_create(&new).await.unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(created.conditions, new.conditions);
    assert_eq!(created.actions, new.actions);
    assert_eq!(created.phase, "main");
    assert!(!created.sensitive);
    assert_eq!(store.inspection_rule_get(new.uuid).await.unwrap(), created);

    let duplicate = store.inspection_rule_create(&new).await.unwrap_err();
    assert!(
        matches!(
            duplicate,
            Error::Duplicate {
                kind: Kind::InspectionRule,
                field: "uuid",
                ..
            }
        ),
        "{duplicate:?}"
    );

    let mut changed = created.clone();
    changed.sensitive = true;
    changed.priority = 99;
    changed.conditions.clear();
    let saved = store
        .inspection_rule_update(&changed, created.version)
        .await
        .unwrap();
    assert_eq!(saved.version, 2);
    assert!(saved.sensitive);
    assert_eq!(saved.priority, 99);
    assert!(saved.conditions.is_empty());
    assert!(saved.updated_at.is_some());
    let stale = store
        .inspection_rule_update(&changed, created.version)
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::StaleRevision { .. }), "{stale:?}");

    store.inspection_rule_delete(created.uuid).await.unwrap();
    let gone = store.inspection_rule_get(created.uuid).await.unwrap_err();
    assert!(
        matches!(
            gone,
            Error::NotFound {
                kind: Kind::InspectionRule,
                ..
            }
        ),
        "{gone:?}"
    );
    let again = store
        .inspection_rule_delete(created.uuid)
        .await
        .unwrap_err();
    assert!(matches!(again, Error::NotFound { .. }), "{again:?}");
}

async fn inspection_rules_page_and_order(store: Store) {
    let mut created = Vec::new();
    for priority in [5, 50, 0, 50] {
        created.push(store.inspection_rule_create(&rule(priority)).await.unwrap());
    }
    // The conductor's order: highest priority first, then the oldest.
    let order: Vec<Uuid> = store
        .inspection_rule_list_for_phase("main")
        .await
        .unwrap()
        .iter()
        .map(|rule| rule.uuid)
        .collect();
    assert_eq!(
        order,
        vec![
            created[1].uuid,
            created[3].uuid,
            created[0].uuid,
            created[2].uuid
        ]
    );
    assert!(
        store
            .inspection_rule_list_for_phase("later")
            .await
            .unwrap()
            .is_empty()
    );

    let filter = InspectionRuleFilter::default();
    let mut page = Page::first(2);
    page.sort_key = InspectionRuleSortKey::Priority;
    page.sort_dir = SortDir::Desc;
    let first = store.inspection_rule_list(&filter, &page).await.unwrap();
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|rule| rule.priority == 50));
    let next = store
        .inspection_rule_list(&filter, &page.clone().after(first[1].uuid))
        .await
        .unwrap();
    let priorities: Vec<i64> = next.iter().map(|rule| rule.priority).collect();
    assert_eq!(priorities, vec![5, 0]);
    let other_phase = InspectionRuleFilter {
        phase: Some("later".to_owned()),
    };
    assert!(
        store
            .inspection_rule_list(&other_phase, &Page::all())
            .await
            .unwrap()
            .is_empty()
    );
}
