//! `/v1/portgroups` (1.23) and `/v1/nodes/{node_ident}/portgroups` (1.24): create, list,
//! detail, show, PATCH, delete (`reference/ironic.md` §2.6). A portgroup's own ports are
//! listed by `ports.rs` (`/v1/portgroups/{portgroup_ident}/ports`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use ferric_db::{Kind, PortFilter, PortgroupFilter, Store};
use ferric_model::microversion::gate;
use ferric_model::resources::{Ident, Node, Portgroup};
use ferric_model::{Microversion, ProvisionState};
use serde_json::Value;
use uuid::Uuid;

use super::fields::{Selection, is_valid_logical_name, show_selection};
use super::paging::ProjectScope;
use super::patch::{OpKind, PatchOp, parse_patch};
use super::port_fields::normalize_mac;
use super::portgroup_fields::{DEFAULT_PORTGROUP_MODE, PORTGROUP_FIELDS};
use super::ports::{self, check_node_not_locked, referenced_node};
use super::resource::{
    Page, apply_create_body, apply_patch, check_create_body, check_patch, created, known_filter,
    list_body, list_params, record_json,
};
use super::{base_url, db_error, json_object_body};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// Portgroup list filters and the minor version each appeared in.
pub(crate) const PORTGROUP_FILTERS: &[(&str, u16)] = &[
    ("node", 23),
    ("address", 23),
    // Added in 1.99; Ironic 39 checks no version for it (portgroups exist from 1.23).
    ("conductor_groups", 23),
    ("shard", 106),
];

async fn portgroup_filter(
    store: &Store,
    pairs: &[(String, String)],
    version: Microversion,
) -> Result<PortgroupFilter, ApiError> {
    let mut filter = PortgroupFilter::default();
    for (name, value) in pairs {
        if !known_filter("portgroups", PORTGROUP_FILTERS, name, version)? {
            return Err(ApiError::bad_request(format!(
                "Unknown query parameter '{name}' for listing portgroups."
            )));
        }
        match name.as_str() {
            "node" => {
                let node = store
                    .node_get(&Ident::parse(value))
                    .await
                    .map_err(db_error)?;
                filter.node_uuid = Some(node.uuid);
            }
            "address" => filter.address = Some(normalize_mac(value)?),
            "shard" => filter.shard = Some(ports::list_filter(value)),
            "conductor_groups" => {
                filter.conductor_groups = Some(ports::conductor_groups_filter(value));
            }
            _ => {}
        }
    }
    // Ironic's rule: at most one of node, address, shard and conductor groups.
    let given = [
        filter.node_uuid.is_some(),
        filter.address.is_some(),
        filter.shard.is_some(),
        filter.conductor_groups.is_some(),
    ];
    if given.iter().filter(|given| **given).count() > 1 {
        return Err(ApiError::bad_request(
            "Filtering portgroups by more than one of 'node', 'address', 'shard' and \
             'conductor_groups' is not supported; give one of them.",
        ));
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
    project: Option<String>,
) -> Result<Json<Value>, ApiError> {
    let (params, selection) = list_params::<Portgroup>(query, version, detail_path)?;
    let mut filter = portgroup_filter(&state.store, &params.filters, version).await?;
    filter.project = project;
    if let Some(node) = node {
        if filter.node_uuid.is_some() {
            return Err(ApiError::bad_request(
                "The node is already named in the path; drop 'node'.",
            ));
        }
        filter.node_uuid = Some(node);
    }
    let portgroups = state
        .store
        .portgroup_list(&filter, &params.page)
        .await
        .map_err(db_error)?;
    let base = base_url(headers);
    let detail = if detail_path { "/detail" } else { "" };
    let path = match node {
        Some(node) => format!("nodes/{node}/portgroups{detail}"),
        None => format!("portgroups{detail}"),
    };
    let page = Page {
        version,
        selection: &selection,
        base: &base,
        path: &path,
        query,
        limit: params.limit,
    };
    Ok(Json(list_body(&portgroups, &page)))
}

/// `GET /v1/portgroups`: default fields (`uuid`, `address`, `name`) or `?fields=`.
pub async fn portgroup_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, false, None, project).await
}

/// `GET /v1/portgroups/detail`: every field.
pub async fn portgroup_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, true, None, project).await
}

/// `GET /v1/nodes/{node_ident}/portgroups` (1.24): the node's portgroups.
pub async fn node_portgroup_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    node_portgroups(&state, version, &headers, &ident, &query, false).await
}

/// `GET /v1/nodes/{node_ident}/portgroups/detail` (1.24): the same with every field.
pub async fn node_portgroup_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    node_portgroups(&state, version, &headers, &ident, &query, true).await
}

async fn node_portgroups(
    state: &ApiState,
    version: Microversion,
    headers: &HeaderMap,
    ident: &str,
    query: &[(String, String)],
    detail_path: bool,
) -> Result<Json<Value>, ApiError> {
    let node = state
        .store
        .node_get(&Ident::parse(ident))
        .await
        .map_err(db_error)?;
    list(
        state,
        version,
        headers,
        query,
        detail_path,
        Some(node.uuid),
        None,
    )
    .await
}

/// `GET /v1/portgroups/{portgroup_ident}` (`?fields=`).
pub async fn portgroup_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let selection = show_selection(PORTGROUP_FIELDS, "portgroup", &query, version)?;
    let portgroup = state
        .store
        .portgroup_get(&super::ports::uuid_or_name("portgroup_ident", &ident)?)
        .await
        .map_err(db_error)?;
    Ok(Json(record_json(
        &portgroup,
        version,
        &selection,
        &base_url(&headers),
    )))
}

/// A node the body names that does not exist is a bad request, not a missing portgroup.
fn reference_error(error: ferric_db::Error) -> ApiError {
    match error {
        ferric_db::Error::NotFound {
            kind: Kind::Node,
            ident,
        } => ApiError::bad_request(format!("Node {ident} could not be found.")),
        other => db_error(other),
    }
}

/// `POST /v1/portgroups`: 201 with the new portgroup and its `Location`.
pub async fn portgroup_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object_body(&body)?;
    check_create_body::<Portgroup>(&body, version, &["node_uuid"])?;
    let mut portgroup = Portgroup::new(Uuid::new_v4(), Uuid::nil());
    apply_create_body(&mut portgroup, body)?;
    if let Some(name) = &portgroup.name
        && !is_valid_logical_name(name)
    {
        return Err(ApiError::bad_request(format!(
            "Cannot create portgroup with invalid name '{name}'"
        )));
    }
    if portgroup.mode.is_none() {
        portgroup.mode = Some(DEFAULT_PORTGROUP_MODE.to_owned());
    }
    referenced_node(&state.store, &Ident::Uuid(portgroup.node_uuid)).await?;
    let saved = state
        .store
        .portgroup_create(&portgroup)
        .await
        .map_err(reference_error)?;
    let base = base_url(&headers);
    let body = record_json(&saved, version, &Selection::All, &base);
    Ok(created(&saved, body, &base))
}

/// States in which a portgroup may move to the node (outside maintenance).
const PORTGROUP_MOVE_STATES: &[ProvisionState] = &[
    ProvisionState::Enroll,
    ProvisionState::Inspecting,
    ProvisionState::InspectWait,
    ProvisionState::Manageable,
];

/// The rules for moving a portgroup to another node: the node exists (400), is in an early
/// state or in maintenance (409), and the portgroup has no ports (400).
async fn check_move(store: &Store, portgroup: &Portgroup, to: Uuid) -> Result<(), ApiError> {
    let node: Node = referenced_node(store, &Ident::Uuid(to)).await?;
    if !node.maintenance && !PORTGROUP_MOVE_STATES.contains(&node.provision_state) {
        let allowed: Vec<&str> = PORTGROUP_MOVE_STATES
            .iter()
            .map(|state| state.as_str())
            .collect();
        return Err(ApiError::conflict(format!(
            "Portgroup {} can not be associated to node {} unless the node is in a {} state or \
             in maintenance mode. Current state is '{}'.",
            portgroup.uuid,
            node.uuid,
            allowed.join(", "),
            node.provision_state.as_str()
        )));
    }
    let filter = PortFilter {
        portgroup_uuid: Some(portgroup.uuid),
        ..PortFilter::default()
    };
    let members = store
        .port_list(&filter, &ferric_db::Page::first(1))
        .await
        .map_err(db_error)?;
    if !members.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Portgroup {} can not be associated with node {} because there are ports associated \
             with this portgroup.",
            portgroup.uuid, node.uuid
        )));
    }
    Ok(())
}

fn removes_mode(ops: &[PatchOp]) -> bool {
    ops.iter()
        .any(|op| op.field == "mode" && op.rest.is_empty() && op.op == OpKind::Remove)
}

/// `PATCH /v1/portgroups/{portgroup_ident}`: RFC 6902 add/replace/remove, revision-guarded.
pub async fn portgroup_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let ops = parse_patch(&body)?;
    check_patch::<Portgroup>(&ops, version)?;
    let portgroup = state
        .store
        .portgroup_get(&super::ports::uuid_or_name("portgroup_ident", &ident)?)
        .await
        .map_err(db_error)?;
    check_node_not_locked(&state.store, portgroup.node_uuid).await?;
    if removes_mode(&ops) {
        return Err(ApiError::bad_request(
            "'mode' is a mandatory attribute and can not be removed",
        ));
    }
    let updated = apply_patch(&portgroup, &ops, version)?;
    if let Some(name) = &updated.name
        && updated.name != portgroup.name
        && !is_valid_logical_name(name)
    {
        return Err(ApiError::bad_request(format!(
            "Portgroup {ident}: Cannot change name to invalid name '{name}'"
        )));
    }
    if updated.node_uuid != portgroup.node_uuid {
        check_move(&state.store, &portgroup, updated.node_uuid).await?;
    }
    let node = state
        .store
        .node_get(&Ident::Uuid(portgroup.node_uuid))
        .await
        .map_err(db_error)?;
    if node.provision_state == ProvisionState::Inspecting && version >= gate::INSPECT_WAIT_STATE {
        return Err(ApiError::conflict(format!(
            "Cannot update portgroup \"{}\" on node \"{}\" while it is in state \"inspecting\".",
            portgroup.uuid, node.uuid
        )));
    }
    let saved = state
        .store
        .portgroup_update(&updated, portgroup.version)
        .await
        .map_err(reference_error)?;
    Ok(Json(record_json(
        &saved,
        version,
        &Selection::All,
        &base_url(&headers),
    )))
}

/// `DELETE /v1/portgroups/{portgroup_ident}`: 204; 400 while ports still belong to it.
pub async fn portgroup_delete(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let portgroup = state
        .store
        .portgroup_get(&super::ports::uuid_or_name("portgroup_ident", &ident)?)
        .await
        .map_err(db_error)?;
    check_node_not_locked(&state.store, portgroup.node_uuid).await?;
    state
        .store
        .portgroup_delete(portgroup.uuid)
        .await
        .map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}
