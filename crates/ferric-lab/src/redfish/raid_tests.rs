//! The lab RAID controller: request checks, apply-on-reset, and the HTTP flow a Redfish RAID
//! client follows against a fake machine (POST → 202 + task → reset → volume → DELETE).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::machine::fake::FakeMachine;
use crate::machine::{MachineInfo, PowerAction};
use crate::redfish::{RedfishBmc, router};

const STORAGE: &str = "/redfish/v1/Systems/node-0/Storage/RAID.Integrated.1";

fn drive(index: usize) -> Value {
    json!({"@odata.id": format!("{STORAGE}/Drives/Disk.Bay.{index}")})
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn state() -> RaidState {
    RaidState::new("node-0", "FERRIC-LAB-0")
}

#[test]
fn a_raid1_is_built_at_the_next_reset() {
    let mut raid = state();
    let task = raid
        .request_create(&object(json!({
            "RAIDType": "RAID1",
            "Links": {"Drives": [drive(0), drive(1)]},
            "@Redfish.OperationApplyTime": "OnReset",
        })))
        .expect("create");
    assert_eq!(raid.task(task).expect("task")["TaskState"], "Pending");
    assert_eq!(raid.volumes()["Members@odata.count"], 0);
    assert!(raid.disks().is_empty());

    assert!(raid.reset());
    assert_eq!(raid.task(task).expect("task")["TaskState"], "Completed");
    let volume = raid.volume("1").expect("volume 1");
    assert_eq!(volume["RAIDType"], "RAID1");
    assert_eq!(volume["CapacityBytes"], DRIVE_BYTES);
    assert_eq!(volume["Links"]["Drives"], json!([drive(0), drive(1)]));
    let disks = raid.disks();
    assert_eq!(disks.len(), 1);
    assert_eq!(disks[0].bytes, DRIVE_BYTES);
    assert_eq!(disks[0].serial, "ferric-volume1");
    // The NAA name the BMC shows is the WWN the guest reads.
    assert_eq!(
        volume["Identifiers"][0]["DurableName"],
        format!("{:016X}", disks[0].wwn)
    );
    assert_eq!(disks[0].wwn >> 60, 5);
    assert_eq!(
        raid.drive("Disk.Bay.1").expect("drive")["Links"]["Volumes"][0]["@odata.id"],
        format!("{STORAGE}/Volumes/1")
    );
    assert!(!raid.reset(), "nothing waits any more");

    let task = raid.request_delete("1", b"").expect("delete");
    assert_eq!(raid.task(task).expect("task")["TaskState"], "Pending");
    assert!(raid.reset());
    assert!(raid.volume("1").is_none());
    assert!(raid.disks().is_empty());
}

#[test]
fn bad_requests_say_what_to_change() {
    let mut raid = state();
    let error = |raid: &mut RaidState, body: Value| {
        raid.request_create(&object(body))
            .expect_err("refused")
            .to_string()
    };
    let links = json!({"Drives": [drive(0), drive(1)]});
    assert!(error(&mut raid, json!({"Links": links})).contains("RAIDType"));
    assert!(error(&mut raid, json!({"RAIDType": "RAID6", "Links": links})).contains("RAID6"));
    assert!(error(&mut raid, json!({"RAIDType": "RAID1"})).contains("Links/Drives"));
    assert!(
        error(
            &mut raid,
            json!({"RAIDType": "RAID1", "Links": {"Drives": [drive(0)]}})
        )
        .contains("RAID1 takes 2 drives, not 1")
    );
    assert!(
        error(
            &mut raid,
            json!({"RAIDType": "RAID1", "Links": {"Drives": [drive(0), drive(9)]}})
        )
        .contains("is not a drive of")
    );
    assert!(
        error(
            &mut raid,
            json!({"RAIDType": "RAID1", "Links": links, "CapacityBytes": DRIVE_BYTES + 1})
        )
        .contains("does not fit")
    );
    assert!(
        error(
            &mut raid,
            json!({"RAIDType": "RAID1", "Links": links, "@Redfish.OperationApplyTime": "Immediate"})
        )
        .contains("OnReset only")
    );
    // A drive of a waiting volume is taken.
    raid.request_create(&object(json!({"RAIDType": "RAID1", "Links": links})))
        .expect("first");
    assert!(
        error(
            &mut raid,
            json!({"RAIDType": "RAID0", "Links": {"Drives": [drive(1)]}})
        )
        .contains("already belongs to a volume")
    );
    assert!(raid.request_delete("7", b"").is_err());
}

#[test]
fn sizes_follow_the_level() {
    let mut raid = state();
    raid.request_create(&object(json!({
        "RAIDType": "RAID5",
        "Links": {"Drives": [drive(0), drive(1), drive(2)]},
        "Name": "data",
    })))
    .expect("raid5");
    raid.request_create(&object(json!({
        "RAIDType": "RAID0",
        "Links": {"Drives": [drive(3)]},
        "CapacityBytes": 1 << 30,
    })))
    .expect("raid0");
    raid.reset();
    assert_eq!(
        raid.volume("1").expect("1")["CapacityBytes"],
        2 * DRIVE_BYTES
    );
    assert_eq!(raid.volume("1").expect("1")["Name"], "data");
    assert_eq!(raid.volume("2").expect("2")["CapacityBytes"], 1_u64 << 30);
    let disks = raid.disks();
    assert_ne!(disks[0].wwn, disks[1].wwn);
}

async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Option<String>, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(
            "authorization",
            format!("Basic {}", crate::secret::base64_encode(b"admin:secret")),
        )
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |body| Body::from(body.to_string())))
        .expect("request");
    let response = router.clone().oneshot(request).await.expect("response");
    let status = response.status();
    let location = response
        .headers()
        .get("location")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("body");
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, location, value)
}

#[tokio::test]
async fn the_volumes_collection_works_over_http_and_reaches_the_machine() {
    let machine = Arc::new(FakeMachine::new(MachineInfo {
        name: "node-0".into(),
        uuid: "c0ffee00-0000-4000-8000-000000000000".into(),
        serial: "FERRIC-LAB-0".into(),
        mac: "52:54:00:fe:00:00".into(),
        memory_mib: 512,
        cpus: 1,
    }));
    let router = router(Arc::new(RedfishBmc::new(
        machine.clone(),
        "admin",
        "secret",
    )));
    let system = "/redfish/v1/Systems/node-0";
    let (_, _, body) = call(&router, "GET", system, None).await;
    assert_eq!(body["Storage"]["@odata.id"], format!("{system}/Storage"));
    let (status, _, body) = call(&router, "GET", &format!("{system}/Storage"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["Members"][0]["@odata.id"], STORAGE);
    let (_, _, storage) = call(&router, "GET", STORAGE, None).await;
    assert_eq!(
        storage["StorageControllers"][0]["SupportedRAIDTypes"],
        json!(["RAID0", "RAID1", "RAID5", "RAID10"])
    );
    assert_eq!(storage["Drives"].as_array().map(Vec::len), Some(DRIVES));
    let (status, _, disk) = call(
        &router,
        "GET",
        &format!("{STORAGE}/Drives/Disk.Bay.0"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(disk["MediaType"], "HDD");
    assert_eq!(disk["Protocol"], "SAS");
    let volumes = format!("{STORAGE}/Volumes");
    let (_, _, collection) = call(&router, "GET", &volumes, None).await;
    assert_eq!(
        collection["@Redfish.OperationApplyTimeSupport"]["SupportedValues"],
        json!(["OnReset"])
    );

    let (status, location, task) = call(
        &router,
        "POST",
        &volumes,
        Some(json!({
            "RAIDType": "RAID1",
            "CapacityBytes": DRIVE_BYTES,
            "Links": {"Drives": [drive(0), drive(1)]},
            "@Redfish.OperationApplyTime": "OnReset",
        })),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let location = location.expect("a task monitor");
    assert_eq!(location, "/redfish/v1/TaskService/Tasks/raid-1");
    assert_eq!(task["TaskState"], "Pending");
    let (status, _, _) = call(
        &router,
        "POST",
        &volumes,
        Some(json!({"RAIDType": "RAID1"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // The reset applies it: the machine gets its disk, the task completes.
    let (status, _, _) = call(
        &router,
        "POST",
        &format!("{system}/Actions/ComputerSystem.Reset"),
        Some(json!({"ResetType": "ForceRestart"})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(machine.actions(), [PowerAction::ForceRestart]);
    assert_eq!(machine.volumes().len(), 1);
    let (_, _, task) = call(&router, "GET", &location, None).await;
    assert_eq!(task["TaskState"], "Completed");
    let (_, _, tasks) = call(&router, "GET", "/redfish/v1/TaskService/Tasks", None).await;
    assert_eq!(tasks["Members"][0]["@odata.id"], location);
    let (_, _, collection) = call(&router, "GET", &volumes, None).await;
    assert_eq!(
        collection["Members"][0]["@odata.id"],
        format!("{volumes}/1")
    );
    let (_, _, volume) = call(&router, "GET", &format!("{volumes}/1"), None).await;
    assert_eq!(volume["Identifiers"][0]["DurableNameFormat"], "NAA");

    let (status, location, _) = call(&router, "DELETE", &format!("{volumes}/1"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(location.is_some());
    call(
        &router,
        "POST",
        &format!("{system}/Actions/ComputerSystem.Reset"),
        Some(json!({"ResetType": "On"})),
    )
    .await;
    assert!(machine.volumes().is_empty());
    let (status, _, _) = call(&router, "GET", &format!("{volumes}/1"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(&router, "GET", &format!("{system}/Storage/Nope"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
