//! Vendor passthru: methods a driver offers beyond the standard interfaces
//! (`reference/ironic.md` §2.5), on a node — `GET /v1/nodes/{node}/vendor_passthru/methods`,
//! `{GET,POST,PUT,PATCH,DELETE} /v1/nodes/{node}/vendor_passthru?method=NAME` — and on a
//! hardware type — the same under `/v1/drivers/{driver}`. The method may also be the last path
//! segment (`…/vendor_passthru/NAME`), as python-ironicclient sends it.
//!
//! The request body (a JSON object; empty means `{}`) is the method's arguments. Node calls
//! are handed to the node's conductor (`Handoff::vendor_passthru`), which runs them under the
//! node's lease; driver calls concern no node and run here. A synchronous method answers 200
//! with its return value as JSON, an asynchronous one 202 with no body. Unknown methods,
//! wrong HTTP methods and missing arguments are 400, with Ironic's words.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use ferric_conductor::{ConductorError, VendorReply};
use ferric_drivers::VendorMethod;
use ferric_model::resources::JsonObject;
use serde_json::Value;

use super::json_object_body;
use super::states::{conductor_error, node};
use crate::{ApiError, ApiState};

/// The method named by `?method=` (or the path), and the arguments in the body.
fn call_of(
    named: Option<String>,
    query: &[(String, String)],
    body: &[u8],
) -> Result<(String, JsonObject), ApiError> {
    let mut method = named;
    for (name, value) in query {
        match name.as_str() {
            "method" if method.is_none() => method = Some(value.clone()),
            "method" => {}
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unknown query parameter '{other}' for a vendor passthru call; pass the \
                     method's arguments in the JSON body."
                )));
            }
        }
    }
    let method = method.filter(|method| !method.is_empty()).ok_or_else(|| {
        ApiError::bad_request(
            "Method not specified: name the vendor method with ?method=NAME (GET \
             …/vendor_passthru/methods lists them).",
        )
    })?;
    let args = if body.iter().all(u8::is_ascii_whitespace) {
        JsonObject::new()
    } else {
        json_object_body(body)?
    };
    Ok((method, args))
}

/// What the caller gets: 202 and no body for an asynchronous method, otherwise 200 with the
/// return value — as JSON, or the value itself when the method attaches it.
fn answer(reply: VendorReply) -> Response {
    let status = if reply.is_async {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    if reply.is_async && reply.value.is_null() {
        return status.into_response();
    }
    if reply.attach {
        let bytes = match reply.value {
            Value::String(text) => text.into_bytes(),
            other => other.to_string().into_bytes(),
        };
        let mut response = (status, bytes).into_response();
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        return response;
    }
    (status, Json(reply.value)).into_response()
}

/// `GET /v1/nodes/{node_ident}/vendor_passthru/methods`: `{"<name>": {async, attach,
/// description, http_methods, require_exclusive_lock}}`.
pub async fn node_vendor_methods(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state, &ident).await?;
    // The node's conductor builds its vendor interface and lists it.
    let listing = state
        .conductor
        .vendor_methods(node.uuid)
        .await
        .map_err(conductor_error)?;
    Ok(Json(listing))
}

async fn node_call(
    state: &ApiState,
    ident: &str,
    http_method: &Method,
    named: Option<String>,
    query: &[(String, String)],
    body: &[u8],
) -> Result<Response, ApiError> {
    let node = node(state, ident).await?;
    let (method, args) = call_of(named, query, body)?;
    let reply = state
        .conductor
        .vendor_passthru(node.uuid, &method, http_method.as_str(), args)
        .await
        .map_err(conductor_error)?;
    Ok(answer(reply))
}

/// `… /v1/nodes/{node_ident}/vendor_passthru?method=NAME`.
pub async fn node_vendor_call(
    State(state): State<ApiState>,
    http_method: Method,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    node_call(&state, &ident, &http_method, None, &query, &body).await
}

/// `… /v1/nodes/{node_ident}/vendor_passthru/{method}`.
pub async fn node_vendor_call_named(
    State(state): State<ApiState>,
    http_method: Method,
    Path((ident, method)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    node_call(&state, &ident, &http_method, Some(method), &query, &body).await
}

/// `GET /v1/drivers/{driver_name}/vendor_passthru/methods`: the driver-level methods of the
/// hardware type's default vendor interface.
pub async fn driver_vendor_methods(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    super::drivers::hardware_type(&state, &name)?;
    let vendor = state
        .conductor
        .drivers()
        .driver_vendor(&name)
        .map_err(|error| conductor_error(ConductorError::Driver(error)))?;
    Ok(Json(VendorMethod::listing(vendor.driver_methods(), false)))
}

async fn driver_call(
    state: &ApiState,
    name: &str,
    http_method: &Method,
    named: Option<String>,
    query: &[(String, String)],
    body: &[u8],
) -> Result<Response, ApiError> {
    super::drivers::hardware_type(state, name)?;
    let (method, args) = call_of(named, query, body)?;
    let reply = state
        .conductor
        .driver_vendor_passthru(name, &method, http_method.as_str(), args)
        .await
        .map_err(conductor_error)?;
    Ok(answer(reply))
}

/// `… /v1/drivers/{driver_name}/vendor_passthru?method=NAME`.
pub async fn driver_vendor_call(
    State(state): State<ApiState>,
    http_method: Method,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    driver_call(&state, &name, &http_method, None, &query, &body).await
}

/// `… /v1/drivers/{driver_name}/vendor_passthru/{method}`.
pub async fn driver_vendor_call_named(
    State(state): State<ApiState>,
    http_method: Method,
    Path((name, method)): Path<(String, String)>,
    Query(query): Query<Vec<(String, String)>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    driver_call(&state, &name, &http_method, Some(method), &query, &body).await
}
