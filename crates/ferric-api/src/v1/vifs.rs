//! `/v1/nodes/{node_ident}/vifs` (1.28): list, attach and detach virtual network interfaces
//! (`reference/ironic.md` §2.5).
//!
//! Theory of operation: as in Ironic, a VIF is attached by recording its id in the
//! `internal_info.tenant_vif_port_id` of one of the node's ports or portgroups. Attaching
//! picks a free one the way Ironic's network interfaces do (unless the caller names a port or,
//! from 1.67, a portgroup): portgroups with free member ports first, then ports with PXE
//! enabled, then the rest; a portgroup some of whose ports already carry a VIF is skipped in
//! favour of its free ports. There is no networking service to tell us physical networks, so
//! every port's physical network is acceptable. Nothing here touches the node's provision or
//! power state.

use std::collections::{HashMap, HashSet};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use ferric_db::{Page, PortFilter, PortgroupFilter};
use ferric_model::Microversion;
use ferric_model::resources::{Ident, Node, Port, Portgroup, TENANT_VIF_KEY, clear_vif};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::fields::is_valid_logical_name;
use super::ports::check_node_not_locked;
use super::{db_error, json_object_body};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// From 1.67 the caller may name the port or portgroup; both at once is refused.
const ATTACH_TO_PORT_SINCE: u16 = 67;

/// The node and its ports and portgroups.
struct NodeNetwork {
    node: Node,
    ports: Vec<Port>,
    portgroups: Vec<Portgroup>,
}

async fn node_network(
    state: &ApiState,
    _version: Microversion,
    ident: &str,
) -> Result<NodeNetwork, ApiError> {
    let node = state
        .store
        .node_get(&Ident::parse(ident))
        .await
        .map_err(db_error)?;
    let ports = state
        .store
        .port_list(
            &PortFilter {
                node_uuid: Some(node.uuid),
                ..PortFilter::default()
            },
            &Page::all(),
        )
        .await
        .map_err(db_error)?;
    let portgroups = state
        .store
        .portgroup_list(
            &PortgroupFilter {
                node_uuid: Some(node.uuid),
                ..PortgroupFilter::default()
            },
            &Page::all(),
        )
        .await
        .map_err(db_error)?;
    Ok(NodeNetwork {
        node,
        ports,
        portgroups,
    })
}

fn attached_vif(internal_info: &Map<String, Value>) -> Option<&str> {
    internal_info.get(TENANT_VIF_KEY).and_then(Value::as_str)
}

/// A VIF id: a UUID or a logical name (Ironic's `uuid_or_name`).
fn check_vif_id(name: &str, value: &str) -> Result<(), ApiError> {
    if is_valid_logical_name(value) || Uuid::parse_str(value).is_ok() {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Expected UUID or name for {name}: {value}"
        )))
    }
}

/// `GET /v1/nodes/{node_ident}/vifs`: `{"vifs": [{"id": ...}, …]}`, ports' first.
pub async fn vif_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let network = node_network(&state, version, &ident).await?;
    let vifs: Vec<Value> = network
        .ports
        .iter()
        .map(|port| &port.internal_info)
        .chain(network.portgroups.iter().map(|group| &group.internal_info))
        .filter_map(attached_vif)
        .map(|id| json!({ "id": id }))
        .collect();
    Ok(Json(json!({ "vifs": vifs })))
}

/// A port or portgroup a VIF can go to.
#[derive(Debug, Clone)]
enum PortLike {
    Port(Port),
    Portgroup(Portgroup),
}

/// 409 if `vif` is already attached here; whether another VIF is.
fn has_other_vif(
    internal_info: &Map<String, Value>,
    vif: &str,
    kind: &str,
    uuid: Uuid,
) -> Result<bool, ApiError> {
    match attached_vif(internal_info) {
        Some(attached) if attached == vif => Err(ApiError::conflict(format!(
            "Unable to attach VIF {vif} because VIF {vif} is already attached to Ironic {kind} \
             {uuid}"
        ))),
        attached => Ok(attached.is_some()),
    }
}

/// Whether the port carries what its node's network interface needs (Ironic's
/// `validate_port_info`): a `neutron` node's ports need a switch connection unless they are
/// InfiniBand (`extra.client-id`).
fn port_usable(node: &Node, port: &Port) -> bool {
    port.extra.contains_key("client-id")
        || node.network_interface.as_deref() != Some("neutron")
        || !port.local_link_connection.is_empty()
}

/// Picks where `vif` goes, following Ironic's free port-like object rules.
fn free_port_like(
    network: &NodeNetwork,
    vif: &str,
    port_uuid: Option<Uuid>,
    portgroup_uuid: Option<Uuid>,
) -> Result<PortLike, ApiError> {
    let mut free: Vec<PortLike> = Vec::new();
    let mut ports_by_group: HashMap<Option<Uuid>, Vec<&Port>> = HashMap::new();
    let mut groups_in_use: HashSet<Option<Uuid>> = HashSet::new();
    for port in &network.ports {
        if port_uuid.is_some_and(|wanted| wanted != port.uuid) || !port_usable(&network.node, port)
        {
            continue;
        }
        if has_other_vif(&port.internal_info, vif, "Port", port.uuid)? {
            groups_in_use.insert(port.portgroup_uuid);
            continue;
        }
        if port.portgroup_uuid.is_none() && portgroup_uuid.is_none() {
            free.push(PortLike::Port(port.clone()));
        } else {
            ports_by_group
                .entry(port.portgroup_uuid)
                .or_default()
                .push(port);
        }
    }
    if port_uuid.is_none() {
        for group in &network.portgroups {
            if portgroup_uuid.is_some_and(|wanted| wanted != group.uuid)
                || has_other_vif(&group.internal_info, vif, "Portgroup", group.uuid)?
            {
                continue;
            }
            let members = ports_by_group
                .get(&Some(group.uuid))
                .map(Vec::as_slice)
                .unwrap_or_default();
            if groups_in_use.contains(&Some(group.uuid)) {
                // Some of its ports carry VIFs: use its free ports rather than the bond.
                if portgroup_uuid.is_none() {
                    free.extend(members.iter().map(|port| PortLike::Port((*port).clone())));
                }
            } else if !members.is_empty() {
                free.push(PortLike::Portgroup(group.clone()));
            }
        }
    }
    // Portgroups before ports, PXE-enabled ports before the rest; the first of equals wins.
    let rank = |candidate: &PortLike| match candidate {
        PortLike::Portgroup(_) => 2,
        PortLike::Port(port) if port.pxe_enabled => 1,
        PortLike::Port(_) => 0,
    };
    let best = free.iter().map(rank).max();
    free.into_iter()
        .find(|candidate| Some(rank(candidate)) == best)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "Unable to attach VIF {vif}, not enough free physical ports."
            ))
        })
}

/// A UUID the caller gave for a port or portgroup; one that does not parse matches nothing.
fn named_uuid(body: &Map<String, Value>, key: &str) -> Option<Uuid> {
    body.get(key).map(|value| {
        value
            .as_str()
            .and_then(|text| Uuid::parse_str(text).ok())
            .unwrap_or(Uuid::nil())
    })
}

/// `POST /v1/nodes/{node_ident}/vifs` with `{"id": ...}` (and `port_uuid` or, from 1.67,
/// `portgroup_uuid`): attaches the VIF. 204.
pub async fn vif_attach(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let network = node_network(&state, version, &ident).await?;
    let body = json_object_body(&body)?;
    let vif = match body.get("id") {
        Some(Value::String(id)) => id.clone(),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Schema error for vif: {other} is not of type 'string'"
            )));
        }
        None => {
            return Err(ApiError::bad_request(
                "Schema error for vif: 'id' is a required property",
            ));
        }
    };
    check_vif_id("id", &vif)?;
    if version.minor() >= ATTACH_TO_PORT_SINCE
        && body.contains_key("port_uuid")
        && body.contains_key("portgroup_uuid")
    {
        return Err(ApiError::bad_request(
            "Cannot specify both port_uuid and portgroup_uuid",
        ));
    }
    // A port named by the caller wins over a portgroup, as in Ironic.
    let port_uuid = named_uuid(&body, "port_uuid");
    let portgroup_uuid = if port_uuid.is_some() {
        None
    } else {
        named_uuid(&body, "portgroup_uuid")
    };
    check_node_not_locked(&state.store, network.node.uuid).await?;
    match free_port_like(&network, &vif, port_uuid, portgroup_uuid)? {
        PortLike::Port(port) => {
            let mut updated = port.clone();
            updated
                .internal_info
                .insert(TENANT_VIF_KEY.to_owned(), json!(vif));
            state
                .store
                .port_update(&updated, port.version)
                .await
                .map_err(db_error)?;
        }
        PortLike::Portgroup(group) => {
            let mut updated = group.clone();
            updated
                .internal_info
                .insert(TENANT_VIF_KEY.to_owned(), json!(vif));
            state
                .store
                .portgroup_update(&updated, group.version)
                .await
                .map_err(db_error)?;
        }
    }
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/nodes/{node_ident}/vifs/{vif_id}`: detaches the VIF; 400 if it is not
/// attached to this node. 204.
pub async fn vif_detach(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path((ident, vif)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    check_vif_id("vif_id", &vif)?;
    let network = node_network(&state, version, &ident).await?;
    check_node_not_locked(&state.store, network.node.uuid).await?;
    // Ironic looks at portgroups first.
    if let Some(group) = network
        .portgroups
        .iter()
        .find(|group| attached_vif(&group.internal_info) == Some(vif.as_str()))
    {
        let mut updated = group.clone();
        clear_vif(&mut updated.internal_info, &mut updated.extra);
        state
            .store
            .portgroup_update(&updated, group.version)
            .await
            .map_err(db_error)?;
        return Ok(StatusCode::NO_CONTENT);
    }
    if let Some(port) = network
        .ports
        .iter()
        .find(|port| attached_vif(&port.internal_info) == Some(vif.as_str()))
    {
        let mut updated = port.clone();
        clear_vif(&mut updated.internal_info, &mut updated.extra);
        state
            .store
            .port_update(&updated, port.version)
            .await
            .map_err(db_error)?;
        return Ok(StatusCode::NO_CONTENT);
    }
    Err(ApiError::bad_request(format!(
        "Unable to detach VIF {vif} from node {} because it is not attached to it.",
        network.node.uuid
    )))
}
