//! `/v1/deploy_templates` (1.55) and `/v1/runbooks` (1.92) through the real router, conductor
//! and fake-hardware driver on a real SQLite file: CRUD, validation, version gates, a deploy
//! that picks up the template matching the node's instance traits, and a manual clean driven
//! by a runbook.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Api, faultstring};
use serde_json::{Value, json};

fn bios_step(value: &str, priority: u32) -> Value {
    json!({
        "interface": "bios",
        "step": "apply_configuration",
        "args": {"settings": [{"name": "ProcVirtualization", "value": value}]},
        "priority": priority,
    })
}

async fn create(api: &Api, path: &str, body: Value) -> Value {
    let created = api.send_latest(Method::POST, path, Some(body)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    created.body
}

#[tokio::test]
async fn deploy_template_create_show_list_patch_delete() {
    let api = Api::new().await;
    let body = json!({
        "name": "CUSTOM_HYPERTHREADING_ON",
        "steps": [
            bios_step("Enabled", 150),
            {"interface": "deploy", "step": "deploy", "args": {"image_password": "s3cret"}, "priority": 0},
        ],
        "extra": {"team": "hpc"},
    });
    let created = api
        .send_latest(Method::POST, "/v1/deploy_templates", Some(body.clone()))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    assert_eq!(
        created.headers["location"],
        format!("http://ferric.test/v1/deploy_templates/{uuid}")
    );
    assert_eq!(created.body["steps"][0], bios_step("Enabled", 150));
    // Secrets in step arguments are masked, as Ironic masks them.
    assert_eq!(created.body["steps"][1]["args"]["image_password"], "******");
    assert!(created.body["created_at"].is_string());

    let duplicate = api
        .send_latest(Method::POST, "/v1/deploy_templates", Some(body))
        .await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT);
    assert_eq!(
        faultstring(&duplicate.body),
        "A deploy template with name CUSTOM_HYPERTHREADING_ON already exists."
    );

    for ident in [uuid.as_str(), "CUSTOM_HYPERTHREADING_ON"] {
        let shown = api
            .send_latest(Method::GET, &format!("/v1/deploy_templates/{ident}"), None)
            .await;
        assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
        assert_eq!(shown.body["uuid"], uuid.as_str());
        assert_eq!(shown.body["extra"], json!({"team": "hpc"}));
    }
    let fields = api
        .send_latest(
            Method::GET,
            &format!("/v1/deploy_templates/{uuid}?fields=name"),
            None,
        )
        .await;
    let mut keys: Vec<&str> = fields
        .body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["links", "name"]);

    create(
        &api,
        "/v1/deploy_templates",
        json!({"name": "CUSTOM_B", "steps": [bios_step("Disabled", 10)]}),
    )
    .await;
    let listed = api
        .send_latest(Method::GET, "/v1/deploy_templates?limit=1", None)
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    let items = listed.body["deploy_templates"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    let mut keys: Vec<&str> = items[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["links", "name", "uuid"]);
    let next = listed.body["next"].as_str().unwrap();
    assert!(next.contains(&format!("marker={uuid}")), "{next}");
    let detail = api
        .send_latest(
            Method::GET,
            "/v1/deploy_templates/detail?sort_key=name&sort_dir=desc",
            None,
        )
        .await;
    let names: Vec<&str> = detail.body["deploy_templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["CUSTOM_HYPERTHREADING_ON", "CUSTOM_B"]);
    assert!(detail.body["deploy_templates"][0]["steps"].is_array());
    let unsortable = api
        .send_latest(Method::GET, "/v1/deploy_templates?sort_key=steps", None)
        .await;
    assert_eq!(unsortable.status, StatusCode::BAD_REQUEST);

    let path = format!("/v1/deploy_templates/{uuid}");
    let patched = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([
                {"op": "replace", "path": "/steps/0/priority", "value": 90},
                {"op": "remove", "path": "/extra/team"},
                {"op": "replace", "path": "/name", "value": "CUSTOM_HT"},
            ])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["steps"][0]["priority"], 90);
    assert_eq!(patched.body["name"], "CUSTOM_HT");
    assert_eq!(patched.body["extra"], json!({}));
    assert!(patched.body["updated_at"].is_string());
    // The masked value shown is not what PATCH edits: the stored secret survives.
    let stored = api
        .store()
        .deploy_template_get(&ferric_model::resources::Ident::parse(&uuid))
        .await
        .unwrap();
    assert_eq!(stored.steps[1].args["image_password"], "s3cret");
    let taken = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/name", "value": "CUSTOM_B"}])),
        )
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{}", taken.body);
    let uuid_patch = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/uuid", "value": uuid}])),
        )
        .await;
    assert_eq!(uuid_patch.status, StatusCode::BAD_REQUEST);
    let emptied = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/steps", "value": []}])),
        )
        .await;
    assert_eq!(emptied.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&emptied.body).starts_with("Deploy template invalid: No steps specified"),
        "{}",
        emptied.body
    );

    let deleted = api.send_latest(Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = api.send_latest(Method::GET, &path, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&gone.body),
        format!("Deploy template {uuid} could not be found.")
    );
    let by_name = api
        .send_latest(Method::DELETE, "/v1/deploy_templates/CUSTOM_NOPE", None)
        .await;
    assert_eq!(by_name.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&by_name.body),
        "Deploy template CUSTOM_NOPE could not be found."
    );
    let bad_ident = api
        .send_latest(Method::GET, "/v1/deploy_templates/bad!name", None)
        .await;
    assert_eq!(bad_ident.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&bad_ident.body),
        "Expected a logical name or UUID but received bad!name."
    );
}

#[tokio::test]
async fn deploy_template_bodies_are_validated() {
    let api = Api::new().await;
    let cases = [
        (
            json!({"name": "NOT_A_TRAIT", "steps": [bios_step("x", 1)]}),
            "Schema error for name",
        ),
        (
            json!({"steps": [bios_step("x", 1)]}),
            "Mandatory field missing: 'name'",
        ),
        (
            json!({"name": "CUSTOM_X"}),
            "Mandatory field missing: 'steps'",
        ),
        (
            json!({"name": "CUSTOM_X", "steps": []}),
            "No steps specified",
        ),
        (
            json!({"name": "CUSTOM_X", "steps": [bios_step("a", 1), bios_step("b", 2)]}),
            "Duplicates: interface: bios, step: apply_configuration",
        ),
        (
            json!({"name": "CUSTOM_X", "steps": [{"interface": "boot", "step": "s", "args": {}, "priority": 1}]}),
            "use one of bios, deploy, firmware, management, power, raid, vendor",
        ),
        (
            json!({"name": "CUSTOM_X", "steps": [{"interface": "bios", "step": "s", "args": {}, "priority": -5}]}),
            "non-negative integer",
        ),
        (
            json!({"name": "CUSTOM_X", "steps": [{"interface": "bios", "step": "s", "priority": 5}]}),
            "lacks 'args'",
        ),
        (
            json!({"name": "CUSTOM_X", "steps": [bios_step("x", 1)], "owner": "p1"}),
            "'owner' is not a deploy template field",
        ),
    ];
    for (body, needle) in cases {
        let answer = api
            .send_latest(Method::POST, "/v1/deploy_templates", Some(body.clone()))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            answer.body
        );
        let message = faultstring(&answer.body);
        assert!(message.contains(needle), "{body}: {message}");
    }
    // A priority given as a string of digits is accepted, as Ironic's schema allows.
    let created = create(
        &api,
        "/v1/deploy_templates",
        json!({"name": "HW_CPU_X86_VMX", "steps": [
            {"interface": "bios", "step": "factory_reset", "args": {}, "priority": "20"}]}),
    )
    .await;
    assert_eq!(created["steps"][0]["priority"], 20);
}

#[tokio::test]
async fn older_versions_do_not_see_templates_or_runbooks() {
    let api = Api::new().await;
    for (collection, since) in [("deploy_templates", 55), ("runbooks", 92)] {
        let path = format!("/v1/{collection}");
        let get = api.send_at(since - 1, Method::GET, &path, None).await;
        assert_eq!(get.status, StatusCode::NOT_FOUND, "{path}");
        let post = api
            .send_at(since - 1, Method::POST, &path, Some(json!({})))
            .await;
        assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert!(
            faultstring(&post.body).contains(&format!("need API version 1.{since}")),
            "{}",
            post.body
        );
        let shown = api.send_at(since, Method::GET, &path, None).await;
        assert_eq!(shown.status, StatusCode::OK, "{path}");

        let below = api.send_at(since - 1, Method::GET, "/v1", None).await;
        assert!(below.body.get(collection).is_none(), "{}", below.body);
        let at = api.send_at(since, Method::GET, "/v1", None).await;
        assert_eq!(
            at.body[collection][0]["href"],
            format!("http://ferric.test/v1/{collection}/")
        );
    }
}

#[tokio::test]
async fn runbooks_crud_and_ownership_rules() {
    let api = Api::new().await;
    let body = json!({
        "name": "CUSTOM_WIPE",
        "steps": [
            {"interface": "deploy", "step": "erase_devices_metadata", "order": 2},
            {"interface": "bios", "step": "factory_reset", "args": {}, "order": 1},
        ],
        "owner": "p1",
        "disable_ramdisk": false,
    });
    let created = create(&api, "/v1/runbooks", body.clone()).await;
    let uuid = created["uuid"].as_str().unwrap().to_owned();
    assert_eq!(created["owner"], "p1");
    assert_eq!(created["public"], false);
    assert_eq!(created["steps"][0]["order"], 2);
    assert_eq!(created["steps"][0]["args"], json!({}));
    let duplicate = api
        .send_latest(Method::POST, "/v1/runbooks", Some(body))
        .await;
    assert_eq!(duplicate.status, StatusCode::CONFLICT);
    assert_eq!(
        faultstring(&duplicate.body),
        "A runbook with name CUSTOM_WIPE already exists."
    );
    let public_owned = api
        .send_latest(
            Method::POST,
            "/v1/runbooks",
            Some(json!({"name": "CUSTOM_P", "steps": [{"interface": "deploy", "step": "x", "order": 1}],
                        "public": true, "owner": "p1"})),
        )
        .await;
    assert_eq!(public_owned.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&public_owned.body).contains("There cannot be an owner for a public runbook")
    );
    let no_order = api
        .send_latest(
            Method::POST,
            "/v1/runbooks",
            Some(json!({"name": "CUSTOM_P", "steps": [{"interface": "deploy", "step": "x", "priority": 1}]})),
        )
        .await;
    assert_eq!(no_order.status, StatusCode::BAD_REQUEST);

    let path = format!("/v1/runbooks/{uuid}");
    let owner_on_public = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([
                {"op": "replace", "path": "/public", "value": true},
                {"op": "replace", "path": "/owner", "value": "p2"},
            ])),
        )
        .await;
    assert_eq!(owner_on_public.status, StatusCode::BAD_REQUEST);
    let made_public = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([{"op": "replace", "path": "/public", "value": true}])),
        )
        .await;
    assert_eq!(made_public.status, StatusCode::OK, "{}", made_public.body);
    assert_eq!(made_public.body["public"], true);
    assert_eq!(made_public.body["owner"], Value::Null);
    let back = api
        .send_latest(
            Method::PATCH,
            &path,
            Some(json!([
                {"op": "replace", "path": "/public", "value": false},
                {"op": "replace", "path": "/owner", "value": "p2"},
                {"op": "replace", "path": "/steps/1/order", "value": 5},
            ])),
        )
        .await;
    assert_eq!(back.status, StatusCode::OK, "{}", back.body);
    assert_eq!(back.body["owner"], "p2");
    assert_eq!(back.body["steps"][1]["order"], 5);

    let listed = api
        .send_latest(Method::GET, "/v1/runbooks?fields=name,owner", None)
        .await;
    assert_eq!(listed.body["runbooks"][0]["owner"], "p2", "{}", listed.body);
    let shown = api
        .send_latest(Method::GET, "/v1/runbooks/CUSTOM_WIPE", None)
        .await;
    assert_eq!(shown.body["uuid"], uuid.as_str());
    let deleted = api.send_latest(Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let gone = api.send_latest(Method::GET, &path, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&gone.body),
        format!("Runbook {uuid} could not be found.")
    );
}

async fn node(api: &Api, uuid: &str) -> Value {
    let shown = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.body);
    shown.body
}

/// The fake BIOS's `ProcVirtualization`, or null while it does not list it: like Ironic's, it
/// has no settings until a step gives it some, and none after a factory reset.
async fn bios_value(api: &Api, uuid: &str) -> Value {
    let answer = api
        .send_latest(
            Method::GET,
            &format!("/v1/nodes/{uuid}/bios/ProcVirtualization"),
            None,
        )
        .await;
    if answer.status == StatusCode::NOT_FOUND {
        return Value::Null;
    }
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body["ProcVirtualization"]["value"].clone()
}

/// A fake-hardware node, managed (its BIOS settings read) and, with `available`, provided.
async fn fake_node(api: &Api, available: bool) -> String {
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware"})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    api.provision(&uuid, "manage").await;
    api.settle().await;
    if available {
        api.provision(&uuid, "provide").await;
        api.settle().await;
    }
    uuid
}

async fn provision(api: &Api, uuid: &str, body: Value) -> common::Answer {
    api.send_latest(
        Method::PUT,
        &format!("/v1/nodes/{uuid}/states/provision"),
        Some(body),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_runs_the_steps_of_templates_matching_instance_traits() {
    let api = Api::new().await;
    create(
        &api,
        "/v1/deploy_templates",
        json!({"name": "CUSTOM_VT_OFF", "steps": [bios_step("Disabled", 150)]}),
    )
    .await;
    create(
        &api,
        "/v1/deploy_templates",
        json!({"name": "CUSTOM_UNUSED", "steps": [bios_step("Enabled", 150)]}),
    )
    .await;
    let uuid = fake_node(&api, true).await;
    assert_eq!(bios_value(&api, &uuid).await, Value::Null);
    let patched = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(
                json!([{"op": "add", "path": "/instance_info/traits", "value": ["CUSTOM_VT_OFF"]}]),
            ),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);

    let accepted = provision(&api, &uuid, json!({"target": "active"})).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    api.settle().await;
    let deployed = node(&api, &uuid).await;
    assert_eq!(deployed["provision_state"], "active", "{deployed:#}");
    // The template's BIOS step ran during the deployment: the setting changed.
    assert_eq!(bios_value(&api, &uuid).await, "Disabled");

    // A template step the driver does not offer is refused before anything starts.
    api.provision(&uuid, "deleted").await;
    api.settle().await;
    assert_eq!(node(&api, &uuid).await["provision_state"], "available");
    create(
        &api,
        "/v1/deploy_templates",
        json!({"name": "CUSTOM_BROKEN", "steps": [
            {"interface": "management", "step": "no_such_step", "args": {}, "priority": 10}]}),
    )
    .await;
    // Undeploying cleared instance_info, as Ironic does: the traits are set again.
    let patched = api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "add", "path": "/instance_info/traits",
                         "value": ["CUSTOM_BROKEN", "CUSTOM_VT_OFF"]}])),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let refused = provision(&api, &uuid, json!({"target": "active"})).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    let message = faultstring(&refused.body);
    assert!(
        message.starts_with(
            "Validation of deploy steps from deploy templates matching this node's instance \
             traits failed. Matching deploy templates: CUSTOM_BROKEN,CUSTOM_VT_OFF. Errors: "
        ) && message.contains("management.no_such_step"),
        "{message}"
    );
    assert_eq!(node(&api, &uuid).await["provision_state"], "available");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_clean_runs_a_runbook_approved_by_a_node_trait() {
    let api = Api::new().await;
    create(
        &api,
        "/v1/runbooks",
        json!({"name": "CUSTOM_VT_RESET", "steps": [
            // Run in `order`: disable first, then put back the factory default (Enabled).
            {"interface": "bios", "step": "factory_reset", "order": 2},
            {"interface": "bios", "step": "apply_configuration", "order": 1,
             "args": {"settings": [{"name": "ProcVirtualization", "value": "Disabled"}]}},
        ]}),
    )
    .await;
    create(
        &api,
        "/v1/runbooks",
        json!({"name": "CUSTOM_VT_OFF", "steps": [
            {"interface": "bios", "step": "apply_configuration", "order": 0,
             "args": {"settings": [{"name": "ProcVirtualization", "value": "Disabled"}]}},
        ]}),
    )
    .await;
    let uuid = fake_node(&api, false).await;

    let not_approved = provision(
        &api,
        &uuid,
        json!({"target": "clean", "runbook": "CUSTOM_VT_OFF"}),
    )
    .await;
    assert_eq!(not_approved.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        faultstring(&not_approved.body),
        format!(
            "This runbook has not been approved for use on this node {uuid}. Please ask an \
             administrator to add it to your node traits."
        )
    );
    let traits = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/traits"),
            Some(json!({"traits": ["CUSTOM_VT_OFF", "CUSTOM_VT_RESET"]})),
        )
        .await;
    assert_eq!(traits.status, StatusCode::NO_CONTENT, "{}", traits.body);

    let refusals = [
        (
            json!({"target": "clean", "runbook": "CUSTOM_VT_OFF", "clean_steps": []}),
            StatusCode::BAD_REQUEST,
            "Please provide either \"clean_steps\" or a runbook, but not both.",
        ),
        (
            json!({"target": "provide", "runbook": "CUSTOM_VT_OFF"}),
            StatusCode::BAD_REQUEST,
            "\"runbooks\" is only valid when setting target provision state to any of ['clean', 'service']",
        ),
        (
            json!({"target": "clean", "runbook": "CUSTOM_MISSING"}),
            StatusCode::NOT_FOUND,
            "Runbook CUSTOM_MISSING could not be found.",
        ),
    ];
    for (body, status, message) in refusals {
        let answer = provision(&api, &uuid, body.clone()).await;
        assert_eq!(answer.status, status, "{body}: {}", answer.body);
        assert_eq!(faultstring(&answer.body), message, "{body}");
    }
    let too_old = api
        .send_at(
            91,
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "clean", "runbook": "CUSTOM_VT_OFF"})),
        )
        .await;
    assert_eq!(
        too_old.status,
        StatusCode::NOT_ACCEPTABLE,
        "{}",
        too_old.body
    );

    let accepted = provision(
        &api,
        &uuid,
        json!({"target": "clean", "runbook": "CUSTOM_VT_OFF"}),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    api.settle().await;
    let cleaned = node(&api, &uuid).await;
    assert_eq!(cleaned["provision_state"], "manageable", "{cleaned:#}");
    assert_eq!(bios_value(&api, &uuid).await, "Disabled");

    // By UUID, steps in `order`: apply (Disabled) then factory reset (the fake BIOS empty).
    let runbook = api
        .send_latest(Method::GET, "/v1/runbooks/CUSTOM_VT_RESET", None)
        .await;
    let runbook_uuid = runbook.body["uuid"].as_str().unwrap();
    let accepted = provision(
        &api,
        &uuid,
        json!({"target": "clean", "runbook": runbook_uuid}),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    api.settle().await;
    assert_eq!(node(&api, &uuid).await["provision_state"], "manageable");
    assert_eq!(bios_value(&api, &uuid).await, Value::Null);
}
