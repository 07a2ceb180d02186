//! The lab BMC's SessionService: login with `POST .../Sessions` (open, as DSP0266 requires),
//! the session list, and logout with `DELETE`; the token goes in `X-Auth-Token`.

use std::sync::{Arc, PoisonError};

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::RedfishBmc;
use super::error::RedfishError;
use super::wire::{collection, odata, parse_object, with};
use crate::machine::MachineControl;
use crate::secret;

/// The routes behind authentication (the login itself is routed in `router`).
pub(crate) fn routes<M: MachineControl>() -> Router<Arc<RedfishBmc<M>>> {
    Router::new()
        .route("/redfish/v1/SessionService", get(session_service))
        .route(
            "/redfish/v1/SessionService/Sessions/{id}",
            get(session_get::<M>).delete(session_delete::<M>),
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

pub(crate) async fn sessions<M: MachineControl>(
    State(bmc): State<Arc<RedfishBmc<M>>>,
) -> Json<Value> {
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

pub(crate) async fn session_create<M: MachineControl>(
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
