//! `/v1/ports`, `/v1/nodes/{node_ident}/ports` and `/v1/portgroups/{portgroup_ident}/ports`:
//! create, list, detail, show, PATCH, delete (`reference/ironic.md` §2.6).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use ferric_db::{Kind, Page as StorePage, PortFilter, PortSortKey, Store};
use ferric_model::resources::{Ident, Node, Port};
use ferric_model::{Microversion, ProvisionState};
use serde_json::Value;
use uuid::Uuid;

use super::fields::{Selection, show_selection};
use super::nodes::lease_holder_after_wait;
use super::paging::ProjectScope;
use super::patch::parse_patch;
use super::port_fields::{check_link_keys_at, normalize_mac};
use super::resource::{
    Page, Resource, apply_create_body, apply_patch, check_create_body, check_patch, created,
    known_filter, list_body, list_params, record_json,
};
use super::{base_url, db_error, json_object_body};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// Port list filters and the minor version each appeared in.
pub(crate) const PORT_FILTERS: &[(&str, u16)] = &[
    ("node", 1),
    ("node_uuid", 1),
    ("address", 1),
    ("portgroup", 24),
    ("shard", 82),
    ("description_contains", 97),
    // Added in 1.99, but Ironic 39 checks no version for it: every version filters.
    ("conductor_groups", 1),
];

/// A comma-separated list filter (`shard`, `conductor_groups`), its items trimmed.
pub(crate) fn list_filter(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Conductor groups are stored in lower case; a filter matches them in any case.
pub(crate) fn conductor_groups_filter(value: &str) -> Vec<String> {
    list_filter(&value.to_ascii_lowercase())
}

/// A port or portgroup named in a path: a UUID or a logical name, else 400 — as Ironic's
/// `uuid_or_name` check answers a MAC address or `malformed:uuid` (a well-formed name that
/// names nothing is a 404 later).
pub(crate) fn uuid_or_name(param: &str, ident: &str) -> Result<Ident, ApiError> {
    let parsed = Ident::parse(ident);
    if matches!(parsed, Ident::Uuid(_)) || super::fields::is_valid_logical_name(ident) {
        return Ok(parsed);
    }
    Err(ApiError::bad_request(format!(
        "Expected UUID or name for {param}: {ident}"
    )))
}

/// A node the caller names in a port (body or filter): missing is the caller's mistake (400).
pub(crate) async fn referenced_node(store: &Store, ident: &Ident) -> Result<Node, ApiError> {
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
        if !known_filter("ports", PORT_FILTERS, name, version)? {
            return Err(ApiError::bad_request(format!(
                "Unknown query parameter '{name}' for listing ports."
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
            "portgroup" => {
                let portgroup = store
                    .portgroup_get(&Ident::parse(value))
                    .await
                    .map_err(db_error)?;
                filter.portgroup_uuid = Some(portgroup.uuid);
            }
            "address" => filter.address = Some(normalize_mac(value)?),
            "description_contains" => filter.description_contains = Some(value.clone()),
            "shard" => filter.shard = Some(list_filter(value)),
            "conductor_groups" => filter.conductor_groups = Some(conductor_groups_filter(value)),
            _ => {}
        }
    }
    // Ironic's rules: one of node, portgroup and shard; conductor groups with none of node,
    // portgroup or address.
    let exclusive = [
        filter.node_uuid.is_some(),
        filter.portgroup_uuid.is_some(),
        filter.shard.is_some(),
    ];
    if exclusive.iter().filter(|given| **given).count() > 1 {
        return Err(ApiError::bad_request(
            "Filter ports by one of 'node', 'portgroup' and 'shard' at a time.",
        ));
    }
    if filter.conductor_groups.is_some()
        && (filter.node_uuid.is_some()
            || filter.portgroup_uuid.is_some()
            || filter.address.is_some())
    {
        return Err(ApiError::bad_request(
            "Filtering by conductor_groups cannot be combined with the node, portgroup or \
             address filters.",
        ));
    }
    Ok(filter)
}

/// Which ports a listing covers: all, or those of the node or portgroup in its path.
#[derive(Debug, Clone)]
enum PortScope {
    /// Every port, or only those of one project's nodes.
    All(Option<String>),
    Node(Uuid),
    Portgroup(Uuid),
}

async fn list(
    state: &ApiState,
    version: Microversion,
    headers: &HeaderMap,
    query: &[(String, String)],
    detail_path: bool,
    scope: PortScope,
) -> Result<Json<Value>, ApiError> {
    let (params, selection) = list_params::<Port>(query, version, detail_path)?;
    let mut filter = port_filter(&state.store, &params.filters, version).await?;
    match &scope {
        PortScope::All(project) => filter.project = project.clone(),
        PortScope::Node(node) => {
            if filter.node_uuid.is_some() {
                return Err(ApiError::bad_request(
                    "The node is already named in the path; drop 'node' and 'node_uuid'.",
                ));
            }
            filter.node_uuid = Some(*node);
        }
        PortScope::Portgroup(portgroup) => {
            if filter.portgroup_uuid.is_some() {
                return Err(ApiError::bad_request(
                    "The portgroup is already named in the path; drop 'portgroup'.",
                ));
            }
            filter.portgroup_uuid = Some(*portgroup);
        }
    }
    let ports = state
        .store
        .port_list(&filter, &params.page)
        .await
        .map_err(db_error)?;
    let base = base_url(headers);
    let detail = if detail_path { "/detail" } else { "" };
    let path = match scope {
        PortScope::All(_) => format!("ports{detail}"),
        PortScope::Node(node) => format!("nodes/{node}/ports{detail}"),
        PortScope::Portgroup(portgroup) => format!("portgroups/{portgroup}/ports{detail}"),
    };
    let page = Page {
        version,
        selection: &selection,
        base: &base,
        path: &path,
        query,
        limit: params.limit,
    };
    Ok(Json(list_body(&ports, &page)))
}

/// `GET /v1/ports`: default fields (`uuid`, `address`) or `?fields=`, filtered and paged.
pub async fn port_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(
        &state,
        version,
        &headers,
        &query,
        false,
        PortScope::All(project),
    )
    .await
}

/// `GET /v1/ports/detail`: every field.
pub async fn port_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(
        &state,
        version,
        &headers,
        &query,
        true,
        PortScope::All(project),
    )
    .await
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
    list(
        &state,
        version,
        &headers,
        &query,
        false,
        PortScope::Node(node.uuid),
    )
    .await
}

/// `GET /v1/nodes/{node_ident}/ports/detail`: the node's ports with every field.
pub async fn node_port_list_detail(
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
    let scope = PortScope::Node(node.uuid);
    list(&state, version, &headers, &query, true, scope).await
}

/// `GET /v1/portgroups/{portgroup_ident}/ports` (1.24): the portgroup's ports.
pub async fn portgroup_port_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    portgroup_ports(&state, version, &headers, &ident, &query, false).await
}

/// `GET /v1/portgroups/{portgroup_ident}/ports/detail` (1.24).
pub async fn portgroup_port_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    portgroup_ports(&state, version, &headers, &ident, &query, true).await
}

async fn portgroup_ports(
    state: &ApiState,
    version: Microversion,
    headers: &HeaderMap,
    ident: &str,
    query: &[(String, String)],
    detail_path: bool,
) -> Result<Json<Value>, ApiError> {
    let portgroup = state
        .store
        .portgroup_get(&Ident::parse(ident))
        .await
        .map_err(db_error)?;
    let scope = PortScope::Portgroup(portgroup.uuid);
    list(state, version, headers, query, detail_path, scope).await
}

/// `GET /v1/ports/{port_ident}` (`?fields=` from 1.8).
pub async fn port_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let selection = show_selection(<Port as Resource>::FIELDS, "port", &query, version)?;
    let port = state
        .store
        .port_get(&uuid_or_name("port_ident", &ident)?)
        .await
        .map_err(db_error)?;
    Ok(Json(record_json(
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

/// A port's portgroup must exist (400) and belong to the port's node (400), as Ironic checks.
async fn check_portgroup_of(store: &Store, port: &Port) -> Result<(), ApiError> {
    let Some(portgroup) = port.portgroup_uuid else {
        return Ok(());
    };
    let portgroup = store
        .portgroup_get(&Ident::Uuid(portgroup))
        .await
        .map_err(reference_error)?;
    if portgroup.node_uuid != port.node_uuid {
        return Err(ApiError::bad_request(
            "Port can not be added to a portgroup belonging to a different node.",
        ));
    }
    Ok(())
}

/// Ironic's conductor refuses (409) to change how a port connects — its portgroup,
/// `pxe_enabled`, `local_link_connection`, `physical_network` — unless its node is in
/// enroll, inspecting, inspect wait or manageable, or in maintenance; and its MAC address
/// while the node is active or has an instance, unless in maintenance.
fn check_port_change(node: &Node, before: &Port, after: &Port) -> Result<(), ApiError> {
    if before.address != after.address
        && (node.provision_state == ProvisionState::Active || node.instance_uuid.is_some())
        && !node.maintenance
    {
        return Err(ApiError::conflict(format!(
            "Cannot update hardware address for port {} as node {} is active or has instance \
             UUID assigned",
            after.uuid, node.uuid
        )));
    }
    let connectivity_changed = before.portgroup_uuid != after.portgroup_uuid
        || before.pxe_enabled != after.pxe_enabled
        || before.local_link_connection != after.local_link_connection
        || before.physical_network != after.physical_network;
    let allowed = matches!(
        node.provision_state,
        ProvisionState::Enroll
            | ProvisionState::Inspecting
            | ProvisionState::InspectWait
            | ProvisionState::Manageable
    );
    if connectivity_changed && !allowed && !node.maintenance {
        return Err(ApiError::conflict(format!(
            "Port {} can not have any connectivity attributes (portgroup_id, pxe_enabled, \
             local_link_connection, physical_network) updated unless node {} is in a enroll, \
             inspecting, inspect wait, manageable state or in maintenance mode. The current \
             state is {}.",
            after.uuid,
            node.uuid,
            node.provision_state.as_str()
        )));
    }
    Ok(())
}

/// All ports of a portgroup share one physical network (which may be none): a port joining
/// a portgroup, or changing its physical network within one, must match the other members,
/// or the portgroup's own `physical_network` when it has no other member (409, as Ironic's
/// conductor answers).
async fn check_physical_network(store: &Store, port: &Port) -> Result<(), ApiError> {
    let Some(portgroup_uuid) = port.portgroup_uuid else {
        return Ok(());
    };
    let filter = PortFilter {
        portgroup_uuid: Some(portgroup_uuid),
        ..PortFilter::default()
    };
    let members = store
        .port_list(&filter, &StorePage::<PortSortKey>::all())
        .await
        .map_err(db_error)?;
    let mut physnets: Vec<Option<&str>> = members
        .iter()
        .filter(|member| member.uuid != port.uuid)
        .map(|member| member.physical_network.as_deref())
        .collect();
    physnets.sort_unstable();
    physnets.dedup();
    let expected = match physnets.as_slice() {
        [] => {
            let portgroup = store
                .portgroup_get(&Ident::Uuid(portgroup_uuid))
                .await
                .map_err(reference_error)?;
            match portgroup.physical_network {
                Some(physnet) => Some(physnet),
                None => return Ok(()),
            }
        }
        [one] => one.map(str::to_owned),
        several => {
            let names: Vec<&str> = several.iter().map(|name| name.unwrap_or("None")).collect();
            return Err(ApiError::bad_request(format!(
                "Port group {portgroup_uuid} has member ports with inconsistent physical \
                 networks ({}). All ports in a port group must have the same physical network.",
                names.join(", ")
            )));
        }
    };
    if port.physical_network != expected {
        let show = |name: &Option<String>| name.clone().unwrap_or_else(|| "None".to_owned());
        return Err(ApiError::conflict(format!(
            "Port with physical network {} cannot become a member of port group \
             {portgroup_uuid} which has ports in physical network {}.",
            show(&port.physical_network),
            show(&expected)
        )));
    }
    Ok(())
}

/// `POST /v1/ports`: 201 with the new port and its `Location`.
pub async fn port_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut body = json_object_body(&body)?;
    if let Some(ident) = body.remove("node_ident") {
        body.insert(
            "node_uuid".to_owned(),
            node_ident_as_uuid(&state.store, &body, ident, version).await?,
        );
    }
    check_create_body::<Port>(&body, version, &["address", "node_uuid"])?;
    check_link_keys_at(body.get("local_link_connection"), version)?;
    let mut port = Port::new(Uuid::new_v4(), Uuid::nil(), "");
    apply_create_body(&mut port, body)?;
    referenced_node(&state.store, &Ident::Uuid(port.node_uuid)).await?;
    check_portgroup_of(&state.store, &port).await?;
    check_physical_network(&state.store, &port).await?;
    let created_port = state
        .store
        .port_create(&port)
        .await
        .map_err(reference_error)?;
    let base = base_url(&headers);
    let body = record_json(&created_port, version, &Selection::All, &base);
    Ok(created(&created_port, body, &base))
}

/// The UUID of the node a create body names by `node_ident` (its name or UUID, from 1.94;
/// 406 before): 400 beside `node_uuid` (Ironic's schema takes one of the two) or for a node
/// that does not exist.
async fn node_ident_as_uuid(
    store: &Store,
    body: &serde_json::Map<String, Value>,
    ident: Value,
    version: Microversion,
) -> Result<Value, ApiError> {
    if version.minor() < NODE_IDENT_SINCE {
        return Err(ApiError::not_acceptable(format!(
            "node_ident needs API version 1.{NODE_IDENT_SINCE} or newer; this request is at \
             {version}: name the node by node_uuid."
        )));
    }
    if body.contains_key("node_uuid") {
        return Err(ApiError::bad_request(
            "Give either node_ident or node_uuid, not both.",
        ));
    }
    let Value::String(ident) = ident else {
        return Err(ApiError::bad_request(
            "node_ident must be a string: the node's name or UUID.",
        ));
    };
    let node = referenced_node(store, &uuid_or_name("node_ident", &ident)?).await?;
    Ok(Value::String(node.uuid.to_string()))
}

/// `node_ident` in a port create body.
const NODE_IDENT_SINCE: u16 = 94;

/// 409 while a conductor holds the node (Ironic takes the node lock for port, portgroup,
/// trait and VIF writes), after waiting a little for it as Ironic's lock does.
pub(crate) async fn check_node_not_locked(store: &Store, node: Uuid) -> Result<(), ApiError> {
    match lease_holder_after_wait(store, node).await? {
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
    check_patch::<Port>(&ops, version)?;
    let port = state
        .store
        .port_get(&uuid_or_name("port_ident", &ident)?)
        .await
        .map_err(db_error)?;
    check_node_not_locked(&state.store, port.node_uuid).await?;
    let updated = apply_patch(&port, &ops, version)?;
    if updated.local_link_connection != port.local_link_connection {
        let connection = Value::Object(updated.local_link_connection.clone());
        check_link_keys_at(Some(&connection), version)?;
    }
    let node = referenced_node(&state.store, &Ident::Uuid(updated.node_uuid)).await?;
    if updated.node_uuid != port.node_uuid || updated.portgroup_uuid != port.portgroup_uuid {
        check_portgroup_of(&state.store, &updated).await?;
    }
    check_port_change(&node, &port, &updated)?;
    if updated.portgroup_uuid != port.portgroup_uuid
        || updated.physical_network != port.physical_network
    {
        check_physical_network(&state.store, &updated).await?;
    }
    let saved = state
        .store
        .port_update(&updated, port.version)
        .await
        .map_err(reference_error)?;
    Ok(Json(record_json(
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
        .port_get(&uuid_or_name("port_ident", &ident)?)
        .await
        .map_err(db_error)?;
    check_node_not_locked(&state.store, port.node_uuid).await?;
    state.store.port_delete(port.uuid).await.map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}
