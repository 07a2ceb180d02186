//! An in-process Redfish BMC simulator for tests and benchmarks (feature `simulator`): many
//! ComputerSystems behind a few BMC addresses, each with a power state, boot override and a
//! fault that can be injected and cleared while it runs.
//!
//! Theory of operation: `bmcs` listeners on loopback addresses `127.1.x.y` (one per BMC, all
//! on the same port, since the conductor limits requests per BMC *address*) share one router.
//! System `i` lives on BMC `i / systems_per_bmc` at `/redfish/v1/Systems/{i}`. A fault applies
//! to every request naming its system: [`Fault::Delay`] answers late, [`Fault::Drop`] never
//! answers (the client's read timeout fires), [`Fault::ServerError`] answers HTTP 500 with a
//! Redfish error body, [`Fault::Garbage`] answers HTTP 200 with a body that is not JSON. Power
//! actions take effect at once. No process or thread per node: the whole fleet is a few
//! tasks on the caller's runtime.
//!
//! `crates/ferric-conductor/tests/bmc_faults.rs` drives 1,000 nodes on it; `cargo xtask
//! bench-power-sync` and `bench-scale` run it as a child process.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::task::JoinSet;

/// A misbehaviour of one simulated system's BMC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer correctly, but only after this long.
    Delay(Duration),
    /// Never answer (the connection stays open until the client gives up).
    Drop,
    /// Answer HTTP 500 with a Redfish error body.
    ServerError,
    /// Answer HTTP 200 with a body that is not JSON.
    Garbage,
}

#[derive(Debug, Clone)]
struct System {
    powered_on: bool,
    boot_target: String,
    boot_enabled: String,
    fault: Option<Fault>,
}

#[derive(Debug)]
struct Shared {
    systems: Mutex<Vec<System>>,
    systems_per_bmc: usize,
    requests: AtomicU64,
}

impl Shared {
    fn systems(&self) -> std::sync::MutexGuard<'_, Vec<System>> {
        // Every change is one field write: the data stays consistent even after a panic.
        self.systems.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running simulator; dropping it stops every listener.
#[derive(Debug)]
pub struct RedfishSimulator {
    shared: Arc<Shared>,
    port: u16,
    bmcs: usize,
    /// The listeners' tasks, aborted when the simulator is dropped.
    _servers: JoinSet<()>,
}

/// The loopback address of BMC number `index` (127.1.0.1, 127.1.0.2, …).
pub fn bmc_ip(index: usize) -> Ipv4Addr {
    let host = index as u32 + 1;
    Ipv4Addr::new(127, 1, (host >> 8) as u8, host as u8)
}

impl RedfishSimulator {
    /// Starts `systems` systems, `systems_per_bmc` per BMC address, all powered off.
    pub async fn start(systems: usize, systems_per_bmc: usize) -> std::io::Result<Self> {
        let systems_per_bmc = systems_per_bmc.max(1);
        let bmcs = systems.div_ceil(systems_per_bmc).max(1);
        let shared = Arc::new(Shared {
            systems: Mutex::new(vec![
                System {
                    powered_on: false,
                    boot_target: "None".to_owned(),
                    boot_enabled: "Disabled".to_owned(),
                    fault: None,
                };
                systems
            ]),
            systems_per_bmc,
            requests: AtomicU64::new(0),
        });
        let router = Router::new()
            .route("/redfish/v1/", get(service_root))
            .route("/redfish/v1/Systems", get(systems_collection))
            .route(
                "/redfish/v1/Systems/{id}",
                get(system_get).patch(system_patch),
            )
            .route(
                "/redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset",
                post(system_reset),
            )
            .with_state(shared.clone());
        let first = tokio::net::TcpListener::bind(SocketAddr::from((bmc_ip(0), 0))).await?;
        let port = first.local_addr()?.port();
        let mut listeners = vec![first];
        for index in 1..bmcs {
            listeners.push(
                tokio::net::TcpListener::bind(SocketAddr::from((bmc_ip(index), port))).await?,
            );
        }
        let mut servers = JoinSet::new();
        for listener in listeners {
            let router = router.clone();
            servers.spawn(async move {
                if let Err(error) = axum::serve(listener, router).await {
                    tracing::warn!(%error, "the Redfish simulator stopped serving");
                }
            });
        }
        Ok(Self {
            shared,
            port,
            bmcs,
            _servers: servers,
        })
    }

    /// How many BMC addresses serve the systems.
    pub fn bmcs(&self) -> usize {
        self.bmcs
    }

    /// The `redfish_address` of the BMC that serves system `index`.
    pub fn address(&self, index: usize) -> String {
        format!(
            "http://{}:{}",
            bmc_ip(index / self.shared.systems_per_bmc),
            self.port
        )
    }

    /// The `redfish_system_id` of system `index`.
    pub fn system_id(index: usize) -> String {
        format!("/redfish/v1/Systems/{index}")
    }

    /// A node's `driver_info` for system `index` (basic authentication).
    pub fn driver_info(&self, index: usize) -> serde_json::Map<String, Value> {
        let info = json!({
            "redfish_address": self.address(index),
            "redfish_system_id": Self::system_id(index),
            "redfish_username": "admin",
            "redfish_password": "password",
            "redfish_auth_type": "basic",
        });
        info.as_object().cloned().unwrap_or_default()
    }

    /// Injects (`Some`) or clears (`None`) a fault on system `index`.
    pub fn set_fault(&self, index: usize, fault: Option<Fault>) {
        if let Some(system) = self.shared.systems().get_mut(index) {
            system.fault = fault;
        }
    }

    /// Whether system `index` is powered on.
    pub fn powered_on(&self, index: usize) -> bool {
        self.shared
            .systems()
            .get(index)
            .is_some_and(|system| system.powered_on)
    }

    /// Turns system `index` on or off behind the conductor's back (someone at the machine).
    pub fn set_powered_on(&self, index: usize, on: bool) {
        if let Some(system) = self.shared.systems().get_mut(index) {
            system.powered_on = on;
        }
    }

    /// Requests received so far, answered or not.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }
}

/// What a request for system `id` gets before its real answer: a fault's answer, or `None` to
/// go on (after a delay, if that is the fault).
async fn fault_answer(shared: &Shared, id: &str) -> Result<usize, Response> {
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let index: usize = id
        .parse()
        .map_err(|_| not_found(&format!("/redfish/v1/Systems/{id}")))?;
    let fault = match shared.systems().get(index) {
        Some(system) => system.fault,
        None => return Err(not_found(&format!("/redfish/v1/Systems/{id}"))),
    };
    match fault {
        None => Ok(index),
        Some(Fault::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            Ok(index)
        }
        Some(Fault::Drop) => std::future::pending().await,
        Some(Fault::ServerError) => Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {
                "code": "Base.1.0.InternalError",
                "message": "The simulated BMC failed (injected fault).",
            }})),
        )
            .into_response()),
        Some(Fault::Garbage) => Err((StatusCode::OK, "\u{1}\u{2}<html>not json").into_response()),
    }
}

fn not_found(path: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"error": {
            "code": "Base.1.0.ResourceMissingAtURI",
            "message": format!("{path} does not exist"),
        }})),
    )
        .into_response()
}

async fn service_root() -> Response {
    axum::Json(json!({
        "@odata.id": "/redfish/v1/",
        "RedfishVersion": "1.6.0",
        "Systems": {"@odata.id": "/redfish/v1/Systems"},
    }))
    .into_response()
}

async fn systems_collection(State(shared): State<Arc<Shared>>) -> Response {
    let count = shared.systems().len();
    let members: Vec<Value> = (0..count)
        .map(|index| json!({"@odata.id": RedfishSimulator::system_id(index)}))
        .collect();
    axum::Json(json!({"Members@odata.count": count, "Members": members})).into_response()
}

async fn system_get(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let index = match fault_answer(&shared, &id).await {
        Ok(index) => index,
        Err(answer) => return answer,
    };
    let Some(system) = shared.systems().get(index).cloned() else {
        return not_found(&id);
    };
    axum::Json(json!({
        "@odata.id": RedfishSimulator::system_id(index),
        "Id": id,
        "PowerState": if system.powered_on { "On" } else { "Off" },
        "Boot": {
            "BootSourceOverrideTarget": system.boot_target,
            "BootSourceOverrideEnabled": system.boot_enabled,
            "BootSourceOverrideMode": "UEFI",
        },
        "Actions": {"#ComputerSystem.Reset": {
            "target": format!("{}/Actions/ComputerSystem.Reset", RedfishSimulator::system_id(index)),
        }},
    }))
    .into_response()
}

async fn system_patch(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let index = match fault_answer(&shared, &id).await {
        Ok(index) => index,
        Err(answer) => return answer,
    };
    if let Some(system) = shared.systems().get_mut(index) {
        if let Some(target) = body
            .pointer("/Boot/BootSourceOverrideTarget")
            .and_then(Value::as_str)
        {
            system.boot_target = target.to_owned();
        }
        if let Some(enabled) = body
            .pointer("/Boot/BootSourceOverrideEnabled")
            .and_then(Value::as_str)
        {
            system.boot_enabled = enabled.to_owned();
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn system_reset(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let index = match fault_answer(&shared, &id).await {
        Ok(index) => index,
        Err(answer) => return answer,
    };
    let on = match body.get("ResetType").and_then(Value::as_str) {
        Some("On" | "ForceOn" | "ForceRestart" | "GracefulRestart" | "PowerCycle") => true,
        Some("ForceOff" | "GracefulShutdown") => false,
        Some("Nmi") => return StatusCode::NO_CONTENT.into_response(),
        other => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": {
                    "code": "Base.1.0.ActionParameterNotSupported",
                    "message": format!("ResetType {other:?} is not supported"),
                }})),
            )
                .into_response();
        }
    };
    if let Some(system) = shared.systems().get_mut(index) {
        system.powered_on = on;
    }
    StatusCode::NO_CONTENT.into_response()
}
