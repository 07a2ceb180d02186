//! The Redfish front-end of a virtual BMC: DMTF resources over HTTP for one machine.
//!
//! Each BMC serves exactly one ComputerSystem and one Manager, as a server's own BMC does. All
//! machine work goes through [`MachineControl`], so the IPMI front-end (TODO-ipmi: chassis
//! control, boot options and "get device id" over RMCP+ on UDP 623, sharing the same `Machine`)
//! needs no change here. Authentication: HTTP basic auth with the generated credentials, or a
//! session token from `POST /redfish/v1/SessionService/Sessions` in `X-Auth-Token`.

mod bios;
mod error;
pub mod firmware;
mod inventory;
mod raid;
mod sessions;
mod storage;
mod systems;
mod update;
mod vmedia;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

pub use error::RedfishError;
use firmware::FirmwareState;
pub use wire::MANAGER_ID;
use wire::{collection, odata, with};

use crate::machine::MachineControl;
use crate::secret;

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
    /// The RAID controller's drives, volumes and their tasks (`raid.rs`).
    raid: Mutex<raid::RaidState>,
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
            raid: Mutex::new(raid::RaidState::new(
                &machine.info().name,
                &machine.info().serial,
            )),
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

    fn lock_raid(&self) -> std::sync::MutexGuard<'_, raid::RaidState> {
        self.raid.lock().unwrap_or_else(PoisonError::into_inner)
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
        .route("/redfish/v1/Managers", get(managers))
        .route("/redfish/v1/Managers/{id}", get(manager_get))
        .merge(sessions::routes::<M>())
        .merge(systems::routes::<M>())
        .merge(inventory::routes::<M>())
        .merge(storage::routes::<M>())
        .merge(bios::routes::<M>())
        .merge(update::routes::<M>())
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
            get(sessions::sessions)
                .post(sessions::session_create)
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
            "VirtualMedia": {"@odata.id": wire::manager_vmedia()},
            "Links": {"ManagerForServers": [{"@odata.id": bmc.system_uri()}]},
        }),
    ))
}

#[cfg(test)]
mod tests;
