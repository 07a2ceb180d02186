//! Agent protocol parity with Ironic (issue 22) through the API and the real conductor, with
//! an agent that answers as ironic-python-agent 13 does (shapes from its `extensions/clean.py`,
//! `service.py`, `rescue.py`, `hardware.py`, `base.py`): the steps it offers are read before
//! a flow runs, cached, merged with the driver's and run; its hardware manager versions go
//! back with every step and a `CLEAN_VERSION_MISMATCH` makes the conductor read them again;
//! rescue hands it the hashed password; its self-signed certificate is trusted for its node;
//! its logs are stored when a flow fails.
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
use base64::Engine;
use common::Api;
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BootSettings, DeploySettings, DriverSettings, Drivers, LogsCollect};
use serde_json::{Value, json};

const MAC: &str = "52:54:00:aa:bb:02";

/// The fake IPA: its steps and versions, and what it was asked.
struct Ipa {
    token: String,
    versions: Value,
    /// `{kind: {manager: [steps]}}` answered by `<kind>.get_<kind>_steps`.
    steps: Value,
    /// After this many `get_*_steps`, the versions change (an agent upgraded under a flow).
    upgrade_after_gets: Option<usize>,
    /// Always refuse steps with a version mismatch (a broken agent).
    always_mismatch: bool,
    /// Fail every `execute_*_step` with this message.
    fail_steps: Option<String>,
    gets: usize,
    commands: Vec<Value>,
    /// Final results of asynchronous commands by id.
    results: Vec<Value>,
}

type Shared = Arc<Mutex<Ipa>>;

fn ipa(steps: Value) -> Shared {
    Arc::new(Mutex::new(Ipa {
        token: String::new(),
        versions: json!({"generic_hardware_manager": "1.2"}),
        steps,
        upgrade_after_gets: None,
        always_mismatch: false,
        fail_steps: None,
        gets: 0,
        commands: Vec::new(),
        results: Vec::new(),
    }))
}

/// IPA 13's generic hardware manager (abridged) plus a site's own manager.
fn generic_steps() -> Value {
    let step = |name: &str, priority: u32, interface: &str| {
        json!({"step": name, "priority": priority, "interface": interface,
               "reboot_requested": false, "abortable": true})
    };
    json!({
        "clean": {
            "GenericHardwareManager": [
                step("erase_devices", 10, "deploy"),
                step("erase_devices_metadata", 99, "deploy"),
                step("erase_devices_express", 0, "deploy"),
                step("burnin_cpu", 0, "deploy"),
                step("delete_configuration", 0, "raid"),
            ],
            "SiteHardwareManager": [
                {"step": "flash_nic", "priority": 50, "interface": "deploy",
                 "reboot_requested": false, "abortable": false,
                 "argsinfo": {"url": {"description": "the firmware", "required": false}}},
                {"step": "set_bmc_user", "priority": 0, "interface": "deploy",
                 "reboot_requested": false, "abortable": true,
                 "argsinfo": {"user": {"description": "the BMC user", "required": true}}},
            ],
        },
        "deploy": {
            "GenericHardwareManager": [
                {"step": "erase_devices_metadata", "priority": 0, "interface": "deploy",
                 "reboot_requested": false},
                {"step": "write_image", "priority": 0, "interface": "deploy",
                 "reboot_requested": false},
                {"step": "inject_files", "priority": 0, "interface": "deploy",
                 "reboot_requested": false,
                 "argsinfo": {"files": {"description": "files", "required": true}}},
            ],
            "SiteHardwareManager": [
                {"step": "tune_bios", "priority": 70, "interface": "deploy",
                 "reboot_requested": false},
            ],
        },
        "service": {
            "GenericHardwareManager": [
                step("burnin_memory", 0, "deploy"),
                step("delete_configuration", 0, "raid"),
            ],
        },
    })
}

fn answer(id: &str, name: &str, status: &str, error: Value, result: Value) -> Json<Value> {
    Json(json!({
        "id": id, "command_name": name, "command_status": status,
        "command_error": error, "command_result": result,
    }))
}

async fn post_command(
    State(ipa): State<Shared>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let mut ipa = ipa.lock().unwrap();
    if query.get("agent_token") != Some(&ipa.token) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"faultcode": "Client", "faultstring": "Unauthorized"})),
        );
    }
    let name = body["name"].as_str().unwrap().to_owned();
    let params = body["params"].clone();
    ipa.commands.push(body);
    let (extension, command) = name.split_once('.').unwrap();
    let id = format!("cmd-{}", ipa.commands.len());
    if let Some(kind) = command
        .strip_prefix("get_")
        .and_then(|rest| rest.strip_suffix("_steps"))
    {
        let result = json!({
            format!("{kind}_steps"): ipa.steps[kind].clone(),
            "hardware_manager_version": ipa.versions.clone(),
        });
        ipa.gets += 1;
        if ipa.upgrade_after_gets == Some(ipa.gets) {
            ipa.versions = json!({"generic_hardware_manager": "1.3"});
        }
        return (
            StatusCode::OK,
            answer(&id, command, "SUCCEEDED", Value::Null, result),
        );
    }
    if let Some(kind) = command
        .strip_prefix("execute_")
        .and_then(|rest| rest.strip_suffix("_step"))
    {
        // As IPA's check_versions: none given is not checked; any other must be equal.
        let given = &params[format!("{kind}_version")];
        let mismatch = ipa.always_mismatch || (!given.is_null() && *given != ipa.versions);
        let final_result = if mismatch {
            answer(
                &id,
                command,
                "CLEAN_VERSION_MISMATCH",
                json!({"type": "VersionMismatch", "code": 409,
                       "message": "Hardware managers version mismatch, reload agent with correct version",
                       "details": format!("Current versions: {}, versions used by ironic: {given}", ipa.versions)}),
                Value::Null,
            )
        } else if let Some(message) = ipa.fail_steps.clone() {
            answer(
                &id,
                command,
                "FAILED",
                json!({"type": "CleaningError", "code": 500, "message": "Clean step failed",
                       "details": message}),
                Value::Null,
            )
        } else {
            answer(
                &id,
                command,
                "SUCCEEDED",
                Value::Null,
                json!({format!("{kind}_result"): null, format!("{kind}_step"): params["step"]}),
            )
        };
        ipa.results.push(final_result.0);
        return (
            StatusCode::OK,
            answer(&id, command, "RUNNING", Value::Null, Value::Null),
        );
    }
    let result = match (extension, command) {
        ("log", "collect_system_logs") => json!({
            "system_logs": base64::engine::general_purpose::STANDARD.encode(b"a tar.gz of logs"),
        }),
        ("rescue", "finalize_rescue") => Value::Null,
        _ => json!({"result": format!("{command}: done")}),
    };
    (
        StatusCode::OK,
        answer(&id, command, "SUCCEEDED", Value::Null, result),
    )
}

async fn get_command(State(ipa): State<Shared>, UrlPath(id): UrlPath<String>) -> Json<Value> {
    let ipa = ipa.lock().unwrap();
    Json(
        ipa.results
            .iter()
            .rev()
            .find(|result| result["id"] == id.as_str())
            .cloned()
            .unwrap_or_else(|| json!({"command_status": "RUNNING", "id": id})),
    )
}

fn router(ipa: Shared) -> Router {
    Router::new()
        .route("/v1/commands/", post(post_command))
        .route("/v1/commands/{id}", get(get_command))
        .with_state(ipa)
}

/// The fake IPA on plain HTTP; returns its URL.
async fn start_ipa(ipa: Shared) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router(ipa)).await.unwrap() });
    format!("http://{address}")
}

/// The fake IPA over HTTPS with a self-signed certificate for 127.0.0.1, as IPA's auto-TLS
/// makes one; returns its URL and the certificate's PEM.
async fn start_https_ipa(ipa: Shared) -> (String, String) {
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let key =
        rustls::pki_types::PrivateKeyDer::try_from(certified.key_pair.serialize_der()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = router(ipa);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                if let Ok(stream) = acceptor.accept(stream).await {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app))
                        .await;
                }
            });
        }
    });
    (format!("https://{address}"), certified.cert.pem())
}

fn drivers(root: &Path, logs: LogsCollect) -> Drivers {
    Drivers::default().with_settings(DriverSettings {
        boot: BootSettings {
            http_url: Some("http://10.9.0.1:8080".into()),
            http_root: root.to_owned(),
            api_url: Some("http://10.9.0.1:6385".into()),
            ..BootSettings::default()
        },
        deploy: DeploySettings {
            command_poll_interval: Duration::from_millis(20),
            logs_collect: logs,
            logs_local_path: root.join("deploy-logs"),
            ..DeploySettings::default()
        },
        ..DriverSettings::default()
    })
}

async fn api(root: &Path, config: ConductorConfig, logs: LogsCollect) -> Api {
    Api::with_drivers(TestDb::sqlite().await, config, drivers(root, logs)).await
}

async fn state(api: &Api, uuid: &str, expected: &str) -> Value {
    api.settle().await;
    let node = api
        .send_latest(Method::GET, &format!("/v1/nodes/{uuid}"), None)
        .await;
    assert_eq!(node.body["provision_state"], expected, "{:#}", node.body);
    node.body
}

/// A manageable node on fake power with network boot, the direct deploy interface and
/// rescue through the agent.
async fn node(api: &Api, automated_clean: bool) -> String {
    let created = api
        .send_latest(
            Method::POST,
            "/v1/nodes",
            Some(json!({
                "driver": "fake-hardware",
                "boot_interface": "ipxe",
                "deploy_interface": "direct",
                "rescue_interface": "agent",
                "automated_clean": automated_clean,
                "instance_info": {
                    "image_source": "http://images.test/os.raw",
                    "image_os_hash_algo": "sha256",
                    "image_os_hash_value": "ab".repeat(32),
                },
            })),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let uuid = created.body["uuid"].as_str().unwrap().to_owned();
    let port = api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": MAC})),
        )
        .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    api.provision(&uuid, "manage").await;
    state(api, &uuid, "manageable").await;
    uuid
}

/// Looks the node up as IPA does and heartbeats from `agent_url` (with its certificate).
async fn calls_back(
    api: &Api,
    uuid: &str,
    agent_url: &str,
    certificate: Option<&str>,
    ipa: &Shared,
) -> common::Answer {
    let found = api
        .send_latest(Method::GET, &format!("/v1/lookup?addresses={MAC}"), None)
        .await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    if let Some(token) = found.body["config"]["agent_token"].as_str()
        && !token.starts_with('*')
    {
        ipa.lock().unwrap().token = token.to_owned();
    }
    let token = ipa.lock().unwrap().token.clone();
    let mut beat = json!({"callback_url": agent_url, "agent_token": token,
                          "agent_version": "13.0.0"});
    if let Some(pem) = certificate {
        beat["agent_verify_ca"] = pem.into();
    }
    api.send_latest(Method::POST, &format!("/v1/heartbeat/{uuid}"), Some(beat))
        .await
}

fn names(ipa: &Shared) -> Vec<String> {
    ipa.lock()
        .unwrap()
        .commands
        .iter()
        .map(|command| command["name"].as_str().unwrap().to_owned())
        .collect()
}

fn steps_run(ipa: &Shared) -> Vec<String> {
    ipa.lock()
        .unwrap()
        .commands
        .iter()
        .filter(|command| command["name"].as_str().unwrap().contains(".execute_"))
        .map(|command| {
            command["params"]["step"]["step"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

async fn manual(api: &Api, uuid: &str, verb: &str, steps: Value) -> common::Answer {
    let key = if verb == "clean" {
        "clean_steps"
    } else {
        "service_steps"
    };
    api.send_latest(
        Method::PUT,
        &format!("/v1/nodes/{uuid}/states/provision"),
        Some(json!({"target": verb, key: steps})),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipa_steps_are_read_merged_by_priority_and_their_versions_sent_back() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path(), ConductorConfig::default(), LogsCollect::Never).await;
    let ipa = ipa(generic_steps());
    let url = start_ipa(ipa.clone()).await;
    let uuid = node(&api, true).await;

    // Automated cleaning: the agent's priority-50 step runs after the driver's metadata
    // erase (99); IPA's erase_devices (10) stays off as the site's priority (0) says.
    api.provision(&uuid, "provide").await;
    state(&api, &uuid, "clean wait").await;
    let beat = calls_back(&api, &uuid, &url, None, &ipa).await;
    assert_eq!(beat.status, StatusCode::ACCEPTED, "{}", beat.body);
    let available = state(&api, &uuid, "available").await;
    assert_eq!(available["last_error"], Value::Null);
    assert_eq!(names(&ipa)[0], "clean.get_clean_steps");
    assert_eq!(steps_run(&ipa), ["erase_devices_metadata", "flash_nic"]);
    let commands = ipa.lock().unwrap().commands.clone();
    assert_eq!(
        commands[0]["params"]["ports"][0]["address"], MAC,
        "get_clean_steps gets the node and its ports"
    );
    assert_eq!(commands[0]["params"]["node"]["uuid"], uuid.as_str());
    for step in &commands[1..] {
        assert_eq!(
            step["params"]["clean_version"],
            json!({"generic_hardware_manager": "1.2"})
        );
    }
    // The erase options travel where IPA's hardware.py reads them, with Ironic's defaults.
    let internal = &commands[1]["params"]["node"]["driver_internal_info"];
    for (key, value) in [
        ("agent_continue_if_secure_erase_failed", json!(false)),
        ("agent_continue_if_ata_erase_failed", json!(false)),
        ("agent_enable_ata_secure_erase", json!(true)),
        ("agent_enable_nvme_secure_erase", json!(true)),
        ("disk_erasure_concurrency", json!(4)),
    ] {
        assert_eq!(internal[key], value, "{key} in {internal}");
    }
    assert!(
        internal.get("agent_secret_token").is_none(),
        "the token never goes into the command"
    );
    // The cache goes with the agent.
    assert!(
        available["driver_internal_info"]
            .get("agent_cached_clean_steps")
            .is_none()
    );

    // Deployment: the agent's tune_bios (70) runs between write_image (80) and
    // prepare_instance_boot (60); the driver's write_image shadows the agent's.
    ipa.lock().unwrap().commands.clear();
    api.provision(&uuid, "active").await;
    state(&api, &uuid, "wait call-back").await;
    calls_back(&api, &uuid, &url, None, &ipa).await;
    let active = state(&api, &uuid, "active").await;
    assert_eq!(active["last_error"], Value::Null);
    assert_eq!(
        names(&ipa),
        [
            "deploy.get_deploy_steps",
            "deploy.execute_deploy_step",
            "deploy.execute_deploy_step",
            "standby.sync"
        ]
    );
    assert_eq!(steps_run(&ipa), ["write_image", "tune_bios"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_mismatch_rereads_the_steps_and_restarts_and_a_broken_agent_is_named() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path(), ConductorConfig::default(), LogsCollect::Never).await;
    let ipa = ipa(generic_steps());
    // The agent's hardware managers change right after it listed its steps.
    ipa.lock().unwrap().upgrade_after_gets = Some(1);
    let url = start_ipa(ipa.clone()).await;
    let uuid = node(&api, true).await;
    api.provision(&uuid, "provide").await;
    state(&api, &uuid, "clean wait").await;
    calls_back(&api, &uuid, &url, None, &ipa).await;
    let available = state(&api, &uuid, "available").await;
    assert_eq!(available["last_error"], Value::Null);
    assert_eq!(
        names(&ipa),
        [
            "clean.get_clean_steps",
            "clean.execute_clean_step",
            "clean.get_clean_steps",
            "clean.execute_clean_step",
            "clean.execute_clean_step"
        ]
    );
    let commands = ipa.lock().unwrap().commands.clone();
    assert_eq!(
        commands[3]["params"]["clean_version"],
        json!({"generic_hardware_manager": "1.3"})
    );

    // An agent that refuses every step with the versions it reports cannot be driven.
    let root = tempfile::tempdir().unwrap();
    let api = self::api(root.path(), ConductorConfig::default(), LogsCollect::Never).await;
    let broken = self::ipa(generic_steps());
    broken.lock().unwrap().always_mismatch = true;
    let url = start_ipa(broken.clone()).await;
    let uuid = node(&api, true).await;
    api.provision(&uuid, "provide").await;
    state(&api, &uuid, "clean wait").await;
    calls_back(&api, &uuid, &url, None, &broken).await;
    let failed = state(&api, &uuid, "clean failed").await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("reports the same versions"), "{error}");
    assert!(error.contains("versions used by ironic"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_steps_serve_manual_cleaning_and_steps_that_do_not_fit_are_named() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path(), ConductorConfig::default(), LogsCollect::Never).await;
    let ipa = ipa(generic_steps());
    let url = start_ipa(ipa.clone()).await;
    let uuid = node(&api, false).await;

    // A step only the agent offers is taken before the agent is up, and run once it is.
    let accepted = manual(
        &api,
        &uuid,
        "clean",
        json!([{"interface": "deploy", "step": "burnin_cpu"},
               {"interface": "deploy", "step": "set_bmc_user", "args": {"user": "ops"}}]),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    state(&api, &uuid, "clean wait").await;
    calls_back(&api, &uuid, &url, None, &ipa).await;
    state(&api, &uuid, "manageable").await;
    assert_eq!(steps_run(&ipa), ["burnin_cpu", "set_bmc_user"]);
    let commands = ipa.lock().unwrap().commands.clone();
    assert_eq!(commands[2]["params"]["step"]["args"]["user"], "ops");

    // A step the agent does not offer, or without its required argument: named.
    for (steps, says) in [
        (
            json!([{"interface": "deploy", "step": "no_such_step"}]),
            "\"deploy.no_such_step\" is not supported by the node's driver or its agent",
        ),
        (
            json!([{"interface": "deploy", "step": "set_bmc_user"}]),
            "needs the argument user",
        ),
    ] {
        let accepted = manual(&api, &uuid, "clean", steps).await;
        assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
        state(&api, &uuid, "clean wait").await;
        calls_back(&api, &uuid, &url, None, &ipa).await;
        let failed = state(&api, &uuid, "clean failed").await;
        let error = failed["last_error"].as_str().unwrap();
        assert!(error.contains(says), "{error}");
        for target in ["manage"] {
            api.provision(&uuid, target).await;
        }
        state(&api, &uuid, "manageable").await;
        let cleared = api
            .send_latest(
                Method::PATCH,
                &format!("/v1/nodes/{uuid}"),
                Some(json!([{"op": "replace", "path": "/maintenance", "value": false}])),
            )
            .await;
        assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.body);
    }

    // An agent whose answer Ferric cannot use: named in last_error.
    ipa.lock().unwrap().steps["clean"] =
        json!({"BadManager": [{"step": "x", "interface": "deploy"}]});
    manual(
        &api,
        &uuid,
        "clean",
        json!([{"interface": "deploy", "step": "burnin_cpu"}]),
    )
    .await;
    state(&api, &uuid, "clean wait").await;
    calls_back(&api, &uuid, &url, None, &ipa).await;
    let failed = state(&api, &uuid, "clean failed").await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("cannot use the clean steps"), "{error}");
    assert!(error.contains("without priority"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_steps_and_rescue_go_through_the_agent_and_failures_keep_its_logs() {
    let root = tempfile::tempdir().unwrap();
    let api = api(
        root.path(),
        ConductorConfig::default(),
        LogsCollect::OnFailure,
    )
    .await;
    let ipa = ipa(generic_steps());
    let url = start_ipa(ipa.clone()).await;
    let uuid = node(&api, false).await;
    api.provision(&uuid, "provide").await;
    state(&api, &uuid, "available").await;
    api.provision(&uuid, "active").await;
    state(&api, &uuid, "wait call-back").await;
    calls_back(&api, &uuid, &url, None, &ipa).await;
    state(&api, &uuid, "active").await;

    // Servicing with a step only the agent offers.
    ipa.lock().unwrap().commands.clear();
    let accepted = manual(
        &api,
        &uuid,
        "service",
        json!([{"interface": "deploy", "step": "burnin_memory"}]),
    )
    .await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.body);
    state(&api, &uuid, "service wait").await;
    calls_back(&api, &uuid, &url, None, &ipa).await;
    state(&api, &uuid, "active").await;
    assert_eq!(
        names(&ipa),
        ["service.get_service_steps", "service.execute_service_step"]
    );
    let commands = ipa.lock().unwrap().commands.clone();
    assert_eq!(
        commands[1]["params"]["service_version"],
        json!({"generic_hardware_manager": "1.2"})
    );

    // Rescue: the agent gets the SHA-256 crypt of the password, marked as hashed.
    ipa.lock().unwrap().commands.clear();
    let rescue = api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "rescue", "rescue_password": "s3cret"})),
        )
        .await;
    assert_eq!(rescue.status, StatusCode::ACCEPTED, "{}", rescue.body);
    state(&api, &uuid, "rescue wait").await;
    calls_back(&api, &uuid, &url, None, &ipa).await;
    let rescued = state(&api, &uuid, "rescue").await;
    let commands = ipa.lock().unwrap().commands.clone();
    assert_eq!(commands[0]["name"], "rescue.finalize_rescue");
    assert_eq!(commands[0]["params"]["hashed"], true);
    let hashed = commands[0]["params"]["rescue_password"].as_str().unwrap();
    assert!(hashed.starts_with("$5$"), "{hashed}");
    assert!(rescued["instance_info"].get("rescue_password").is_none());
    api.provision(&uuid, "unrescue").await;
    state(&api, &uuid, "active").await;

    // A failing service step: the agent's logs are stored under Ironic's name and named.
    ipa.lock().unwrap().fail_steps = Some("memory test found errors".into());
    manual(
        &api,
        &uuid,
        "service",
        json!([{"interface": "deploy", "step": "burnin_memory"}]),
    )
    .await;
    state(&api, &uuid, "service wait").await;
    calls_back(&api, &uuid, &url, None, &ipa).await;
    let failed = state(&api, &uuid, "service failed").await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("memory test found errors"), "{error}");
    assert!(error.contains("deploy-logs"), "{error}");
    let stored: Vec<_> = std::fs::read_dir(root.path().join("deploy-logs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(stored[0].starts_with(&uuid), "{stored:?}");
    assert!(stored[0].contains("_servicing_"), "{stored:?}");
    assert!(stored[0].ends_with(".tar.gz"), "{stored:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_agent_is_trusted_by_the_certificate_it_heartbeats_for_its_node_only() {
    let root = tempfile::tempdir().unwrap();
    let config = ConductorConfig {
        agent_require_tls: true,
        ..ConductorConfig::default()
    };
    let api = api(root.path(), config, LogsCollect::Never).await;
    let ipa = ipa(generic_steps());
    let (url, certificate) = start_https_ipa(ipa.clone()).await;
    let uuid = node(&api, true).await;
    api.provision(&uuid, "provide").await;
    state(&api, &uuid, "clean wait").await;

    // agent_require_tls: a plain callback URL is refused, as Ironic's require_tls.
    let plain = calls_back(&api, &uuid, "http://127.0.0.1:9", None, &ipa).await;
    assert_eq!(plain.status, StatusCode::BAD_REQUEST, "{}", plain.body);
    assert!(plain.body.to_string().contains("https"), "{}", plain.body);
    // A certificate that is not one: refused, named.
    let garbage = calls_back(&api, &uuid, &url, Some("not a certificate"), &ipa).await;
    assert_eq!(garbage.status, StatusCode::BAD_REQUEST, "{}", garbage.body);
    assert!(garbage.body.to_string().contains("agent_verify_ca"));

    let beat = calls_back(&api, &uuid, &url, Some(&certificate), &ipa).await;
    assert_eq!(beat.status, StatusCode::ACCEPTED, "{}", beat.body);
    let available = state(&api, &uuid, "available").await;
    assert_eq!(available["last_error"], Value::Null);
    assert_eq!(steps_run(&ipa), ["erase_devices_metadata", "flash_nic"]);

    // Another node whose agent presents a certificate other than the one it heartbeated:
    // the TLS failure is named as such.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .cert
        .pem();
    let deleted = api
        .send_latest(
            Method::DELETE,
            &format!("/v1/ports/{}", port_of(&api, &uuid).await),
            None,
        )
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
    let liar = node(&api, true).await;
    api.provision(&liar, "provide").await;
    state(&api, &liar, "clean wait").await;
    calls_back(&api, &liar, &url, Some(&other), &ipa).await;
    let failed = state(&api, &liar, "clean failed").await;
    let error = failed["last_error"].as_str().unwrap();
    assert!(error.contains("TLS failure"), "{error}");
    assert!(!error.contains("connection refused"), "{error}");
}

async fn port_of(api: &Api, node: &str) -> String {
    let ports = api
        .send_latest(Method::GET, &format!("/v1/nodes/{node}/ports"), None)
        .await;
    ports.body["ports"][0]["uuid"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automated_cleaning_without_driver_steps_still_boots_the_agent_for_its_own() {
    let root = tempfile::tempdir().unwrap();
    // Both erase steps off: before the agent is known, nothing has a priority above 0.
    let drivers = Drivers::default().with_settings(DriverSettings {
        boot: BootSettings {
            http_url: Some("http://10.9.0.1:8080".into()),
            http_root: root.path().to_owned(),
            api_url: Some("http://10.9.0.1:6385".into()),
            ..BootSettings::default()
        },
        deploy: DeploySettings {
            command_poll_interval: Duration::from_millis(20),
            erase_devices_metadata_priority: 0,
            ..DeploySettings::default()
        },
        ..DriverSettings::default()
    });
    let api = Api::with_drivers(TestDb::sqlite().await, ConductorConfig::default(), drivers).await;
    let ipa = ipa(generic_steps());
    let url = start_ipa(ipa.clone()).await;
    let uuid = node(&api, true).await;

    // As Ironic: the ramdisk boots to tell its steps, and its priority-50 step runs.
    api.provision(&uuid, "provide").await;
    state(&api, &uuid, "clean wait").await;
    let beat = calls_back(&api, &uuid, &url, None, &ipa).await;
    assert_eq!(beat.status, StatusCode::ACCEPTED, "{}", beat.body);
    let available = state(&api, &uuid, "available").await;
    assert_eq!(available["last_error"], Value::Null);
    assert_eq!(names(&ipa)[0], "clean.get_clean_steps");
    assert_eq!(steps_run(&ipa), ["flash_nic"]);
    assert_eq!(available["power_state"], "power off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_requests_a_reboot_boots_the_ramdisk_again_and_the_flow_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let api = api(root.path(), ConductorConfig::default(), LogsCollect::Never).await;
    let ipa = ipa(json!({
        "clean": {
            "GenericHardwareManager": [
                {"step": "erase_devices_metadata", "priority": 99, "interface": "deploy",
                 "reboot_requested": false, "abortable": true},
            ],
            "SiteHardwareManager": [
                {"step": "update_nic_firmware", "priority": 60, "interface": "deploy",
                 "reboot_requested": true, "abortable": false},
                {"step": "check_nic_firmware", "priority": 40, "interface": "deploy",
                 "reboot_requested": false, "abortable": true},
            ],
        },
    }));
    let url = start_ipa(ipa.clone()).await;
    let uuid = node(&api, true).await;

    api.provision(&uuid, "provide").await;
    state(&api, &uuid, "clean wait").await;
    calls_back(&api, &uuid, &url, None, &ipa).await;
    // update_nic_firmware asked for a reboot: the node waits for the rebooted agent, which
    // must look the node up for a new token.
    let waiting = state(&api, &uuid, "clean wait").await;
    assert_eq!(
        steps_run(&ipa),
        ["erase_devices_metadata", "update_nic_firmware"]
    );
    assert_eq!(waiting["power_state"], "power on");
    assert!(
        waiting["driver_internal_info"].get("agent_url").is_none(),
        "the rebooted agent is a new one: {}",
        waiting["driver_internal_info"]
    );
    let script = root.path().join("ipxe/52-54-00-aa-bb-02.ipxe");
    assert!(script.exists(), "the ramdisk boots again from the network");

    ipa.lock().unwrap().token.clear();
    let beat = calls_back(&api, &uuid, &url, None, &ipa).await;
    assert_eq!(beat.status, StatusCode::ACCEPTED, "{}", beat.body);
    let available = state(&api, &uuid, "available").await;
    assert_eq!(available["last_error"], Value::Null);
    assert_eq!(
        steps_run(&ipa),
        [
            "erase_devices_metadata",
            "update_nic_firmware",
            "check_nic_firmware"
        ],
        "the flow goes on after the rebooted step, which does not run again"
    );
}
