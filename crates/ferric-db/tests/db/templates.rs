//! Deploy templates and runbooks: create with their steps, lookup by UUID and name, unique
//! names, guarded update, paging, the instance-trait lookup, the project view of runbooks and
//! delete.

use ferric_db::{
    DeployTemplateSortKey, Error, Kind, Page, RunbookFilter, RunbookSortKey, SortDir, Store,
};
use ferric_model::resources::{
    DeployStep, DeployTemplate, Ident, JsonObject, Runbook, RunbookStep,
};
use serde_json::json;
use uuid::Uuid;

use crate::harness::backend_tests;

backend_tests!(
    deploy_template_lifecycle,
    deploy_templates_page_and_match_by_names,
    runbook_lifecycle_and_project_view,
);

fn args(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

fn template(name: &str) -> DeployTemplate {
    let mut template = DeployTemplate::new(Uuid::new_v4());
    template.name = name.to_owned();
    template.steps = vec![DeployStep {
        interface: "bios".to_owned(),
        step: "apply_configuration".to_owned(),
        args: args(json!({"settings": [{"name": "ProcVirtualization", "value": "Enabled"}]})),
        priority: 150,
    }];
    template
}

async fn deploy_template_lifecycle(store: Store) {
    let mut new = template("CUSTOM_VT");
    new.extra = args(json!({"team": "hpc"}));
    let created = store.deploy_template_create(&new).await.unwrap();
    assert_eq!(created.version, 1);
    assert_eq!(created.steps, new.steps);
    assert_eq!(created.extra, new.extra);

    let by_name = store
        .deploy_template_get(&Ident::Name("CUSTOM_VT".to_owned()))
        .await
        .unwrap();
    assert_eq!(by_name, created);
    let by_uuid = store
        .deploy_template_get(&Ident::Uuid(created.uuid))
        .await
        .unwrap();
    assert_eq!(by_uuid, created);

    let duplicate = store
        .deploy_template_create(&template("CUSTOM_VT"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            duplicate,
            Error::Duplicate {
                kind: Kind::DeployTemplate,
                field: "name",
                ..
            }
        ),
        "{duplicate:?}"
    );

    let mut changed = created.clone();
    changed.steps[0].priority = 0;
    changed.steps.push(DeployStep {
        interface: "deploy".to_owned(),
        step: "write_image".to_owned(),
        args: JsonObject::new(),
        priority: 80,
    });
    let saved = store
        .deploy_template_update(&changed, created.version)
        .await
        .unwrap();
    assert_eq!(saved.version, 2);
    assert_eq!(saved.steps, changed.steps);
    assert!(saved.updated_at.is_some());
    let stale = store
        .deploy_template_update(&changed, created.version)
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::StaleRevision { .. }), "{stale:?}");

    // Renaming onto a taken name is a duplicate too.
    let other = store
        .deploy_template_create(&template("CUSTOM_OTHER"))
        .await
        .unwrap();
    let mut renamed = other.clone();
    renamed.name = "CUSTOM_VT".to_owned();
    let taken = store
        .deploy_template_update(&renamed, other.version)
        .await
        .unwrap_err();
    assert!(
        matches!(taken, Error::Duplicate { field: "name", .. }),
        "{taken:?}"
    );

    store.deploy_template_delete(created.uuid).await.unwrap();
    let gone = store
        .deploy_template_get(&Ident::Uuid(created.uuid))
        .await
        .unwrap_err();
    assert!(
        matches!(
            gone,
            Error::NotFound {
                kind: Kind::DeployTemplate,
                ..
            }
        ),
        "{gone:?}"
    );
    let again = store
        .deploy_template_delete(created.uuid)
        .await
        .unwrap_err();
    assert!(matches!(again, Error::NotFound { .. }), "{again:?}");
}

async fn deploy_templates_page_and_match_by_names(store: Store) {
    for name in ["CUSTOM_C", "CUSTOM_A", "CUSTOM_B"] {
        store.deploy_template_create(&template(name)).await.unwrap();
    }
    let by_name = Page {
        limit: Some(2),
        marker: None,
        sort_key: DeployTemplateSortKey::Name,
        sort_dir: SortDir::Desc,
    };
    let first = store.deploy_template_list(&by_name).await.unwrap();
    let names: Vec<&str> = first.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["CUSTOM_C", "CUSTOM_B"]);
    let rest = store
        .deploy_template_list(&by_name.clone().after(first[1].uuid))
        .await
        .unwrap();
    let names: Vec<&str> = rest.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["CUSTOM_A"]);

    let matched = store
        .deploy_template_list_by_names(&[
            "CUSTOM_B".to_owned(),
            "CUSTOM_NONE".to_owned(),
            "CUSTOM_A".to_owned(),
        ])
        .await
        .unwrap();
    let names: Vec<&str> = matched.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["CUSTOM_A", "CUSTOM_B"]);
    assert!(
        store
            .deploy_template_list_by_names(&[])
            .await
            .unwrap()
            .is_empty()
    );
}

fn runbook(name: &str, owner: Option<&str>, public: bool) -> Runbook {
    let mut runbook = Runbook::new(Uuid::new_v4());
    runbook.name = name.to_owned();
    runbook.owner = owner.map(str::to_owned);
    runbook.public = public;
    runbook.steps = vec![
        RunbookStep {
            interface: "deploy".to_owned(),
            step: "erase_devices_metadata".to_owned(),
            args: JsonObject::new(),
            order: 2,
        },
        RunbookStep {
            interface: "bios".to_owned(),
            step: "factory_reset".to_owned(),
            args: JsonObject::new(),
            order: 1,
        },
    ];
    runbook
}

async fn runbook_lifecycle_and_project_view(store: Store) {
    let mut mine = runbook("CUSTOM_MINE", Some("p1"), false);
    mine.disable_ramdisk = true;
    let mine = store.runbook_create(&mine).await.unwrap();
    assert!(mine.disable_ramdisk);
    assert_eq!(mine.owner.as_deref(), Some("p1"));
    assert_eq!(mine.steps.len(), 2);
    store
        .runbook_create(&runbook("CUSTOM_THEIRS", Some("p2"), false))
        .await
        .unwrap();
    store
        .runbook_create(&runbook("CUSTOM_SHARED", None, true))
        .await
        .unwrap();
    store
        .runbook_create(&runbook("CUSTOM_SYSTEM", None, false))
        .await
        .unwrap();

    let duplicate = store
        .runbook_create(&runbook("CUSTOM_MINE", None, false))
        .await
        .unwrap_err();
    assert!(
        matches!(
            duplicate,
            Error::Duplicate {
                kind: Kind::Runbook,
                field: "name",
                ..
            }
        ),
        "{duplicate:?}"
    );

    let sorted = Page {
        sort_key: RunbookSortKey::Name,
        ..Page::all()
    };
    let names = |runbooks: Vec<Runbook>| -> Vec<String> {
        runbooks.into_iter().map(|runbook| runbook.name).collect()
    };
    let all = store
        .runbook_list(&RunbookFilter::default(), &sorted)
        .await
        .unwrap();
    assert_eq!(
        names(all),
        [
            "CUSTOM_MINE",
            "CUSTOM_SHARED",
            "CUSTOM_SYSTEM",
            "CUSTOM_THEIRS"
        ]
    );
    let p1 = RunbookFilter {
        project: Some("p1".to_owned()),
    };
    let seen = store.runbook_list(&p1, &sorted).await.unwrap();
    assert_eq!(names(seen), ["CUSTOM_MINE", "CUSTOM_SHARED"]);

    let mut public = mine.clone();
    public.public = true;
    public.owner = None;
    let saved = store.runbook_update(&public, mine.version).await.unwrap();
    assert!(saved.public);
    assert_eq!(saved.owner, None);
    let by_name = store
        .runbook_get(&Ident::Name("CUSTOM_MINE".to_owned()))
        .await
        .unwrap();
    assert_eq!(by_name, saved);

    store.runbook_delete(saved.uuid).await.unwrap();
    let gone = store
        .runbook_get(&Ident::Uuid(saved.uuid))
        .await
        .unwrap_err();
    assert!(
        matches!(
            gone,
            Error::NotFound {
                kind: Kind::Runbook,
                ..
            }
        ),
        "{gone:?}"
    );
}
