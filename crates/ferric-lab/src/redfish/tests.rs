//! Redfish handlers against a fake machine: shapes, auth, sessions, errors.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::machine::MachineInfo;
use crate::machine::fake::FakeMachine;

const SYSTEM: &str = "/redfish/v1/Systems/node-0";

fn setup_machine() -> Arc<FakeMachine> {
    Arc::new(FakeMachine::new(MachineInfo {
        name: "node-0".into(),
        uuid: "c0ffee00-0000-4000-8000-000000000000".into(),
        serial: "FERRIC-LAB-0".into(),
        mac: "52:54:00:fe:00:00".into(),
        memory_mib: 512,
        cpus: 1,
    }))
}

fn router_for(bmc: RedfishBmc<FakeMachine>) -> Router {
    router(Arc::new(bmc))
}

fn setup() -> (Router, Arc<FakeMachine>) {
    let machine = setup_machine();
    let bmc = RedfishBmc::new(machine.clone(), "admin", "secret");
    (router_for(bmc), machine)
}

fn basic() -> String {
    format!("Basic {}", crate::secret::base64_encode(b"admin:secret"))
}

async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", basic())
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |body| Body::from(body.to_string())))
        .unwrap();
    send(router, request).await
}

async fn send(router: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (status, value)
}

#[tokio::test]
async fn service_root_is_open_and_links_everything() {
    let (router, _) = setup();
    let request = Request::get("/redfish/v1/").body(Body::empty()).unwrap();
    let (status, root) = send(&router, request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(root["@odata.type"], "#ServiceRoot.v1_5_0.ServiceRoot");
    assert_eq!(root["Systems"]["@odata.id"], "/redfish/v1/Systems");
    assert_eq!(root["Managers"]["@odata.id"], "/redfish/v1/Managers");
}

#[tokio::test]
async fn resources_need_credentials() {
    let (router, _) = setup();
    let request = Request::get("/redfish/v1/Systems")
        .body(Body::empty())
        .unwrap();
    let (status, body) = send(&router, request).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body["error"]["@Message.ExtendedInfo"][0]["MessageId"],
        "Base.1.8.NoValidSession"
    );
    let wrong = Request::get("/redfish/v1/Systems")
        .header(
            "authorization",
            format!("Basic {}", crate::secret::base64_encode(b"admin:nope")),
        )
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&router, wrong).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn system_has_the_dmtf_shape() {
    let (router, _) = setup();
    let (status, systems) = call(&router, "GET", "/redfish/v1/Systems", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(systems["Members@odata.count"], 1);
    assert_eq!(systems["Members"][0]["@odata.id"], SYSTEM);

    let (status, system) = call(&router, "GET", SYSTEM, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(system["@odata.id"], SYSTEM);
    assert_eq!(
        system["@odata.type"],
        "#ComputerSystem.v1_10_0.ComputerSystem"
    );
    assert_eq!(system["PowerState"], "Off");
    assert_eq!(system["UUID"], "c0ffee00-0000-4000-8000-000000000000");
    assert_eq!(system["Boot"]["BootSourceOverrideEnabled"], "Disabled");
    assert_eq!(
        system["Boot"]["BootSourceOverrideTarget@Redfish.AllowableValues"],
        json!(["None", "Pxe", "Hdd", "Cd", "BiosSetup", "UefiHttp"])
    );
    assert_eq!(system["ProcessorSummary"]["Count"], 1);
    assert_eq!(system["MemorySummary"]["TotalSystemMemoryGiB"], 0.5);
    assert_eq!(
        system["Actions"]["#ComputerSystem.Reset"]["target"],
        format!("{SYSTEM}/Actions/ComputerSystem.Reset")
    );

    let (_, nic) = call(
        &router,
        "GET",
        &format!("{SYSTEM}/EthernetInterfaces/NIC.1"),
        None,
    )
    .await;
    assert_eq!(nic["MACAddress"], "52:54:00:fe:00:00");
    let (_, manager) = call(&router, "GET", "/redfish/v1/Managers/BMC", None).await;
    assert_eq!(manager["ManagerType"], "BMC");
    assert_eq!(
        manager["Links"]["ManagerForServers"][0]["@odata.id"],
        SYSTEM
    );
}

/// What out-of-band inspection reads: processors, memory, the disk, following the system's
/// links.
#[tokio::test]
async fn hardware_inventory_follows_the_machine() {
    let (router, _) = setup();
    let (_, system) = call(&router, "GET", SYSTEM, None).await;
    let link = |name: &str| system[name]["@odata.id"].as_str().unwrap().to_owned();

    let (status, cpus) = call(&router, "GET", &link("Processors"), None).await;
    assert_eq!(status, StatusCode::OK);
    let cpu_uri = cpus["Members"][0]["@odata.id"].as_str().unwrap();
    let (_, cpu) = call(&router, "GET", cpu_uri, None).await;
    assert_eq!(cpu["TotalThreads"], 1);
    assert_eq!(cpu["InstructionSet"], "x86-64");

    let (_, dimms) = call(&router, "GET", &link("Memory"), None).await;
    let dimm_uri = dimms["Members"][0]["@odata.id"].as_str().unwrap();
    let (_, dimm) = call(&router, "GET", dimm_uri, None).await;
    assert_eq!(dimm["CapacityMiB"], 512);

    let (_, storage) = call(&router, "GET", &link("SimpleStorage"), None).await;
    let controller_uri = storage["Members"][0]["@odata.id"].as_str().unwrap();
    let (_, controller) = call(&router, "GET", controller_uri, None).await;
    let devices = controller["Devices"].as_array().unwrap();
    assert_eq!(devices.len(), crate::layout::DISKS);
    assert!(
        devices
            .iter()
            .all(|disk| disk["CapacityBytes"] == crate::layout::DISK_BYTES)
    );

    let (status, _) = call(&router, "GET", &format!("{SYSTEM}/Processors/CPU.9"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = call(&router, "GET", "/redfish/v1/Systems/other/Memory", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A machine without a disk lists no device.
    let diskless =
        router_for(RedfishBmc::new(setup_machine(), "admin", "secret").with_disk_bytes(0));
    let (_, controller) = call(&diskless, "GET", controller_uri, None).await;
    assert_eq!(controller["Devices"], json!([]));
}

#[tokio::test]
async fn patch_boot_and_reset_reach_the_machine() {
    let (router, machine) = setup();
    let patch =
        json!({"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}});
    let (status, system) = call(&router, "PATCH", SYSTEM, Some(patch)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(system["Boot"]["BootSourceOverrideTarget"], "Pxe");
    assert_eq!(system["Boot"]["BootSourceOverrideEnabled"], "Once");

    let reset = format!("{SYSTEM}/Actions/ComputerSystem.Reset");
    let (status, _) = call(&router, "POST", &reset, Some(json!({"ResetType": "On"}))).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, system) = call(&router, "GET", SYSTEM, None).await;
    assert_eq!(system["PowerState"], "On");
    assert_eq!(
        system["Boot"]["BootSourceOverrideEnabled"], "Disabled",
        "Once is consumed"
    );

    for reset_type in [
        "ForceOff",
        "GracefulShutdown",
        "GracefulRestart",
        "ForceRestart",
        "PowerCycle",
        "Nmi",
    ] {
        let (status, _) = call(
            &router,
            "POST",
            &reset,
            Some(json!({"ResetType": reset_type})),
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{reset_type}");
    }
    assert_eq!(machine.actions().len(), 7);
}

#[tokio::test]
async fn bad_input_gets_redfish_errors() {
    let (router, _) = setup();
    let reset = format!("{SYSTEM}/Actions/ComputerSystem.Reset");
    let cases = [
        (
            "POST",
            reset.as_str(),
            json!({"ResetType": "Explode"}),
            "PropertyValueNotInList",
        ),
        ("POST", reset.as_str(), json!({}), "ActionParameterMissing"),
        (
            "PATCH",
            SYSTEM,
            json!({"Boot": {"BootSourceOverrideTarget": "Floppy"}}),
            "PropertyValueNotInList",
        ),
        (
            "PATCH",
            SYSTEM,
            json!({"Boot": {"BootNext": "x"}}),
            "PropertyUnknown",
        ),
        ("PATCH", SYSTEM, json!({"AssetTag": "x"}), "PropertyUnknown"),
        (
            "PATCH",
            SYSTEM,
            json!(["not", "an", "object"]),
            "MalformedJSON",
        ),
    ];
    for (method, uri, body, message_id) in cases {
        let (status, error) = call(&router, method, uri, Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(error["error"]["code"], "Base.1.8.GeneralError");
        assert_eq!(
            error["error"]["@Message.ExtendedInfo"][0]["MessageId"],
            format!("Base.1.8.{message_id}"),
            "{body}"
        );
    }
    let (status, error) = call(&router, "GET", "/redfish/v1/Systems/other", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        error["error"]["@Message.ExtendedInfo"][0]["MessageId"],
        "Base.1.8.ResourceMissingAtURI"
    );
}

#[tokio::test]
async fn sessions_issue_tokens_that_authenticate() {
    let (router, _) = setup();
    let login = Request::post("/redfish/v1/SessionService/Sessions")
        .header("content-type", "application/json")
        .body(Body::from(
            json!({"UserName": "admin", "Password": "secret"}).to_string(),
        ))
        .unwrap();
    let response = router.clone().oneshot(login).await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let token = response.headers()["x-auth-token"]
        .to_str()
        .unwrap()
        .to_owned();
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(location, "/redfish/v1/SessionService/Sessions/1");

    let with_token = |method: &str, uri: &str| {
        Request::builder()
            .method(method)
            .uri(uri)
            .header("x-auth-token", &token)
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(
        send(&router, with_token("GET", SYSTEM)).await.0,
        StatusCode::OK
    );
    let (_, listed) = send(
        &router,
        with_token("GET", "/redfish/v1/SessionService/Sessions"),
    )
    .await;
    assert_eq!(listed["Members"][0]["@odata.id"], location);
    assert_eq!(
        send(&router, with_token("DELETE", &location)).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        send(&router, with_token("GET", SYSTEM)).await.0,
        StatusCode::UNAUTHORIZED
    );

    let bad_login = Request::post("/redfish/v1/SessionService/Sessions")
        .body(Body::from(
            json!({"UserName": "admin", "Password": "wrong"}).to_string(),
        ))
        .unwrap();
    assert_eq!(send(&router, bad_login).await.0, StatusCode::UNAUTHORIZED);
}

fn message_id(body: &Value) -> &str {
    body["error"]["@Message.ExtendedInfo"][0]["MessageId"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn bios_settings_wait_for_the_next_boot() {
    let (router, _) = setup();
    let bios = format!("{SYSTEM}/Bios");
    let (_, system) = call(&router, "GET", SYSTEM, None).await;
    assert_eq!(system["Bios"]["@odata.id"], bios);
    let (status, current) = call(&router, "GET", &bios, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(current["Attributes"]["ProcVirtualization"], "Enabled");
    assert_eq!(current["Attributes"]["SystemSerialNumber"], "FERRIC-LAB-0");
    let registry = current["AttributeRegistry"].as_str().unwrap().to_owned();

    let settings = format!("{bios}/Settings");
    let change = json!({"Attributes": {"ProcVirtualization": "Disabled"}});
    let (status, _) = call(&router, "PATCH", &settings, Some(change)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, pending) = call(&router, "GET", &settings, None).await;
    assert_eq!(
        pending["Attributes"],
        json!({"ProcVirtualization": "Disabled"})
    );
    let (_, current) = call(&router, "GET", &bios, None).await;
    assert_eq!(current["Attributes"]["ProcVirtualization"], "Enabled");

    let reset = format!("{SYSTEM}/Actions/ComputerSystem.Reset");
    let (status, _) = call(&router, "POST", &reset, Some(json!({"ResetType": "On"}))).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, current) = call(&router, "GET", &bios, None).await;
    assert_eq!(current["Attributes"]["ProcVirtualization"], "Disabled");
    let (_, pending) = call(&router, "GET", &settings, None).await;
    assert_eq!(pending["Attributes"], json!({}));

    // Factory defaults, at the next reset too.
    let target = current["Actions"]["#Bios.ResetBios"]["target"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = call(&router, "POST", &target, Some(json!({}))).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let restart = Some(json!({"ResetType": "ForceRestart"}));
    call(&router, "POST", &reset, restart).await;
    let (_, current) = call(&router, "GET", &bios, None).await;
    assert_eq!(current["Attributes"]["ProcVirtualization"], "Enabled");

    // The registry, reached the DMTF way: collection → file → location.
    let (_, registries) = call(&router, "GET", "/redfish/v1/Registries", None).await;
    let file_uri = registries["Members"][0]["@odata.id"].as_str().unwrap();
    assert!(file_uri.ends_with(&registry), "{file_uri}");
    let (_, file) = call(&router, "GET", file_uri, None).await;
    let location = file["Location"][0]["Uri"].as_str().unwrap();
    let (_, entries) = call(&router, "GET", location, None).await;
    let attributes = entries["RegistryEntries"]["Attributes"].as_array().unwrap();
    let serial = attributes
        .iter()
        .find(|entry| entry["AttributeName"] == "SystemSerialNumber")
        .unwrap();
    assert_eq!(serial["ReadOnly"], true);
    let mode = attributes
        .iter()
        .find(|entry| entry["AttributeName"] == "BootMode")
        .unwrap();
    assert_eq!(mode["AllowableValues"][1]["ValueName"], "Bios");
}

#[tokio::test]
async fn bios_settings_are_checked_against_the_registry() {
    let (router, _) = setup();
    let settings = format!("{SYSTEM}/Bios/Settings");
    for (attributes, expected) in [
        (json!({"Turbo": "On"}), "Base.1.8.PropertyUnknown"),
        (
            json!({"SystemSerialNumber": "X"}),
            "Base.1.8.PropertyNotWritable",
        ),
        (
            json!({"BootMode": "Legacy"}),
            "Base.1.8.PropertyValueNotInList",
        ),
    ] {
        let body = Some(json!({ "Attributes": attributes }));
        let (status, error) = call(&router, "PATCH", &settings, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{attributes}");
        assert_eq!(message_id(&error), expected, "{error}");
    }
    let (_, pending) = call(&router, "GET", &settings, None).await;
    assert_eq!(pending["Attributes"], json!({}), "nothing half-applied");
}

#[tokio::test]
async fn simple_update_runs_a_task_that_raises_the_version() {
    let (router, _) = setup();
    let (_, root) = call(&router, "GET", "/redfish/v1/", None).await;
    let (_, service) = call(
        &router,
        "GET",
        root["UpdateService"]["@odata.id"].as_str().unwrap(),
        None,
    )
    .await;
    let action = service["Actions"]["#UpdateService.SimpleUpdate"]["target"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, system) = call(&router, "GET", SYSTEM, None).await;
    assert_eq!(system["BiosVersion"], "1.0.0");

    let request = Request::post(&action)
        .header("authorization", basic())
        .body(Body::from(
            json!({"ImageURI": "http://images/bios.bin", "Targets": [SYSTEM]}).to_string(),
        ))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let task = response.headers()["location"].to_str().unwrap().to_owned();
    let (_, first) = call(&router, "GET", &task, None).await;
    assert_eq!(first["TaskState"], "Running");
    let (_, second) = call(&router, "GET", &task, None).await;
    assert_eq!(second["TaskState"], "Completed", "{second}");
    assert_eq!(second["TaskStatus"], "OK");
    let (_, system) = call(&router, "GET", SYSTEM, None).await;
    assert_eq!(system["BiosVersion"], "1.1.0");

    // The BMC's own firmware, and an image it cannot fetch.
    let manager = format!("/redfish/v1/Managers/{MANAGER_ID}");
    let (_, before) = call(&router, "GET", &manager, None).await;
    let (status, started) = call(
        &router,
        "POST",
        &action,
        Some(json!({"ImageURI": "https://images/bmc.bin", "Targets": [manager]})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let task = started["@odata.id"].as_str().unwrap().to_owned();
    call(&router, "GET", &task, None).await;
    call(&router, "GET", &task, None).await;
    let (_, after) = call(&router, "GET", &manager, None).await;
    assert_eq!(
        after["FirmwareVersion"],
        firmware::next_version(before["FirmwareVersion"].as_str().unwrap())
    );
    let (_, started) = call(
        &router,
        "POST",
        &action,
        Some(json!({"ImageURI": "ftp://images/bios.bin"})),
    )
    .await;
    let task = started["@odata.id"].as_str().unwrap().to_owned();
    call(&router, "GET", &task, None).await;
    let (_, failed) = call(&router, "GET", &task, None).await;
    assert_eq!(failed["TaskState"], "Exception");
    assert!(
        failed["Messages"][0]["Message"]
            .as_str()
            .unwrap()
            .contains("only http and https"),
        "{failed}"
    );
    let (_, system) = call(&router, "GET", SYSTEM, None).await;
    assert_eq!(
        system["BiosVersion"], "1.1.0",
        "a failed flash changes nothing"
    );

    let (status, _) = call(&router, "POST", &action, Some(json!({"Targets": [SYSTEM]}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn virtual_media_under_the_manager_and_the_system_is_one_cd() {
    let (router, machine) = setup();
    for base in [
        "/redfish/v1/Managers/BMC/VirtualMedia".to_owned(),
        format!("{SYSTEM}/VirtualMedia"),
    ] {
        let (status, list) = call(&router, "GET", &base, None).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        assert_eq!(list["Members"][0]["@odata.id"], format!("{base}/Cd"));
    }
    let (_, system) = call(&router, "GET", SYSTEM, None).await;
    assert_eq!(
        system["VirtualMedia"]["@odata.id"],
        format!("{SYSTEM}/VirtualMedia")
    );
    let cd = "/redfish/v1/Managers/BMC/VirtualMedia/Cd";
    let (_, before) = call(&router, "GET", cd, None).await;
    assert_eq!(before["Inserted"], false);
    assert_eq!(before["MediaTypes"], json!(["CD", "DVD"]));
    let insert = before["Actions"]["#VirtualMedia.InsertMedia"]["target"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = call(
        &router,
        "POST",
        &insert,
        Some(json!({"Image": "http://10.231.0.1:8080/vmedia/n.iso", "Inserted": true})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        machine.media().as_deref(),
        Some("http://10.231.0.1:8080/vmedia/n.iso")
    );
    // The same drive under the system.
    let (_, under_system) = call(&router, "GET", &format!("{SYSTEM}/VirtualMedia/Cd"), None).await;
    assert_eq!(under_system["Inserted"], true);
    assert_eq!(under_system["ImageName"], "n.iso");
    // Bad input: no image, a file path.
    for body in [json!({}), json!({"Image": "/etc/passwd"})] {
        let (status, _) = call(&router, "POST", &insert, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
    let (status, _) = call(
        &router,
        "POST",
        &format!("{SYSTEM}/VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia"),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(machine.media(), None);
    // PATCH, as BMCs without the actions take it.
    let (status, patched) = call(
        &router,
        "PATCH",
        cd,
        Some(json!({"Image": "http://h/x.iso", "Inserted": true})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["Image"], "http://h/x.iso");
    let (status, _) = call(
        &router,
        "GET",
        "/redfish/v1/Managers/BMC/VirtualMedia/Floppy",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Ferric's own Redfish driver against this BMC over HTTP: attach, list, detach.
#[tokio::test]
async fn ferric_attaches_and_ejects_virtual_media_through_the_lab_bmc() {
    use ferric_drivers::vmedia::VmediaDevice;
    let (router, machine) = setup();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let mut node = ferric_model::resources::Node::new(
        uuid::Uuid::new_v4(),
        "redfish",
        ferric_model::ProvisionState::Manageable,
    );
    for (key, value) in [
        ("redfish_address", format!("http://{address}")),
        ("redfish_system_id", SYSTEM.to_owned()),
        ("redfish_username", "admin".to_owned()),
        ("redfish_password", "secret".to_owned()),
    ] {
        node.driver_info.insert(key.into(), value.into());
    }
    let management = ferric_drivers::Drivers::default()
        .load(&node)
        .unwrap()
        .management;
    management
        .attach_virtual_media(&node, VmediaDevice::Cdrom, "http://h/live.iso")
        .await
        .unwrap();
    assert_eq!(machine.media().as_deref(), Some("http://h/live.iso"));
    let slots = management.virtual_media(&node).await.unwrap();
    assert_eq!(slots.len(), 1, "{slots:?}");
    assert!(slots[0].inserted);
    assert_eq!(slots[0].location, format!("{SYSTEM}/VirtualMedia/Cd"));
    let error = management
        .attach_virtual_media(&node, VmediaDevice::Floppy, "http://h/f.img")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no virtual floppy"), "{error}");
    management.detach_virtual_media(&node, &[]).await.unwrap();
    assert_eq!(machine.media(), None);
}
