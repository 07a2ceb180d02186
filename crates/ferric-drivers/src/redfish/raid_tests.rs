//! The `redfish` RAID interface against a small in-process BMC with one storage controller
//! and three drives: volumes created by POST and followed through their task monitors,
//! deleted by DELETE, the reboot a controller that applies changes on reset asks for, and
//! the root device hint taken from the volume's durable name.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, PowerState};
use serde_json::{Value, json};
use uuid::Uuid;

use super::RedfishRaid;
use crate::DriverError;
use crate::bmc::BmcSettings;
use crate::bmc_state::BmcState;
use crate::interfaces::{
    Outcome, PowerAction, PowerInterface, RaidInterface, StepCall, StepKind, Validate,
};
use crate::redfish::Redfish;

const STORAGE: &str = "/redfish/v1/Systems/1/Storage/RAID.Integrated.1-1";

#[derive(Default)]
struct Bmc {
    /// Volume id → body.
    volumes: Mutex<Vec<(String, Value)>>,
    next_volume: AtomicUsize,
    /// Reads of each task so far; a task completes on its second read.
    task_reads: Mutex<Vec<usize>>,
    /// The controller applies changes only at the next reset.
    on_reset: bool,
    posts: Mutex<Vec<Value>>,
    deletes: AtomicUsize,
}

fn drive(bay: usize) -> String {
    format!("{STORAGE}/Drives/Disk.Bay.{bay}")
}

async fn system() -> Response {
    axum::Json(
        json!({"PowerState": "On", "Storage": {"@odata.id": "/redfish/v1/Systems/1/Storage"}}),
    )
    .into_response()
}

async fn storages() -> Response {
    axum::Json(json!({"Members": [{"@odata.id": STORAGE}]})).into_response()
}

async fn storage() -> Response {
    axum::Json(json!({
        "Id": "RAID.Integrated.1-1",
        "StorageControllers": [{"MemberId": "0", "Name": "PERC H755"}],
        "Drives": (0..3).map(|bay| json!({"@odata.id": drive(bay)})).collect::<Vec<_>>(),
        "Volumes": {"@odata.id": format!("{STORAGE}/Volumes")},
    }))
    .into_response()
}

async fn volumes(State(bmc): State<Arc<Bmc>>) -> Response {
    let members: Vec<Value> = bmc
        .volumes
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _)| json!({"@odata.id": format!("{STORAGE}/Volumes/{id}")}))
        .collect();
    let apply = if bmc.on_reset {
        json!(["OnReset"])
    } else {
        json!(["Immediate", "OnReset"])
    };
    axum::Json(json!({
        "Members": members,
        "@Redfish.OperationApplyTimeSupport": {"SupportedValues": apply},
    }))
    .into_response()
}

fn new_task(bmc: &Bmc) -> String {
    let mut reads = bmc.task_reads.lock().unwrap();
    reads.push(0);
    format!("/redfish/v1/TaskService/Tasks/{}", reads.len() - 1)
}

async fn create(State(bmc): State<Arc<Bmc>>, body: axum::Json<Value>) -> Response {
    let body = body.0;
    bmc.posts.lock().unwrap().push(body.clone());
    let id = bmc.next_volume.fetch_add(1, Ordering::SeqCst).to_string();
    let drives = body.pointer("/Links/Drives").cloned().unwrap_or_default();
    let volume = json!({
        "@odata.id": format!("{STORAGE}/Volumes/{id}"),
        "Name": body.get("Name").cloned().unwrap_or_else(|| format!("Volume {id}").into()),
        "RAIDType": body["RAIDType"],
        "CapacityBytes": body.get("CapacityBytes").cloned().unwrap_or_else(|| (100u64 << 30).into()),
        "Links": {"Drives": drives},
        "Identifiers": [{"DurableNameFormat": "NAA", "DurableName": format!("6D094660575ECE002C2B5A0E0000000{id}")}],
    });
    bmc.volumes.lock().unwrap().push((id, volume));
    (StatusCode::ACCEPTED, [("location", new_task(&bmc))]).into_response()
}

async fn volume(State(bmc): State<Arc<Bmc>>, Path(id): Path<String>) -> Response {
    let volumes = bmc.volumes.lock().unwrap();
    match volumes.iter().find(|(known, _)| *known == id) {
        Some((_, body)) => axum::Json(body.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn delete(State(bmc): State<Arc<Bmc>>, Path(id): Path<String>) -> Response {
    bmc.deletes.fetch_add(1, Ordering::SeqCst);
    bmc.volumes
        .lock()
        .unwrap()
        .retain(|(known, _)| *known != id);
    StatusCode::NO_CONTENT.into_response()
}

async fn task(State(bmc): State<Arc<Bmc>>, Path(number): Path<usize>) -> Response {
    let mut reads = bmc.task_reads.lock().unwrap();
    let Some(read) = reads.get_mut(number) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    *read += 1;
    let state = if *read >= 2 { "Completed" } else { "Running" };
    axum::Json(json!({"TaskState": state, "TaskStatus": "OK"})).into_response()
}

async fn serve(bmc: Arc<Bmc>) -> String {
    let router = Router::new()
        .route("/redfish/v1/Systems/1", get(system))
        .route("/redfish/v1/Systems/1/Storage", get(storages))
        .route(STORAGE, get(storage))
        .route(&format!("{STORAGE}/Volumes"), get(volumes).post(create))
        .route(
            &format!("{STORAGE}/Volumes/{{id}}"),
            get(volume).delete(delete),
        )
        .route("/redfish/v1/TaskService/Tasks/{number}", get(task))
        .with_state(bmc);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    address
}

/// A power interface that records what it was asked.
#[derive(Default)]
struct Recorded(Mutex<Vec<PowerAction>>);

#[async_trait::async_trait]
impl Validate for Recorded {
    async fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[async_trait::async_trait]
impl PowerInterface for Recorded {
    async fn get_power_state(&self, _node: &Node) -> Result<PowerState, DriverError> {
        Ok(PowerState::On)
    }

    async fn set_power(
        &self,
        _node: &Node,
        action: PowerAction,
        _timeout: Option<Duration>,
    ) -> Result<(), DriverError> {
        self.0.lock().unwrap().push(action);
        Ok(())
    }

    fn supported_power_actions(&self) -> &'static [PowerAction] {
        &PowerAction::ALL
    }
}

fn raid(power: Arc<Recorded>) -> RedfishRaid {
    RedfishRaid {
        redfish: Redfish {
            state: Arc::new(BmcState::new(BmcSettings {
                power_state_poll_interval: Duration::from_millis(1),
                ..BmcSettings::default()
            })),
        },
        power,
    }
}

fn node(address: &str, target: Value) -> Node {
    let mut node = Node::new(Uuid::new_v4(), "redfish", ProvisionState::Cleaning);
    node.driver_info = json!({
        "redfish_address": address, "redfish_system_id": "/redfish/v1/Systems/1",
        "redfish_username": "admin", "redfish_password": "password",
        "redfish_auth_type": "basic",
    })
    .as_object()
    .unwrap()
    .clone();
    node.target_raid_config = target.as_object().unwrap().clone();
    node
}

fn call(step: &str) -> StepCall {
    StepCall {
        interface: ferric_model::resources::InterfaceKind::Raid,
        step: step.to_owned(),
        args: Default::default(),
        priority: 0,
    }
}

/// Runs a step the way the conductor does: again after each poll, until it ends.
async fn run(raid: &RedfishRaid, node: &mut Node, step: &str) -> Result<usize, DriverError> {
    for calls in 1..50 {
        match raid
            .execute_step(node, StepKind::Clean, &call(step))
            .await?
        {
            Outcome::Poll(_) => {}
            Outcome::Done => return Ok(calls),
            Outcome::Wait => panic!("the redfish RAID interface never waits for a callback"),
        }
    }
    panic!("{step} did not finish in 50 calls");
}

#[tokio::test]
async fn a_raid_1_is_built_from_two_drives_and_recorded_with_its_wwn() {
    let bmc = Arc::new(Bmc::default());
    let address = serve(bmc.clone()).await;
    let power = Arc::new(Recorded::default());
    let raid = raid(power.clone());
    let mut node = node(
        &address,
        json!({"logical_disks": [{"size_gb": "MAX", "raid_level": "1", "is_root_volume": true,
                                   "controller": "PERC H755"}]}),
    );
    raid.validate(&node).await.unwrap();
    run(&raid, &mut node, "create_configuration").await.unwrap();

    let posts = bmc.posts.lock().unwrap().clone();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0]["RAIDType"], "RAID1");
    assert_eq!(posts[0]["@Redfish.OperationApplyTime"], "Immediate");
    assert!(posts[0].get("CapacityBytes").is_none(), "MAX sends no size");
    assert_eq!(
        posts[0]["Links"]["Drives"],
        json!([{"@odata.id": drive(0)}, {"@odata.id": drive(1)}])
    );
    let disk = &node.raid_config["logical_disks"][0];
    assert_eq!(disk["raid_level"], "1");
    assert_eq!(disk["size_gb"], 100);
    let hint = json!({"wwn": "0x6d094660575ece002c2b5a0e00000000"});
    assert_eq!(node.properties["root_device"], hint);
    assert!(
        power.0.lock().unwrap().is_empty(),
        "Immediate needs no reboot"
    );
    assert!(!node.driver_internal_info.contains_key("redfish_raid"));

    // Building again deletes the volume first (delete_existing defaults to true).
    run(&raid, &mut node, "create_configuration").await.unwrap();
    assert_eq!(bmc.deletes.load(Ordering::SeqCst), 1);
    assert_eq!(bmc.volumes.lock().unwrap().len(), 1);

    run(&raid, &mut node, "delete_configuration").await.unwrap();
    assert!(bmc.volumes.lock().unwrap().is_empty());
    assert!(node.raid_config.is_empty());
    assert!(!node.properties.contains_key("root_device"));
}

#[tokio::test]
async fn a_controller_that_applies_on_reset_gets_its_reboot() {
    let bmc = Arc::new(Bmc {
        on_reset: true,
        ..Bmc::default()
    });
    let address = serve(bmc.clone()).await;
    let power = Arc::new(Recorded::default());
    let raid = raid(power.clone());
    let mut node = node(
        &address,
        json!({"logical_disks": [{"size_gb": 50, "raid_level": "5", "volume_name": "data"}]}),
    );
    run(&raid, &mut node, "create_configuration").await.unwrap();
    let posts = bmc.posts.lock().unwrap().clone();
    assert_eq!(posts[0]["@Redfish.OperationApplyTime"], "OnReset");
    assert_eq!(posts[0]["CapacityBytes"], 50u64 << 30);
    assert_eq!(posts[0]["Name"], "data");
    assert_eq!(posts[0]["Links"]["Drives"].as_array().unwrap().len(), 3);
    assert_eq!(*power.0.lock().unwrap(), vec![PowerAction::Reboot]);
    assert!(
        !node.properties.contains_key("root_device"),
        "not a root volume"
    );
}

#[tokio::test]
async fn targets_the_controller_cannot_build_are_refused() {
    let bmc = Arc::new(Bmc::default());
    let address = serve(bmc.clone()).await;
    let raid = raid(Arc::new(Recorded::default()));
    let level = raid
        .validate_target(
            &node(&address, json!({})),
            json!({"logical_disks": [{"size_gb": "MAX", "raid_level": "2"}]})
                .as_object()
                .unwrap(),
        )
        .unwrap_err()
        .to_string();
    assert!(level.contains("builds RAID levels"), "{level}");
    let mut too_big = node(
        &address,
        json!({"logical_disks": [{"size_gb": "MAX", "raid_level": "6"}]}),
    );
    let error = run(&raid, &mut too_big, "create_configuration")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("the 4 free drives"), "{error}");
    assert!(bmc.posts.lock().unwrap().is_empty());
    assert!(!too_big.driver_internal_info.contains_key("redfish_raid"));
}
