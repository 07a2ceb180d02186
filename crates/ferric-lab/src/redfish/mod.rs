//! The Redfish front-end of a virtual BMC: DMTF resources over HTTP for one machine.
//!
//! Each BMC serves exactly one ComputerSystem and one Manager, as a server's own BMC does. All
//! machine work goes through [`MachineControl`], so the IPMI front-end (TODO-ipmi: chassis
//! control, boot options and "get device id" over RMCP+ on UDP 623, sharing the same `Machine`)
//! needs no change here. Authentication: HTTP basic auth with the generated credentials, or a
//! session token from `POST /redfish/v1/SessionService/Sessions` in `X-Auth-Token`.

mod error;
pub mod firmware;
mod vmedia;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Map, Value, json};

pub use error::RedfishError;
use firmware::{Component, FirmwareState};

use crate::machine::{
    BootMode, BootOverride, BootSettings, BootTarget, MachineControl, PowerAction, PowerState,
};
use crate::secret;

const TARGETS: [(BootTarget, &str); 6] = [
    (BootTarget::None, "None"),
    (BootTarget::Pxe, "Pxe"),
    (BootTarget::Hdd, "Hdd"),
    (BootTarget::Cd, "Cd"),
    (BootTarget::BiosSetup, "BiosSetup"),
    (BootTarget::UefiHttp, "UefiHttp"),
];
const OVERRIDES: [(BootOverride, &str); 3] = [
    (BootOverride::Once, "Once"),
    (BootOverride::Continuous, "Continuous"),
    (BootOverride::Disabled, "Disabled"),
];
const MODES: [(BootMode, &str); 2] = [(BootMode::Uefi, "UEFI"), (BootMode::Legacy, "Legacy")];

/// The Manager's id; the system's id is the machine's name.
pub const MANAGER_ID: &str = "BMC";

/// One virtual BMC's Redfish service.
pub struct RedfishBmc<M> {
    machine: Arc<M>,
    username: String,
    password: String,
    basic_header: String,
    /// token → session id
    sessions: Mutex<HashMap<String, String>>,
    next_session: Mutex<u64>,
    /// BIOS settings, firmware versions and update tasks (`firmware.rs`).
    firmware: Mutex<FirmwareState>,
    /// The size of each of the machine's disks (`layout::DISKS`) as `SimpleStorage` shows
    /// them; 0: no disk.
    disk_bytes: u64,
}

impl<M: MachineControl> RedfishBmc<M> {
    pub fn new(machine: Arc<M>, username: &str, password: &str) -> Self {
        let basic_header = format!(
            "Basic {}",
            secret::base64_encode(format!("{username}:{password}").as_bytes())
        );
        Self {
            username: username.to_owned(),
            password: password.to_owned(),
            basic_header,
            sessions: Mutex::new(HashMap::new()),
            next_session: Mutex::new(0),
            firmware: Mutex::new(FirmwareState::new(&machine.info().serial)),
            machine,
            disk_bytes: crate::layout::DISK_BYTES,
        }
    }

    /// The disk size the BMC reports for each disk (the lab's are
    /// [`crate::layout::DISK_BYTES`]); 0 for a machine without disks.
    #[must_use]
    pub fn with_disk_bytes(mut self, bytes: u64) -> Self {
        self.disk_bytes = bytes;
        self
    }

    /// Keeps firmware update tasks running (`true`) until released, so a test can look at a
    /// node while its update runs.
    pub fn hold_tasks(&self, hold: bool) {
        self.lock_firmware().hold_tasks(hold);
    }

    /// The BIOS settings in effect now (not the pending ones).
    pub fn bios_attributes(&self) -> Value {
        self.lock_firmware().attributes()
    }

    fn lock_firmware(&self) -> std::sync::MutexGuard<'_, FirmwareState> {
        self.firmware.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn system_id(&self) -> &str {
        &self.machine.info().name
    }

    fn system_uri(&self) -> String {
        format!("/redfish/v1/Systems/{}", self.system_id())
    }

    fn check_system(&self, id: &str, uri: &str) -> Result<(), RedfishError> {
        if id == self.system_id() {
            Ok(())
        } else {
            Err(RedfishError::NotFound {
                uri: uri.to_owned(),
            })
        }
    }

    fn authorized(&self, headers: &HeaderMap) -> bool {
        let header_str = |name| {
            headers
                .get(name)
                .and_then(|value: &HeaderValue| value.to_str().ok())
        };
        if header_str(header::AUTHORIZATION.as_str()) == Some(self.basic_header.as_str()) {
            return true;
        }
        match header_str("x-auth-token") {
            Some(token) => self.lock_sessions().contains_key(token),
            None => false,
        }
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The HTTP routes of one BMC.
pub fn router<M: MachineControl>(bmc: Arc<RedfishBmc<M>>) -> Router {
    let protected = Router::new()
        .route("/redfish/v1/SessionService", get(session_service))
        .route(
            "/redfish/v1/SessionService/Sessions/{id}",
            get(session_get).delete(session_delete),
        )
        .route("/redfish/v1/Systems", get(systems))
        .route(
            "/redfish/v1/Systems/{id}",
            get(system_get).patch(system_patch),
        )
        .route(
            "/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset",
            post(system_reset),
        )
        .route("/redfish/v1/Systems/{id}/Processors", get(processors))
        .route(
            "/redfish/v1/Systems/{id}/Processors/{cpu}",
            get(processor_get),
        )
        .route("/redfish/v1/Systems/{id}/Memory", get(memory))
        .route("/redfish/v1/Systems/{id}/Memory/{dimm}", get(memory_get))
        .route(
            "/redfish/v1/Systems/{id}/SimpleStorage",
            get(simple_storage),
        )
        .route(
            "/redfish/v1/Systems/{id}/SimpleStorage/{controller}",
            get(simple_storage_get),
        )
        .route("/redfish/v1/Systems/{id}/EthernetInterfaces", get(nics))
        .route(
            "/redfish/v1/Systems/{id}/EthernetInterfaces/{nic}",
            get(nic_get),
        )
        .route("/redfish/v1/Systems/{id}/Bios", get(bios_get))
        .route(
            "/redfish/v1/Systems/{id}/Bios/Settings",
            get(bios_settings_get).patch(bios_settings_patch),
        )
        .route(
            "/redfish/v1/Systems/{id}/Bios/Actions/Bios.ResetBios",
            post(bios_reset),
        )
        .route("/redfish/v1/Registries", get(registries))
        .route("/redfish/v1/Registries/{registry}", get(registry_file))
        .route(
            "/redfish/v1/Registries/{registry}/Registry",
            get(registry_get),
        )
        .route("/redfish/v1/UpdateService", get(update_service))
        .route(
            "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
            post(simple_update),
        )
        .route("/redfish/v1/TaskService", get(task_service))
        .route("/redfish/v1/TaskService/Tasks", get(tasks))
        .route("/redfish/v1/TaskService/Tasks/{task}", get(task_get))
        .route("/redfish/v1/Managers", get(managers))
        .route("/redfish/v1/Managers/{id}", get(manager_get))
        .merge(vmedia::routes::<M>())
        .route_layer(middleware::from_fn_with_state(
            bmc.clone(),
            require_auth::<M>,
        ));
    // The service root, its version document and session login are open, as DSP0266 requires.
    Router::new()
        .route(
            "/redfish",
            get(|| async { Json(json!({"v1": "/redfish/v1/"})) }),
        )
        .route("/redfish/v1", get(service_root))
        .route("/redfish/v1/", get(service_root))
        .route(
            "/redfish/v1/SessionService/Sessions",
            get(sessions)
                .post(session_create)
                .route_layer(middleware::from_fn_with_state(
                    bmc.clone(),
                    require_auth_except_post::<M>,
                )),
        )
        .merge(protected)
        .fallback(|request: Request| async move {
            RedfishError::NotFound {
                uri: request.uri().path().to_owned(),
            }
        })
        .with_state(bmc)
}

async fn require_auth<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    request: Request,
    next: Next,
) -> Response {
    if bmc.authorized(request.headers()) {
        next.run(request).await
    } else {
        RedfishError::Unauthorized.into_response()
    }
}

async fn require_auth_except_post<M: MachineControl>(
    state: State<Arc<RedfishBmc<M>>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == http::Method::POST {
        next.run(request).await
    } else {
        require_auth(state, request, next).await
    }
}

fn odata(id: &str, odata_type: &str) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("@odata.id".into(), json!(id));
    map.insert("@odata.type".into(), json!(odata_type));
    map
}

fn with(mut map: Map<String, Value>, extra: Value) -> Json<Value> {
    if let Value::Object(extra) = extra {
        map.extend(extra);
    }
    Json(Value::Object(map))
}

fn collection(id: &str, odata_type: &str, name: &str, members: &[String]) -> Json<Value> {
    let members: Vec<Value> = members
        .iter()
        .map(|uri| json!({"@odata.id": uri}))
        .collect();
    with(
        odata(id, odata_type),
        json!({"Name": name, "Members@odata.count": members.len(), "Members": members}),
    )
}

async fn service_root<M: MachineControl>(State(bmc): State<Arc<RedfishBmc<M>>>) -> Json<Value> {
    with(
        odata("/redfish/v1/", "#ServiceRoot.v1_5_0.ServiceRoot"),
        json!({
            "Id": "RootService",
            "Name": format!("Ferric lab BMC of {}", bmc.system_id()),
            "RedfishVersion": "1.6.0",
            "Vendor": "Ferric",
            "Systems": {"@odata.id": "/redfish/v1/Systems"},
            "Managers": {"@odata.id": "/redfish/v1/Managers"},
            "SessionService": {"@odata.id": "/redfish/v1/SessionService"},
            "Registries": {"@odata.id": "/redfish/v1/Registries"},
            "UpdateService": {"@odata.id": "/redfish/v1/UpdateService"},
            "Tasks": {"@odata.id": "/redfish/v1/TaskService"},
            "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}},
        }),
    )
}

async fn session_service() -> Json<Value> {
    with(
        odata(
            "/redfish/v1/SessionService",
            "#SessionService.v1_1_6.SessionService",
        ),
        json!({
            "Id": "SessionService",
            "Name": "Session Service",
            "ServiceEnabled": true,
            "SessionTimeout": 3600,
            "Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"},
        }),
    )
}

fn session_uri(id: &str) -> String {
    format!("/redfish/v1/SessionService/Sessions/{id}")
}

fn session_body(id: &str, username: &str) -> Json<Value> {
    with(
        odata(&session_uri(id), "#Session.v1_1_0.Session"),
        json!({"Id": id, "Name": format!("Session {id}"), "UserName": username}),
    )
}

async fn sessions<M: MachineControl>(State(bmc): State<Arc<RedfishBmc<M>>>) -> Json<Value> {
    let mut ids: Vec<String> = bmc.lock_sessions().values().cloned().collect();
    ids.sort();
    let uris: Vec<String> = ids.iter().map(|id| session_uri(id)).collect();
    collection(
        "/redfish/v1/SessionService/Sessions",
        "#SessionCollection.SessionCollection",
        "Session Collection",
        &uris,
    )
}

async fn session_create<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    body: axum::body::Bytes,
) -> Result<Response, RedfishError> {
    let body = parse_object(&body)?;
    let field = |name: &str| -> Result<String, RedfishError> {
        body.get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| RedfishError::ParameterMissing {
                parameter: name.to_owned(),
            })
    };
    let (username, password) = (field("UserName")?, field("Password")?);
    if username != bmc.username || password != bmc.password {
        return Err(RedfishError::Unauthorized);
    }
    let token = secret::random_hex(16).map_err(|source| {
        RedfishError::Machine(crate::machine::MachineError::Process {
            machine: bmc.system_id().to_owned(),
            operation: "generate a session token",
            source,
        })
    })?;
    let id = {
        let mut next = bmc
            .next_session
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *next += 1;
        next.to_string()
    };
    bmc.lock_sessions().insert(token.clone(), id.clone());
    let mut response = (StatusCode::CREATED, session_body(&id, &username)).into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&token) {
        headers.insert("x-auth-token", value);
    }
    if let Ok(value) = HeaderValue::from_str(&session_uri(&id)) {
        headers.insert(header::LOCATION, value);
    }
    Ok(response)
}

async fn session_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    if bmc.lock_sessions().values().any(|session| *session == id) {
        Ok(session_body(&id, &bmc.username))
    } else {
        Err(RedfishError::NotFound {
            uri: session_uri(&id),
        })
    }
}

async fn session_delete<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<StatusCode, RedfishError> {
    let mut sessions = bmc.lock_sessions();
    let before = sessions.len();
    sessions.retain(|_, session| *session != id);
    if sessions.len() < before {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(RedfishError::NotFound {
            uri: session_uri(&id),
        })
    }
}

async fn systems<M: MachineControl>(State(bmc): State<Arc<RedfishBmc<M>>>) -> Json<Value> {
    collection(
        "/redfish/v1/Systems",
        "#ComputerSystemCollection.ComputerSystemCollection",
        "Computer System Collection",
        &[bmc.system_uri()],
    )
}

fn names<T: Copy>(table: &[(T, &'static str)]) -> Vec<&'static str> {
    table.iter().map(|(_, name)| *name).collect()
}

fn name_of<T: Copy + PartialEq>(table: &[(T, &'static str)], value: T) -> &'static str {
    table
        .iter()
        .find(|(candidate, _)| *candidate == value)
        .map_or("None", |(_, name)| *name)
}

async fn system_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = bmc.system_uri();
    bmc.check_system(&id, &format!("/redfish/v1/Systems/{id}"))?;
    let info = bmc.machine.info();
    let power = match bmc
        .machine
        .power_state()
        .await
        .map_err(RedfishError::Machine)?
    {
        PowerState::On => "On",
        PowerState::Off => "Off",
        PowerState::PoweringOff => "PoweringOff",
    };
    let boot = bmc.machine.boot();
    let modes = bmc.machine.boot_modes();
    // UEFI HTTP boot exists only where the firmware is UEFI.
    let targets: Vec<&str> = TARGETS
        .iter()
        .filter(|(target, _)| *target != BootTarget::UefiHttp || modes.contains(&BootMode::Uefi))
        .map(|(_, name)| *name)
        .collect();
    let mode_names: Vec<&str> = modes.iter().map(|mode| name_of(&MODES, *mode)).collect();
    let bios_version = bmc.lock_firmware().bios_version.clone();
    let resets: Vec<&str> = PowerAction::ALL
        .iter()
        .map(|action| action.redfish_name())
        .collect();
    Ok(with(
        odata(&uri, "#ComputerSystem.v1_10_0.ComputerSystem"),
        json!({
            "Id": info.name,
            "Name": info.name,
            "SystemType": "Virtual",
            "Manufacturer": "Ferric",
            "Model": "Ferric Lab Machine",
            "SerialNumber": info.serial,
            "UUID": info.uuid,
            "PowerState": power,
            "BiosVersion": bios_version,
            "Bios": {"@odata.id": format!("{uri}/Bios")},
            "Status": {"State": "Enabled", "Health": "OK"},
            "Boot": {
                "BootSourceOverrideTarget": name_of(&TARGETS, boot.target),
                "BootSourceOverrideTarget@Redfish.AllowableValues": targets,
                "BootSourceOverrideEnabled": name_of(&OVERRIDES, boot.enabled),
                "BootSourceOverrideEnabled@Redfish.AllowableValues": names(&OVERRIDES),
                "BootSourceOverrideMode": name_of(&MODES, boot.mode),
                "BootSourceOverrideMode@Redfish.AllowableValues": mode_names,
            },
            "ProcessorSummary": {
                "Count": info.cpus,
                "Model": "QEMU TCG x86-64",
                "Status": {"State": "Enabled", "Health": "OK"},
            },
            "MemorySummary": {
                "TotalSystemMemoryGiB": f64::from(info.memory_mib) / 1024.0,
                "Status": {"State": "Enabled", "Health": "OK"},
            },
            "Processors": {"@odata.id": format!("{uri}/Processors")},
            "Memory": {"@odata.id": format!("{uri}/Memory")},
            "SimpleStorage": {"@odata.id": format!("{uri}/SimpleStorage")},
            "EthernetInterfaces": {"@odata.id": format!("{uri}/EthernetInterfaces")},
            "VirtualMedia": {"@odata.id": vmedia::system_collection(&info.name)},
            "Links": {"ManagedBy": [{"@odata.id": format!("/redfish/v1/Managers/{MANAGER_ID}")}]},
            "Actions": {
                "#ComputerSystem.Reset": {
                    "target": format!("{uri}/Actions/ComputerSystem.Reset"),
                    "ResetType@Redfish.AllowableValues": resets,
                },
            },
        }),
    ))
}

fn parse_object(body: &[u8]) -> Result<Map<String, Value>, RedfishError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(RedfishError::MalformedJson {
            detail: "expected a JSON object".into(),
        }),
        Err(error) => Err(RedfishError::MalformedJson {
            detail: error.to_string(),
        }),
    }
}

fn parse_enum<T: Copy>(
    table: &[(T, &'static str)],
    property: &str,
    value: &Value,
) -> Result<T, RedfishError> {
    let text = value.as_str();
    table
        .iter()
        .find(|(_, name)| Some(*name) == text)
        .map(|(item, _)| *item)
        .ok_or_else(|| RedfishError::ValueNotInList {
            property: property.to_owned(),
            value: value.to_string(),
        })
}

/// Applies a PATCH body's `Boot` object to the current settings; only `Boot` is writable.
pub(crate) fn patched_boot(
    current: BootSettings,
    body: &Map<String, Value>,
) -> Result<BootSettings, RedfishError> {
    let mut boot = current;
    for (property, value) in body {
        if property != "Boot" {
            return Err(RedfishError::PropertyUnknown {
                property: property.clone(),
            });
        }
        let Value::Object(fields) = value else {
            return Err(RedfishError::MalformedJson {
                detail: "Boot must be an object".into(),
            });
        };
        for (field, value) in fields {
            let property = format!("Boot/{field}");
            match field.as_str() {
                "BootSourceOverrideTarget" => boot.target = parse_enum(&TARGETS, &property, value)?,
                "BootSourceOverrideEnabled" => {
                    boot.enabled = parse_enum(&OVERRIDES, &property, value)?
                }
                "BootSourceOverrideMode" => boot.mode = parse_enum(&MODES, &property, value)?,
                _ => return Err(RedfishError::PropertyUnknown { property }),
            }
        }
    }
    Ok(boot)
}

async fn system_patch<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, RedfishError> {
    bmc.check_system(&id, &format!("/redfish/v1/Systems/{id}"))?;
    let boot = patched_boot(bmc.machine.boot(), &parse_object(&body)?)?;
    if !bmc.machine.boot_modes().contains(&boot.mode) {
        return Err(RedfishError::ValueNotInList {
            property: "Boot/BootSourceOverrideMode".into(),
            value: format!("\"{}\"", name_of(&MODES, boot.mode)),
        });
    }
    if boot.target == BootTarget::UefiHttp && boot.mode != BootMode::Uefi {
        return Err(RedfishError::ValueNotInList {
            property: "Boot/BootSourceOverrideTarget".into(),
            value: "\"UefiHttp\" (UEFI HTTP boot needs BootSourceOverrideMode UEFI)".into(),
        });
    }
    bmc.machine
        .set_boot(boot)
        .await
        .map_err(RedfishError::Machine)?;
    tracing::info!(system = %id, ?boot, "boot settings changed");
    system_get(State(bmc), Path(id)).await
}

async fn system_reset<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<StatusCode, RedfishError> {
    bmc.check_system(
        &id,
        &format!("/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset"),
    )?;
    let body = parse_object(&body)?;
    let reset_type = body
        .get("ResetType")
        .ok_or_else(|| RedfishError::ParameterMissing {
            parameter: "ResetType".into(),
        })?;
    let action = reset_type
        .as_str()
        .and_then(PowerAction::from_redfish_name)
        .ok_or_else(|| RedfishError::ValueNotInList {
            property: "ResetType".into(),
            value: reset_type.to_string(),
        })?;
    bmc.machine
        .power(action)
        .await
        .map_err(RedfishError::Machine)?;
    if matches!(
        action,
        PowerAction::On
            | PowerAction::ForceRestart
            | PowerAction::GracefulRestart
            | PowerAction::PowerCycle
    ) {
        // The machine boots: pending BIOS settings take effect.
        bmc.lock_firmware().booted();
    }
    tracing::info!(system = %id, reset = action.redfish_name(), "reset done");
    Ok(StatusCode::NO_CONTENT)
}

const CPU_ID: &str = "CPU.1";
const DIMM_ID: &str = "DIMM.1";
const STORAGE_ID: &str = "SATA.1";

/// One processor package with all the machine's vCPUs (QEMU's default topology).
async fn processors<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Processors");
    bmc.check_system(&id, &uri)?;
    Ok(collection(
        &uri,
        "#ProcessorCollection.ProcessorCollection",
        "Processors Collection",
        &[format!("{uri}/{CPU_ID}")],
    ))
}

async fn processor_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, cpu)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Processors/{cpu}");
    bmc.check_system(&id, &uri)?;
    if cpu != CPU_ID {
        return Err(RedfishError::NotFound { uri });
    }
    let cpus = bmc.machine.info().cpus;
    Ok(with(
        odata(&uri, "#Processor.v1_7_0.Processor"),
        json!({
            "Id": CPU_ID,
            "Name": "Processor 1",
            "Socket": "CPU 1",
            "ProcessorType": "CPU",
            "ProcessorArchitecture": "x86",
            "InstructionSet": "x86-64",
            "Manufacturer": "QEMU",
            "Model": "QEMU TCG x86-64",
            "MaxSpeedMHz": 2000,
            "TotalCores": cpus,
            "TotalThreads": cpus,
            "Status": {"State": "Enabled", "Health": "OK"},
        }),
    ))
}

/// One DIMM with all the machine's memory.
async fn memory<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Memory");
    bmc.check_system(&id, &uri)?;
    Ok(collection(
        &uri,
        "#MemoryCollection.MemoryCollection",
        "Memory Module Collection",
        &[format!("{uri}/{DIMM_ID}")],
    ))
}

async fn memory_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, dimm)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Memory/{dimm}");
    bmc.check_system(&id, &uri)?;
    if dimm != DIMM_ID {
        return Err(RedfishError::NotFound { uri });
    }
    Ok(with(
        odata(&uri, "#Memory.v1_7_0.Memory"),
        json!({
            "Id": DIMM_ID,
            "Name": "DIMM 1",
            "MemoryType": "DRAM",
            "MemoryDeviceType": "DDR4",
            "CapacityMiB": bmc.machine.info().memory_mib,
            "Status": {"State": "Enabled", "Health": "OK"},
        }),
    ))
}

/// The machine's disks (virtio, `qemu-img` images of the lab's size).
async fn simple_storage<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/SimpleStorage");
    bmc.check_system(&id, &uri)?;
    Ok(collection(
        &uri,
        "#SimpleStorageCollection.SimpleStorageCollection",
        "Simple Storage Collection",
        &[format!("{uri}/{STORAGE_ID}")],
    ))
}

async fn simple_storage_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, controller)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/SimpleStorage/{controller}");
    bmc.check_system(&id, &uri)?;
    if controller != STORAGE_ID {
        return Err(RedfishError::NotFound { uri });
    }
    let disks = if bmc.disk_bytes == 0 {
        0
    } else {
        crate::layout::DISKS
    };
    let devices: Vec<Value> = (1..=disks)
        .map(|index| {
            json!({
                "Name": format!("Disk {index}"),
                "Manufacturer": "QEMU",
                "Model": "QEMU HARDDISK",
                "CapacityBytes": bmc.disk_bytes,
                "Status": {"State": "Enabled", "Health": "OK"},
            })
        })
        .collect();
    Ok(with(
        odata(&uri, "#SimpleStorage.v1_2_0.SimpleStorage"),
        json!({
            "Id": STORAGE_ID,
            "Name": "Simple Storage Controller",
            "Devices": devices,
            "Status": {"State": "Enabled", "Health": "OK"},
        }),
    ))
}

const NIC_ID: &str = "NIC.1";

async fn nics<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/EthernetInterfaces");
    bmc.check_system(&id, &uri)?;
    Ok(collection(
        &uri,
        "#EthernetInterfaceCollection.EthernetInterfaceCollection",
        "Ethernet Interface Collection",
        &[format!("{uri}/{NIC_ID}")],
    ))
}

async fn nic_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path((id, nic)): Path<(String, String)>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/EthernetInterfaces/{nic}");
    bmc.check_system(&id, &uri)?;
    if nic != NIC_ID {
        return Err(RedfishError::NotFound { uri });
    }
    let mac = &bmc.machine.info().mac;
    Ok(with(
        odata(&uri, "#EthernetInterface.v1_4_0.EthernetInterface"),
        json!({
            "Id": NIC_ID,
            "Name": "virtio-net NIC",
            "MACAddress": mac,
            "PermanentMACAddress": mac,
            "LinkStatus": "LinkUp",
            "Status": {"State": "Enabled", "Health": "OK"},
        }),
    ))
}

async fn managers() -> Json<Value> {
    collection(
        "/redfish/v1/Managers",
        "#ManagerCollection.ManagerCollection",
        "Manager Collection",
        &[format!("/redfish/v1/Managers/{MANAGER_ID}")],
    )
}

async fn manager_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Managers/{id}");
    if id != MANAGER_ID {
        return Err(RedfishError::NotFound { uri });
    }
    let version = bmc.lock_firmware().bmc_version.clone();
    Ok(with(
        odata(&uri, "#Manager.v1_5_0.Manager"),
        json!({
            "Id": MANAGER_ID,
            "Name": "Ferric virtual BMC",
            "ManagerType": "BMC",
            "FirmwareVersion": version,
            "Status": {"State": "Enabled", "Health": "OK"},
            "VirtualMedia": {"@odata.id": vmedia::manager_collection()},
            "Links": {"ManagerForServers": [{"@odata.id": bmc.system_uri()}]},
        }),
    ))
}

async fn bios_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Bios");
    bmc.check_system(&id, &uri)?;
    let attributes = bmc.lock_firmware().attributes();
    Ok(with(
        odata(&uri, "#Bios.v1_1_0.Bios"),
        json!({
            "Id": "Bios",
            "Name": "BIOS Configuration Current Settings",
            "AttributeRegistry": firmware::REGISTRY,
            "Attributes": attributes,
            "@Redfish.Settings": {
                "@odata.type": "#Settings.v1_3_0.Settings",
                "SettingsObject": {"@odata.id": format!("{uri}/Settings")},
                "SupportedApplyTimes": ["OnReset"],
            },
            "Actions": {
                "#Bios.ResetBios": {"target": format!("{uri}/Actions/Bios.ResetBios")},
            },
        }),
    ))
}

async fn bios_settings_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Systems/{id}/Bios/Settings");
    bmc.check_system(&id, &uri)?;
    let pending = bmc.lock_firmware().pending();
    Ok(with(
        odata(&uri, "#Bios.v1_1_0.Bios"),
        json!({
            "Id": "Settings",
            "Name": "BIOS Configuration Pending Settings",
            "AttributeRegistry": firmware::REGISTRY,
            "Attributes": pending,
        }),
    ))
}

async fn bios_settings_patch<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<StatusCode, RedfishError> {
    bmc.check_system(&id, &format!("/redfish/v1/Systems/{id}/Bios/Settings"))?;
    let body = parse_object(&body)?;
    bmc.lock_firmware().set_pending(&body)?;
    tracing::info!(system = %id, "BIOS settings pending until the next boot");
    Ok(StatusCode::NO_CONTENT)
}

async fn bios_reset<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(id): Path<String>,
) -> Result<StatusCode, RedfishError> {
    bmc.check_system(
        &id,
        &format!("/redfish/v1/Systems/{id}/Bios/Actions/Bios.ResetBios"),
    )?;
    bmc.lock_firmware().reset_to_defaults();
    tracing::info!(system = %id, "BIOS defaults pending until the next boot");
    Ok(StatusCode::NO_CONTENT)
}

fn registry_uri() -> String {
    format!("/redfish/v1/Registries/{}", firmware::REGISTRY)
}

async fn registries() -> Json<Value> {
    collection(
        "/redfish/v1/Registries",
        "#MessageRegistryFileCollection.MessageRegistryFileCollection",
        "Registry File Collection",
        &[registry_uri()],
    )
}

async fn registry_file(Path(registry): Path<String>) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/Registries/{registry}");
    if registry != firmware::REGISTRY {
        return Err(RedfishError::NotFound { uri });
    }
    Ok(with(
        odata(&uri, "#MessageRegistryFile.v1_1_0.MessageRegistryFile"),
        json!({
            "Id": registry,
            "Name": "BIOS attribute registry file",
            "Registry": registry,
            "Languages": ["en"],
            "Location": [{"Language": "en", "Uri": format!("{uri}/Registry")}],
        }),
    ))
}

async fn registry_get(Path(registry): Path<String>) -> Result<Json<Value>, RedfishError> {
    if registry != firmware::REGISTRY {
        return Err(RedfishError::NotFound {
            uri: format!("/redfish/v1/Registries/{registry}/Registry"),
        });
    }
    Ok(Json(firmware::registry()))
}

async fn update_service() -> Json<Value> {
    with(
        odata(
            "/redfish/v1/UpdateService",
            "#UpdateService.v1_8_0.UpdateService",
        ),
        json!({
            "Id": "UpdateService",
            "Name": "Update Service",
            "ServiceEnabled": true,
            "Actions": {
                "#UpdateService.SimpleUpdate": {
                    "target": "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
                    "TransferProtocol@Redfish.AllowableValues": ["HTTP", "HTTPS"],
                },
            },
        }),
    )
}

/// `SimpleUpdate`: `ImageURI` and `Targets` (the system for its BIOS, the Manager for the
/// BMC; none means the BIOS). 202 with the task in `Location`.
async fn simple_update<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    body: axum::body::Bytes,
) -> Result<Response, RedfishError> {
    let body = parse_object(&body)?;
    let image = body
        .get("ImageURI")
        .and_then(Value::as_str)
        .filter(|image| !image.is_empty())
        .ok_or_else(|| RedfishError::ParameterMissing {
            parameter: "ImageURI".to_owned(),
        })?;
    let manager = format!("/redfish/v1/Managers/{MANAGER_ID}");
    let targets: Vec<&str> = body
        .get("Targets")
        .and_then(Value::as_array)
        .map(|targets| targets.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let component = match targets.as_slice() {
        [] => Component::Bios,
        [target] if target.trim_end_matches('/') == bmc.system_uri() => Component::Bios,
        [target] if target.trim_end_matches('/') == manager => Component::Bmc,
        _ => {
            return Err(RedfishError::ValueNotInList {
                property: "Targets".to_owned(),
                value: json!(targets).to_string(),
            });
        }
    };
    let (id, task) = {
        let mut state = bmc.lock_firmware();
        let id = state.start_update(component, image);
        (id, state.read_task_unchanged(id))
    };
    tracing::info!(image, ?component, task = id, "firmware update started");
    let mut response = (StatusCode::ACCEPTED, Json(task)).into_response();
    if let Ok(value) = HeaderValue::from_str(&firmware::task_uri(id)) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

async fn task_service() -> Json<Value> {
    with(
        odata("/redfish/v1/TaskService", "#TaskService.v1_1_4.TaskService"),
        json!({
            "Id": "TaskService",
            "Name": "Task Service",
            "ServiceEnabled": true,
            "Tasks": {"@odata.id": "/redfish/v1/TaskService/Tasks"},
        }),
    )
}

async fn tasks<M: MachineControl>(State(bmc): State<Arc<RedfishBmc<M>>>) -> Json<Value> {
    let uris: Vec<String> = bmc
        .lock_firmware()
        .task_ids()
        .into_iter()
        .map(firmware::task_uri)
        .collect();
    collection(
        "/redfish/v1/TaskService/Tasks",
        "#TaskCollection.TaskCollection",
        "Task Collection",
        &uris,
    )
}

async fn task_get<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
    Path(task): Path<String>,
) -> Result<Json<Value>, RedfishError> {
    let uri = format!("/redfish/v1/TaskService/Tasks/{task}");
    let id: u64 = task
        .parse()
        .map_err(|_| RedfishError::NotFound { uri: uri.clone() })?;
    bmc.lock_firmware()
        .read_task(id)
        .map(Json)
        .ok_or(RedfishError::NotFound { uri })
}

#[cfg(test)]
mod tests;
