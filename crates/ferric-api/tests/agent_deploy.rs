//! The `ipxe` boot and `direct` deploy interfaces through the API and the real conductor,
//! with an agent that speaks the agent protocol (§4.1) on a real socket: lookup, token,
//! heartbeat, the deploy steps (the image written through `deploy.execute_deploy_step`),
//! cleaning through the agent, and seed 001's `DELETE /v1/nodes/{node}/provision`.
//!
//! The agent here is a recorder of the commands it receives — the conductor's half of the
//! protocol is under test. `ferric-agent`'s own tests and the lab's end-to-end suite drive the
//! real agent.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{Method, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use common::{Api, faultstring};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BootSettings, DeploySettings, DriverSettings, Drivers};
use serde_json::{Value, json};

const MAC: &str = "52:54:00:aa:bb:01";

/// A secret in the node's `instance_info` that no agent command may carry (issue 41, item 4).
const IMAGE_SERVER_PASSWORD: &str = "pa55-of-the-image-server";

/// What the recording agent was asked, and how its commands go.
#[derive(Default)]
struct AgentLog {
    commands: Vec<Value>,
    /// How many looks at a running command before it ends (`None`: never ends).
    polls_until_done: Option<usize>,
    polls: usize,
    /// The error a command ends with, if any.
    fail_with: Option<String>,
    token: String,
}

type Shared = Arc<Mutex<AgentLog>>;

fn result(id: &str, name: &str, status: &str, error: Option<&str>, written: u64) -> Value {
    json!({
        "id": id,
        "command_name": name,
        "command_status": status,
        "command_error": error.map(|message| json!({"type": "Error", "code": 500, "message": message})),
        "command_result": {"bytes_written": written, "total_bytes": 1000},
    })
}

async fn post_command(
    State(log): State<Shared>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let mut log = log.lock().unwrap();
    if query.get("agent_token") != Some(&log.token) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"faultcode": "Client", "faultstring": "bad token"})),
        );
    }
    let name = body["name"].as_str().unwrap_or("").to_owned();
    log.commands.push(body);
    log.polls = 0;
    if let Some(kind) = name
        .split_once(".get_")
        .and_then(|(_, rest)| rest.strip_suffix("_steps"))
    {
        // IPA's answer: no steps of its own beyond the generic ones, and its versions.
        return (
            StatusCode::OK,
            Json(json!({
                "id": "cmd-0", "command_name": format!("get_{kind}_steps"),
                "command_status": "SUCCEEDED", "command_error": null,
                "command_result": {
                    format!("{kind}_steps"): {"GenericHardwareManager": []},
                    "hardware_manager_version": {"generic_hardware_manager": "1.2"},
                },
            })),
        );
    }
    let status = if name.ends_with("_step") {
        "RUNNING"
    } else {
        "SUCCEEDED"
    };
    (
        StatusCode::OK,
        Json(result("cmd-1", &name, status, None, 0)),
    )
}

async fn get_command(State(log): State<Shared>, UrlPath(id): UrlPath<String>) -> Json<Value> {
    let mut log = log.lock().unwrap();
    log.polls += 1;
    let done = log.polls_until_done.is_some_and(|limit| log.polls >= limit);
    let status = match (done, &log.fail_with) {
        (false, _) => "RUNNING",
        (true, None) => "SUCCEEDED",
        (true, Some(_)) => "FAILED",
    };
    let written = if done { 1000 } else { 100 * log.polls as u64 };
    Json(result(
        &id,
        "execute_step",
        status,
        log.fail_with.as_deref().filter(|_| done),
        written,
    ))
}

/// Starts the recording agent on a free loopback port; returns its URL.
async fn start_agent(log: Shared) -> String {
    let app = Router::new()
        .route("/v1/commands/", post(post_command))
        .route("/v1/commands/{id}", get(get_command))
        .with_state(log);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

async fn api(root: &Path) -> Api {
    let drivers = Drivers::default().with_settings(DriverSettings {
        boot: BootSettings {
            http_url: Some("http://10.9.0.1:8080".into()),
            http_root: root.to_owned(),
            api_url: Some("http://10.9.0.1:6385".into()),
            ..BootSettings::default()
        },
        deploy: DeploySettings {
            command_poll_interval: Duration::from_millis(20),
            ..DeploySettings::default()
        },
        ..DriverSettings::default()
    });
    Api::with_drivers(TestDb::sqlite().await, ConductorConfig::default(), drivers).await
}

async fn send(api: &Api, method: Method, path: &str, body: Option<Value>) -> common::Answer {
    api.send_latest(method, path, body).await
}

async fn provision(api: &Api, uuid: &str, target: &str) {
    api.provision(uuid, target).await;
}

async fn state(api: &Api, uuid: &str, expected: &str) -> Value {
    api.settle().await;
    let node = send(api, Method::GET, &format!("/v1/nodes/{uuid}"), None).await;
    assert_eq!(node.body["provision_state"], expected, "{:#}", node.body);
    node.body
}

/// A manageable node on fake power with network boot and the direct deploy interface.
async fn node(api: &Api, automated_clean: bool) -> String {
    let created = send(
        api,
        Method::POST,
        "/v1/nodes",
        Some(json!({
            "driver": "fake-hardware",
            "boot_interface": "ipxe",
            "deploy_interface": "direct",
            "automated_clean": automated_clean,
            "instance_info": {
                "image_source": "http://images.test/os.raw",
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": "ab".repeat(32),
                "image_server_password": IMAGE_SERVER_PASSWORD,
            },
        })),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let port = send(
        api,
        Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": MAC})),
    )
    .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    provision(api, &uuid, "manage").await;
    state(api, &uuid, "manageable").await;
    uuid
}

/// Looks the node up as its agent does, and heartbeats from `agent_url`.
async fn agent_calls_back(api: &Api, uuid: &str, agent_url: &str, log: &Shared) {
    let found = send(
        api,
        Method::GET,
        &format!("/v1/lookup?addresses={MAC}"),
        None,
    )
    .await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    let token = found.body["config"]["agent_token"]
        .as_str()
        .unwrap()
        .to_owned();
    log.lock().unwrap().token = token.clone();
    let beat = send(
        api,
        Method::POST,
        &format!("/v1/heartbeat/{uuid}"),
        Some(json!({"callback_url": agent_url, "agent_token": token, "agent_version": "test"})),
    )
    .await;
    assert_eq!(beat.status, StatusCode::ACCEPTED, "{}", beat.body);
}

fn script(root: &Path) -> std::path::PathBuf {
    root.join("ipxe/52-54-00-aa-bb-01.ipxe")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_deploy_runs_through_the_agent_and_cleaning_wipes_through_it() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path()).await;
    let log: Shared = Arc::new(Mutex::new(AgentLog {
        polls_until_done: Some(3),
        ..AgentLog::default()
    }));
    let agent_url = start_agent(log.clone()).await;
    let uuid = node(&api, true).await;

    // provide: cleaning boots the agent, which wipes the disks' metadata.
    provision(&api, &uuid, "provide").await;
    let waiting = state(&api, &uuid, "clean wait").await;
    assert_eq!(waiting["power_state"], "power on");
    let ipxe = std::fs::read_to_string(script(root.path())).unwrap();
    assert!(ipxe.contains("ipa-api-url=http://10.9.0.1:6385"), "{ipxe}");
    agent_calls_back(&api, &uuid, &agent_url, &log).await;
    let available = state(&api, &uuid, "available").await;
    assert_eq!(available["power_state"], "power off");
    assert!(
        !script(root.path()).exists(),
        "the ramdisk boot stays after cleaning"
    );
    assert!(
        available["driver_internal_info"].get("agent_url").is_none(),
        "{available:#}"
    );
    let clean = log.lock().unwrap().commands.clone();
    assert_eq!(clean[0]["name"], "clean.get_clean_steps");
    assert_eq!(clean[1]["name"], "clean.execute_clean_step");
    assert_eq!(clean[1]["params"]["step"]["step"], "erase_devices_metadata");
    assert_eq!(clean[1]["params"]["ports"][0]["address"], MAC);
    for command in &clean {
        assert!(
            !command.to_string().contains(IMAGE_SERVER_PASSWORD),
            "cleaning sent the agent a secret: {command:#}"
        );
    }
    assert_eq!(
        clean[1]["params"]["node"]["instance_info"]["image_server_password"],
        "******"
    );
    // The versions the agent gave with its steps go back with each step, as Ironic sends them.
    assert_eq!(
        clean[1]["params"]["clean_version"],
        json!({"generic_hardware_manager": "1.2"})
    );

    // deploy: the agent writes the image; the node boots from disk.
    log.lock().unwrap().commands.clear();
    provision(&api, &uuid, "active").await;
    let waiting = state(&api, &uuid, "wait call-back").await;
    assert_eq!(waiting["deploy_step"]["step"], "deploy");
    assert!(script(root.path()).exists());
    agent_calls_back(&api, &uuid, &agent_url, &log).await;
    let active = state(&api, &uuid, "active").await;
    assert_eq!(active["power_state"], "power on");
    assert_eq!(
        active["driver_internal_info"]["deploy_progress"]["bytes_written"],
        1000
    );
    assert!(!script(root.path()).exists());
    let boot = send(
        &api,
        Method::GET,
        &format!("/v1/nodes/{uuid}/management/boot_device"),
        None,
    )
    .await;
    assert_eq!(boot.body["boot_device"], "disk", "{}", boot.body);
    assert_eq!(boot.body["persistent"], true);
    let commands = log.lock().unwrap().commands.clone();
    let names: Vec<&str> = commands
        .iter()
        .map(|command| command["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "deploy.get_deploy_steps",
            "deploy.execute_deploy_step",
            "standby.sync"
        ]
    );
    for command in &commands {
        assert!(
            !command.to_string().contains(IMAGE_SERVER_PASSWORD),
            "the deploy sent the agent a secret: {command:#}"
        );
    }
    let step = &commands[1]["params"]["step"];
    assert_eq!(step["step"], "write_image");
    let image = &step["args"]["image_info"];
    assert_eq!(image["urls"][0], "http://images.test/os.raw");
    assert_eq!(image["os_hash_algo"], "sha256");
    assert_eq!(image["disk_format"], "raw");
    assert!(
        commands[1]["params"]["node"]["driver_internal_info"]
            .get("agent_secret_token")
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_failure_fails_the_deploy_with_its_message() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path()).await;
    let log: Shared = Arc::new(Mutex::new(AgentLog {
        polls_until_done: Some(1),
        fail_with: Some("Image checksum mismatch: expected ab…, got cd…".into()),
        ..AgentLog::default()
    }));
    let agent_url = start_agent(log.clone()).await;
    let uuid = node(&api, false).await;
    provision(&api, &uuid, "provide").await;
    state(&api, &uuid, "available").await;
    provision(&api, &uuid, "active").await;
    state(&api, &uuid, "wait call-back").await;
    agent_calls_back(&api, &uuid, &agent_url, &log).await;
    let failed = state(&api, &uuid, "deploy failed").await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("write_image"), "{error}");
    assert!(error.contains("Image checksum mismatch"), "{error}");
    assert_eq!(failed["power_state"], "power off");
    assert!(!script(root.path()).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_provision_aborts_a_running_deploy_and_answers_202_403_404() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path()).await;
    // The image never finishes writing until the abort.
    let log: Shared = Arc::new(Mutex::new(AgentLog::default()));
    let agent_url = start_agent(log.clone()).await;
    let uuid = node(&api, false).await;
    let abort_path = format!("/v1/nodes/{uuid}/provision");

    // Nothing running: 404.
    let none = send(&api, Method::DELETE, &abort_path, None).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND, "{}", none.body);
    assert!(faultstring(&none.body).contains("No deployment is running"));

    provision(&api, &uuid, "provide").await;
    state(&api, &uuid, "available").await;
    provision(&api, &uuid, "active").await;
    state(&api, &uuid, "wait call-back").await;
    agent_calls_back(&api, &uuid, &agent_url, &log).await;
    // Wait until the agent is writing (the worker polls it).
    for _ in 0..500 {
        if log.lock().unwrap().polls > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let shown = send(&api, Method::GET, &format!("/v1/nodes/{uuid}"), None).await;
    assert_eq!(shown.body["provision_state"], "deploying");
    assert_eq!(shown.body["deploy_step"]["step"], "write_image");

    let accepted = send(&api, Method::DELETE, &abort_path, None).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    let failed = state(&api, &uuid, "deploy failed").await;
    assert!(
        failed["last_error"]
            .as_str()
            .unwrap()
            .contains("By request, the deployment was aborted"),
        "{failed:#}"
    );
    assert_eq!(failed["power_state"], "power off");
    assert!(!script(root.path()).exists());
    let names: Vec<String> = log
        .lock()
        .unwrap()
        .commands
        .iter()
        .map(|command| command["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.contains(&"standby.power_off".to_owned()), "{names:?}");

    // A firmware update may not be interrupted: 403, and the node keeps waiting.
    let fake = send(
        &api,
        Method::POST,
        "/v1/nodes",
        Some(json!({"driver": "fake-hardware", "driver_info": {"fake_wait": "firmware"}})),
    )
    .await;
    let fake = fake.body["uuid"].as_str().unwrap().to_owned();
    for target in ["manage", "provide"] {
        provision(&api, &fake, target).await;
        api.settle().await;
    }
    let deploy = send(
        &api,
        Method::PUT,
        &format!("/v1/nodes/{fake}/states/provision"),
        Some(json!({"target": "active", "deploy_steps": [
            {"interface": "firmware", "step": "update", "priority": 150, "args": {"settings": [
                {"component": "bios", "url": "http://images.example/bios.bin"}]}}
        ]})),
    )
    .await;
    assert_eq!(deploy.status, StatusCode::ACCEPTED, "{}", deploy.body);
    let waiting = state(&api, &fake, "wait call-back").await;
    assert_eq!(waiting["deploy_step"]["interface"], "firmware");
    let refused = send(
        &api,
        Method::DELETE,
        &format!("/v1/nodes/{fake}/provision"),
        None,
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(faultstring(&refused.body).contains("cannot be interrupted"));
    state(&api, &fake, "wait call-back").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_track_keeps_the_agent_from_cleaning_and_deploys_without_a_reboot() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path()).await;
    let log: Shared = Arc::new(Mutex::new(AgentLog {
        polls_until_done: Some(2),
        ..AgentLog::default()
    }));
    let agent_url = start_agent(log.clone()).await;
    let uuid = node(&api, true).await;
    // Fast track for this node only (the site's setting is off).
    let patched = send(
        &api,
        Method::PATCH,
        &format!("/v1/nodes/{uuid}"),
        Some(json!([{"op": "add", "path": "/driver_info/fast_track", "value": true}])),
    )
    .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);

    // No agent yet: cleaning boots one and waits for it, as without fast track.
    provision(&api, &uuid, "provide").await;
    state(&api, &uuid, "clean wait").await;
    agent_calls_back(&api, &uuid, &agent_url, &log).await;
    let available = state(&api, &uuid, "available").await;
    // The machine stays on with its agent; only the network boot is gone.
    assert_eq!(available["power_state"], "power on", "{available:#}");
    assert_eq!(available["driver_internal_info"]["agent_url"], agent_url);
    assert!(!script(root.path()).exists());
    // The agent keeps heartbeating while the node rests.
    let token = log.lock().unwrap().token.clone();
    let beat = send(
        &api,
        Method::POST,
        &format!("/v1/heartbeat/{uuid}"),
        Some(json!({"callback_url": agent_url, "agent_token": token, "agent_version": "test"})),
    )
    .await;
    assert_eq!(beat.status, StatusCode::ACCEPTED, "{}", beat.body);

    // Deploy: the live agent writes the image at once — no `wait call-back`, no heartbeat
    // needed, no network boot prepared.
    log.lock().unwrap().commands.clear();
    provision(&api, &uuid, "active").await;
    let active = state(&api, &uuid, "active").await;
    assert_eq!(active["power_state"], "power on");
    assert!(!script(root.path()).exists());
    let names: Vec<String> = log
        .lock()
        .unwrap()
        .commands
        .iter()
        .map(|command| command["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "deploy.get_deploy_steps",
            "deploy.execute_deploy_step",
            "standby.sync"
        ]
    );
    let history = send(
        &api,
        Method::GET,
        &format!("/v1/nodes/{uuid}/history"),
        None,
    )
    .await;
    assert!(
        !history.body.to_string().contains("wait call-back"),
        "the deploy waited for a callback: {}",
        history.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_fast_track_a_resting_node_refuses_heartbeats() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path()).await;
    let log: Shared = Arc::new(Mutex::new(AgentLog {
        polls_until_done: Some(1),
        ..AgentLog::default()
    }));
    let agent_url = start_agent(log.clone()).await;
    let uuid = node(&api, true).await;
    provision(&api, &uuid, "provide").await;
    state(&api, &uuid, "clean wait").await;
    agent_calls_back(&api, &uuid, &agent_url, &log).await;
    let available = state(&api, &uuid, "available").await;
    assert_eq!(available["power_state"], "power off");
    let token = log.lock().unwrap().token.clone();
    let beat = send(
        &api,
        Method::POST,
        &format!("/v1/heartbeat/{uuid}"),
        Some(json!({"callback_url": agent_url, "agent_token": token, "agent_version": "test"})),
    )
    .await;
    assert_eq!(beat.status, StatusCode::CONFLICT, "{}", beat.body);
}
