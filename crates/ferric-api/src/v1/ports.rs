//! `/v1/ports` and `/v1/nodes/{node_ident}/ports`: create, list, detail, show, PATCH, delete
//! (`reference/ironic.md` §2.6).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::header::LOCATION;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ferric_db::{Kind, PortFilter, PortSortKey, Store};
use ferric_model::Microversion;
use ferric_model::resources::{Ident, Node, Port};
use serde_json::Value;
use uuid::Uuid;

use super::fields::{Selection, check_writable, select, show_selection};
use super::nodes::lease_holder;
use super::paging::{collection_body, parse_list_params};
use super::patch::{OpKind, apply_nested, parse_patch};
use super::port_fields::{
    PORT_DEFAULT_LIST_FIELDS, PORT_FIELDS, PORT_JSON_FIELDS, normalize_mac, port_field_value,
    port_full_json, port_set_field,
};
use super::{base_url, db_error, json_object_body};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// Port list filters and the minor version each appeared in.
const PORT_FILTERS: &[(&str, u16)] = &[
    ("node", 1),
    ("node_uuid", 1),
    ("address", 1),
    ("description_contains", 97),
];

/// Filters Ironic has that are not wired to storage yet: refused clearly, not ignored.
const UNSUPPORTED_PORT_FILTERS: &[&str] = &["portgroup", "shard", "conductor_groups"];

fn port_json(port: &Port, version: Microversion, selection: &Selection, base: &str) -> Value {
    Value::Object(select(
        PORT_FIELDS,
        port_full_json(port, base),
        selection,
        version,
    ))
}

/// A node the caller names in a port (body or filter): missing is the caller's mistake (400).
async fn referenced_node(store: &Store, ident: &Ident) -> Result<Node, ApiError> {
    store.node_get(ident).await.map_err(|error| match error {
        ferric_db::Error::NotFound {
            kind: Kind::Node, ..
        } => ApiError::bad_request(format!("Node {ident} could not be found.")),
        other => db_error(other),
    })
}

async fn port_filter(
    store: &Store,
    pairs: &[(String, String)],
    version: Microversion,
) -> Result<PortFilter, ApiError> {
    let mut filter = PortFilter::default();
    for (name, value) in pairs {
        let Some((_, since)) = PORT_FILTERS.iter().find(|(filter, _)| filter == name) else {
            if UNSUPPORTED_PORT_FILTERS.contains(&name.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "Filtering ports by '{name}' is not supported by this server yet."
                )));
            }
            return Err(ApiError::bad_request(format!(
                "Unknown query parameter '{name}' for listing ports."
            )));
        };
        if version.minor() < *since {
            return Err(ApiError::not_acceptable(format!(
                "Filtering ports by '{name}' needs API version 1.{since} or later; this \
                 request asked for {version}."
            )));
        }
        match name.as_str() {
            "node" | "node_uuid" => {
                if filter.node_uuid.is_some() {
                    return Err(ApiError::bad_request(
                        "Give either 'node' or 'node_uuid', not both.",
                    ));
                }
                let ident = if name == "node_uuid" {
                    Ident::Uuid(Uuid::parse_str(value).map_err(|_| {
                        ApiError::bad_request(format!(
                            "Invalid node_uuid '{value}': expected a UUID."
                        ))
                    })?)
                } else {
                    Ident::parse(value)
                };
                let node = store.node_get(&ident).await.map_err(db_error)?;
                filter.node_uuid = Some(node.uuid);
            }
            "address" => filter.address = Some(normalize_mac(value)?),
            "description_contains" => filter.description_contains = Some(value.clone()),
            _ => {}
        }
    }
    Ok(filter)
}

async fn list(
    state: &ApiState,
    version: Microversion,
    headers: &HeaderMap,
    query: &[(String, String)],
    detail_path: bool,
    node: Option<Uuid>,
) -> Result<Json<Value>, ApiError> {
    let params = parse_list_params::<PortSortKey>(query, PORT_FIELDS, PORT_JSON_FIELDS, version)?;
    if detail_path && params.selection.is_some() {
        return Err(ApiError::bad_request(
            "/v1/ports/detail always shows every field; drop 'fields' and 'detail'.",
        ));
    }
    let selection = if detail_path {
        Selection::All
    } else {
        params.selection.unwrap_or_else(|| {
            Selection::Only(
                PORT_DEFAULT_LIST_FIELDS
                    .iter()
                    .map(|&name| name.to_owned())
                    .collect(),
            )
        })
    };
    let mut filter = port_filter(&state.store, &params.filters, version).await?;
    if let Some(node) = node {
        if filter.node_uuid.is_some() {
            return Err(ApiError::bad_request(
                "The node is already named in the path; drop 'node' and 'node_uuid'.",
            ));
        }
        filter.node_uuid = Some(node);
    }
    let ports = state
        .store
        .port_list(&filter, &params.page)
        .await
        .map_err(db_error)?;
    let base = base_url(headers);
    let items: Vec<Value> = ports
        .iter()
        .map(|port| port_json(port, version, &selection, &base))
        .collect();
    let path = match (node, detail_path) {
        (Some(node), _) => format!("nodes/{node}/ports"),
        (None, true) => "ports/detail".to_owned(),
        (None, false) => "ports".to_owned(),
    };
    let last = ports.last().map(|port| port.uuid);
    Ok(Json(collection_body(
        "ports",
        items,
        &base,
        &path,
        query,
        params.limit,
        last,
    )))
}

/// `GET /v1/ports`: default fields (`uuid`, `address`) or `?fields=`, filtered and paged.
pub async fn port_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, false, None).await
}

/// `GET /v1/ports/detail`: every field.
pub async fn port_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, true, None).await
}

/// `GET /v1/nodes/{node_ident}/ports`: the node's ports (404 if the node does not exist).
pub async fn node_port_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let node = state
        .store
        .node_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    list(&state, version, &headers, &query, false, Some(node.uuid)).await
}

/// `GET /v1/ports/{port_ident}` (`?fields=` from 1.8).
pub async fn port_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let selection = show_selection(PORT_FIELDS, "port", &query, version)?;
    let port = state
        .store
        .port_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    Ok(Json(port_json(
        &port,
        version,
        &selection,
        &base_url(&headers),
    )))
}

/// A node or portgroup the body names that does not exist is a bad request, not a 404.
fn reference_error(error: ferric_db::Error) -> ApiError {
    match error {
        ferric_db::Error::NotFound {
            kind: kind @ (Kind::Node | Kind::Portgroup),
            ident,
        } => {
            let kind = if kind == Kind::Node {
                "Node"
            } else {
                "Portgroup"
            };
            ApiError::bad_request(format!("{kind} {ident} could not be found."))
        }
        other => db_error(other),
    }
}

/// `POST /v1/ports`: 201 with the new port and its `Location`.
pub async fn port_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object_body(&body)?;
    for name in body.keys() {
        check_writable(PORT_FIELDS, "port", name, version, true)?;
    }
    for required in ["address", "node_uuid"] {
        if !body.contains_key(required) {
            return Err(ApiError::bad_request(format!(
                "Mandatory field missing: '{required}'."
            )));
        }
    }
    let mut port = Port::new(Uuid::new_v4(), Uuid::nil(), "");
    for (name, value) in body {
        port_set_field(&mut port, &name, value)?;
    }
    referenced_node(&state.store, &Ident::Uuid(port.node_uuid)).await?;
    let created = state
        .store
        .port_create(&port)
        .await
        .map_err(reference_error)?;
    let base = base_url(&headers);
    let location = format!("{base}/v1/ports/{}", created.uuid);
    let body = port_json(&created, version, &Selection::All, &base);
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(LOCATION, location);
    }
    Ok(response)
}

/// 409 while a conductor holds the port's node (Ironic takes the node lock for port writes).
async fn check_node_not_locked(store: &Store, node: Uuid) -> Result<(), ApiError> {
    match lease_holder(store, node).await? {
        Some(holder) => Err(ApiError::conflict(format!(
            "Node {node} is locked by host {holder}, please retry after the current operation \
             is completed."
        ))),
        None => Ok(()),
    }
}

/// `PATCH /v1/ports/{port_ident}`: RFC 6902 add/replace/remove, revision-guarded.
pub async fn port_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let ops = parse_patch(&body)?;
    for op in &ops {
        check_writable(PORT_FIELDS, "port", &op.field, version, false)?;
    }
    let port = state
        .store
        .port_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    check_node_not_locked(&state.store, port.node_uuid).await?;
    let mut updated = port.clone();
    for op in &ops {
        let value = if op.rest.is_empty() {
            match op.op {
                OpKind::Add | OpKind::Replace => op.value.clone().unwrap_or(Value::Null),
                OpKind::Remove => Value::Null,
            }
        } else {
            apply_nested(port_field_value(&updated, &op.field), op)?
        };
        port_set_field(&mut updated, &op.field, value)?;
    }
    if updated.node_uuid != port.node_uuid {
        referenced_node(&state.store, &Ident::Uuid(updated.node_uuid)).await?;
    }
    let saved = state
        .store
        .port_update(&updated, port.version)
        .await
        .map_err(reference_error)?;
    Ok(Json(port_json(
        &saved,
        version,
        &Selection::All,
        &base_url(&headers),
    )))
}

/// `DELETE /v1/ports/{port_ident}`: 204.
pub async fn port_delete(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let port = state
        .store
        .port_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    check_node_not_locked(&state.store, port.node_uuid).await?;
    state.store.port_delete(port.uuid).await.map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}
