//! `/v1/nodes`: create, list, detail, show, PATCH and delete (`reference/ironic.md` §2.4).
//!
//! Provision-state changes (`/states/provision`) are not here: they belong to the conductor.
//! The only `provision_state` the API writes is a new node's initial state.
//!
//! Filters that are not a column are answered around the query: a node's `conductor` (1.49) is its
//! hash-ring owner (null when no alive conductor serves its group and driver), picked from the
//! page's nodes before the page is cut; child nodes (`parent_node` set) are left out of listings
//! unless `include_children` (1.83) or `parent_node` asks for them, as Ironic does at every
//! version. (Ports' and portgroups' `shard` and `conductor_groups` select through their node,
//! `and_node_in`.) `crates/ferric-api/tests/list_filters.rs` sends every filter the OpenAPI
//! document lists.

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use ferric_db::{Kind, NodeFilter, NodeHead, Store};
use ferric_model::microversion::gate;
use ferric_model::resources::{Ident, InterfaceKind, Node};
use ferric_model::state::initial_provision_state;
use ferric_model::{Microversion, ProvisionState};
use serde_json::Value;
use uuid::Uuid;

use super::fields::{Selection, show_selection};
use super::node_document::write_node_document;
use super::node_fields::{
    NODE_FIELDS, check_node_consistency, is_interface_field, node_field_value,
};
use super::paging::ProjectScope;
use super::paging::next_link;
use super::patch::{OpKind, parse_patch};
use super::rendered::RenderKey;
use super::resource::{
    apply_create_body, apply_patch, check_create_body, check_patch, created, known_filter,
    list_params, record_json,
};
use super::{base_url, db_error, json_object_body, parse_bool_param};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// Ironic's `[conductor]allow_deleting_available_nodes` default.
const ALLOW_DELETING_AVAILABLE_NODES: bool = true;

/// The list filters that map onto [`NodeFilter`] and the minor version each appeared in
/// (§2.4). Below it a filter is refused with 406.
pub(crate) const NODE_FILTERS: &[(&str, u16)] = &[
    ("associated", 1),
    ("maintenance", 1),
    ("instance_uuid", 1),
    ("chassis_uuid", 1),
    ("provision_state", 9),
    ("driver", 16),
    ("resource_class", 21),
    ("fault", 42),
    ("conductor_group", 46),
    // The conductor that serves the node by the hash ring (see `NodeListFilter`).
    ("conductor", 49),
    ("owner", 50),
    // `project` arrived with `owner`; `description_contains` with `description`.
    ("project", 50),
    ("description_contains", 51),
    ("retired", 61),
    ("lessee", 65),
    ("shard", 82),
    ("sharded", 82),
    ("parent_node", 83),
    ("include_children", 83),
    ("instance_name", 104),
];

/// What a node listing asks for: the storage filter, and the conductor (1.49) the nodes must
/// be served by. Which conductor serves a node is a hash-ring question, not a column, so it is
/// answered on the nodes storage returns, as Ironic's API does.
pub(crate) struct NodeListFilter {
    pub(crate) filter: NodeFilter,
    pub(crate) conductor: Option<String>,
}

const FAULTS: &[&str] = &[
    "power failure",
    "clean failure",
    "rescue abort failure",
    "service failure",
];

fn node_filter(
    pairs: &[(String, String)],
    version: Microversion,
) -> Result<NodeListFilter, ApiError> {
    let mut filter = NodeFilter::default();
    let mut conductor = None;
    let mut include_children = false;
    for (name, value) in pairs {
        if !known_filter("nodes", NODE_FILTERS, name, version)? {
            return Err(ApiError::bad_request(format!(
                "Unknown query parameter '{name}' for listing nodes."
            )));
        }
        let uuid = |value: &str| {
            Uuid::parse_str(value).map_err(|_| {
                ApiError::bad_request(format!("Invalid {name} '{value}': expected a UUID."))
            })
        };
        let text = Some(value.clone());
        match name.as_str() {
            "associated" => filter.associated = Some(parse_bool_param(name, value)?),
            "maintenance" => filter.maintenance = Some(parse_bool_param(name, value)?),
            "retired" => filter.retired = Some(parse_bool_param(name, value)?),
            "sharded" => filter.sharded = Some(parse_bool_param(name, value)?),
            "include_children" => include_children = parse_bool_param(name, value)?,
            "conductor" => conductor = text.clone(),
            "instance_uuid" => filter.instance_uuid = Some(uuid(value)?),
            "chassis_uuid" => filter.chassis_uuid = Some(uuid(value)?),
            "parent_node" => filter.parent_node = Some(uuid(value)?),
            "provision_state" => {
                filter.provision_state =
                    Some(value.parse::<ProvisionState>().map_err(|error| {
                        ApiError::bad_request(format!("Invalid provision_state: {error}"))
                    })?);
            }
            "fault" => {
                if !FAULTS.contains(&value.as_str()) {
                    return Err(ApiError::bad_request(format!(
                        "Invalid fault '{value}': use one of {}.",
                        FAULTS.join(", ")
                    )));
                }
                filter.fault = text;
            }
            "driver" => filter.driver = text,
            "resource_class" => filter.resource_class = text,
            "conductor_group" => filter.conductor_group = Some(value.to_ascii_lowercase()),
            "owner" => filter.owner = text,
            "lessee" => filter.lessee = text,
            "project" => filter.project = text,
            "description_contains" => filter.description_contains = text,
            "instance_name" => filter.instance_name = text,
            "shard" => filter.shard = Some(value.split(',').map(str::to_owned).collect()),
            _ => {}
        }
    }
    // Child nodes are listed only when asked for, or under their parent (Ironic's rule,
    // whatever the version: below 1.83 no node has a parent).
    if !include_children && filter.parent_node.is_none() {
        filter.has_parent = Some(false);
    }
    Ok(NodeListFilter { filter, conductor })
}

/// The conductor holding the node's lease (unexpired, the holder alive), if any (`reservation`).
pub(crate) async fn lease_holder(store: &Store, node: Uuid) -> Result<Option<String>, ApiError> {
    let lease = store.node_lease_get_held(node).await.map_err(db_error)?;
    Ok(lease.map(|lease| lease.holder))
}

/// How long a data write waits for a conductor to give the node back before answering 409:
/// Ironic's conductor retries taking the node's lock 3 times, a second apart
/// (`node_locked_retry_attempts`, `node_locked_retry_interval`), so a client that changes a
/// port or a volume target right after a power change is not refused.
const LOCKED_WAIT: std::time::Duration = std::time::Duration::from_secs(3);
const LOCKED_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// The holder of the node's lease after waiting up to [`LOCKED_WAIT`] for it to be released
/// (`None`: free).
pub(crate) async fn lease_holder_after_wait(
    store: &Store,
    node: Uuid,
) -> Result<Option<String>, ApiError> {
    let deadline = tokio::time::Instant::now() + LOCKED_WAIT;
    loop {
        let holder = lease_holder(store, node).await?;
        if holder.is_none() || tokio::time::Instant::now() >= deadline {
            return Ok(holder);
        }
        tokio::time::sleep(LOCKED_POLL).await;
    }
}

/// Whether `selection` includes the field `name`.
fn selects(selection: &Selection, name: &str) -> bool {
    match selection {
        Selection::All => true,
        Selection::Only(names) => names.iter().any(|n| n == name),
    }
}

/// The node as a client at `version` sees it, with `reservation` the holder of its lease
/// (`held`: the leases read for this response) and `conductor` the conductor that serves it.
fn node_json(
    state: &ApiState,
    node: &Node,
    held: &HashMap<Uuid, String>,
    version: Microversion,
    selection: &Selection,
    base: &str,
) -> Value {
    let mut shown = record_json(node, version, selection, base);
    if let Some(slot) = shown.get_mut("reservation") {
        *slot = held
            .get(&node.uuid)
            .map_or(Value::Null, |holder| Value::String(holder.clone()));
    }
    // The alive conductor that owns the node by the hash ring (null when none serves it).
    if let Some(slot) = shown.get_mut("conductor") {
        let rings = state.conductor.membership().rings();
        *slot = rings
            .owner(node)
            .map_or(Value::Null, |owner| Value::String(owner.to_owned()));
    }
    shown
}

/// The holder of `node`'s lease, keyed for [`node_json`]; nothing when `selection` does not
/// show `reservation`.
async fn held_lease(
    store: &Store,
    node: Uuid,
    selection: &Selection,
) -> Result<HashMap<Uuid, String>, ApiError> {
    if !selects(selection, "reservation") {
        return Ok(HashMap::new());
    }
    Ok(lease_holder(store, node)
        .await?
        .map(|holder| (node, holder))
        .into_iter()
        .collect())
}

/// Every held lease, for a listing: one query per page rather than one per node.
async fn held_leases(
    store: &Store,
    selection: &Selection,
) -> Result<HashMap<Uuid, String>, ApiError> {
    if !selects(selection, "reservation") {
        return Ok(HashMap::new());
    }
    let leases = store.node_lease_list_held().await.map_err(db_error)?;
    Ok(leases
        .into_iter()
        .map(|lease| (lease.node, lease.holder))
        .collect())
}

/// A listing of nodes: all of them, or a chassis's (`/v1/chassis/{uuid}/nodes`).
pub(crate) async fn list(
    state: &ApiState,
    version: Microversion,
    headers: &HeaderMap,
    query: &[(String, String)],
    detail_path: bool,
    chassis: Option<Uuid>,
    scope: &ProjectScope,
) -> Result<Response, ApiError> {
    let (mut params, selection) = list_params::<Node>(query, version, detail_path)?;
    let NodeListFilter {
        mut filter,
        conductor,
    } = node_filter(&params.filters, version)?;
    if let ProjectScope(Some(project)) = scope {
        // A project-scoped caller sees its own project's nodes, whatever it asks for.
        filter.project = Some(project.clone());
    }
    if let Some(chassis) = chassis {
        if filter.chassis_uuid.is_some() {
            return Err(ApiError::bad_request(
                "The chassis is already named in the path; drop 'chassis_uuid'.",
            ));
        }
        filter.chassis_uuid = Some(chassis);
    }
    // With a conductor named, the page is cut after the ring has picked that conductor's
    // nodes, so that a short page still means the end of the listing.
    let limit = conductor
        .is_some()
        .then(|| params.page.limit.take())
        .flatten();
    let base = base_url(headers);
    let detail = if detail_path { "/detail" } else { "" };
    let path = match chassis {
        Some(chassis) => format!("chassis/{chassis}/nodes{detail}"),
        None => format!("nodes{detail}"),
    };
    let rings = state.conductor.membership().rings();
    let owned_by = |group: &str, driver: &str, uuid: Uuid| match &conductor {
        Some(conductor) => rings.owner_of(group, driver, uuid) == Some(conductor.as_str()),
        None => true,
    };
    let limit = limit.map(|limit| usize::try_from(limit).unwrap_or(usize::MAX));

    // The collection is written out directly rather than built as one JSON value, so that
    // documents of unchanged nodes can come from the render cache as they are.
    let mut body = Vec::with_capacity(64);
    body.extend_from_slice(b"{\"nodes\":[");
    let (count, last) = match &selection {
        Selection::All => {
            let mut heads = state
                .store
                .node_list_heads(&filter, &params.page)
                .await
                .map_err(db_error)?;
            heads.retain(|head| owned_by(&head.conductor_group, &head.driver, head.uuid));
            if let Some(limit) = limit {
                heads.truncate(limit);
            }
            let held = if heads.is_empty() {
                HashMap::new()
            } else {
                held_leases(&state.store, &selection).await?
            };
            write_detail(state, &mut body, &heads, &held, version, &base).await?
        }
        Selection::Only(fields) => {
            let columns: Vec<&str> = fields.iter().map(String::as_str).collect();
            let mut nodes = state
                .store
                .node_list_columns(&filter, &params.page, &columns)
                .await
                .map_err(db_error)?;
            nodes.retain(|node| owned_by(&node.conductor_group, &node.driver, node.uuid));
            if let Some(limit) = limit {
                nodes.truncate(limit);
            }
            let held = if nodes.is_empty() {
                HashMap::new()
            } else {
                held_leases(&state.store, &selection).await?
            };
            for (n, node) in nodes.iter().enumerate() {
                if n > 0 {
                    body.push(b',');
                }
                let shown = node_json(state, node, &held, version, &selection, &base);
                body.extend_from_slice(&to_json(&shown)?);
            }
            (nodes.len(), nodes.last().map(|node| node.uuid))
        }
    };
    let next = next_link(
        &base,
        &path,
        query,
        params.limit,
        count,
        last.map(|uuid| uuid.to_string()),
    );
    body.push(b']');
    if let Some(next) = next {
        body.extend_from_slice(b",\"next\":");
        body.extend_from_slice(&to_json(&Value::String(next))?);
    }
    body.push(b'}');
    Ok(([(CONTENT_TYPE, "application/json")], body).into_response())
}

/// Writes the detail documents of `heads` into `body`, comma-separated: each from the render
/// cache when it holds the node as it is now, else rendered from the node's row (read for
/// all the missing ones at once) and kept. Returns how many were written and the last one's
/// UUID; a node deleted since `heads` were read is left out.
async fn write_detail(
    state: &ApiState,
    body: &mut Vec<u8>,
    heads: &[NodeHead],
    held: &HashMap<Uuid, String>,
    version: Microversion,
    base: &str,
) -> Result<(usize, Option<Uuid>), ApiError> {
    let rings = state.conductor.membership().rings();
    let key = |head: &NodeHead| RenderKey {
        id: head.id,
        version: head.version,
        minor: version.minor(),
        base: base.to_owned(),
        reservation: held.get(&head.uuid).cloned(),
        conductor: rings
            .owner_of(&head.conductor_group, &head.driver, head.uuid)
            .map(str::to_owned),
    };
    let keys: Vec<RenderKey> = heads.iter().map(key).collect();
    // Which documents the cache lacks, so that their rows are read in one query; the others
    // are copied from the cache straight into the body (no second page-sized buffer).
    let missing: Vec<i64> = heads
        .iter()
        .zip(&keys)
        .filter(|(_, key)| !state.rendered.holds(key))
        .map(|(head, _)| head.id)
        .collect();
    let mut nodes = if missing.is_empty() {
        HashMap::new()
    } else {
        state
            .store
            .node_list_by_id(&missing)
            .await
            .map_err(db_error)?
    };
    // Most of a page comes from the cache at ~2.7 KiB a node: room for that up front rather
    // than doubling (and copying) the body on the way to ~3 MB.
    body.reserve(heads.len() * 2816);
    let mut count = 0;
    let mut last = None;
    for (head, key) in heads.iter().zip(keys) {
        let mark = body.len();
        if count > 0 {
            body.push(b',');
        }
        if !state.rendered.append_to(&key, body) {
            // Not held, or dropped since the check above (then its row is read now).
            let node = match nodes.remove(&head.id) {
                Some(node) => node,
                None => match state
                    .store
                    .node_list_by_id(&[head.id])
                    .await
                    .map_err(db_error)?
                    .remove(&head.id)
                {
                    Some(node) => node,
                    None => {
                        // Deleted since the heads were read.
                        body.truncate(mark);
                        continue;
                    }
                },
            };
            // The row may be newer than its head: the owner is the one of the row read.
            let conductor = rings.owner(&node).map(str::to_owned);
            // Written straight into the body, then kept from there (no second copy).
            let start = body.len();
            write_node_document(
                body,
                &node,
                version,
                base,
                key.reservation.as_deref(),
                conductor.as_deref(),
            )
            .map_err(|error| ApiError::internal(&error))?;
            state.rendered.put(
                RenderKey {
                    version: node.version,
                    conductor,
                    ..key
                },
                &body[start..],
            );
        }
        count += 1;
        last = Some(head.uuid);
    }
    Ok((count, last))
}

fn to_json(value: &Value) -> Result<Vec<u8>, ApiError> {
    serde_json::to_vec(value).map_err(|error| ApiError::internal(&error))
}

/// `GET /v1/nodes`: default fields (or `?fields=`), filtered and paged.
pub async fn node_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    scope: ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    list(&state, version, &headers, &query, false, None, &scope).await
}

/// `GET /v1/nodes/detail`: every field, filtered and paged.
pub async fn node_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    scope: ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    list(&state, version, &headers, &query, true, None, &scope).await
}

/// `GET /v1/nodes/{node_ident}` (`?fields=` from 1.8).
pub async fn node_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let selection = show_selection(NODE_FIELDS, "node", &query, version)?;
    let (node, reservation) = state
        .store
        .node_get_with_reservation(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    let held = reservation
        .map(|holder| (node.uuid, holder))
        .into_iter()
        .collect();
    Ok(Json(node_json(
        &state, &node, &held, version, &selection, &base,
    )))
}

/// `POST /v1/nodes`: 201 with the new node and its `Location`.
pub async fn node_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object_body(&body)?;
    // The schema is closed: every key must be a field this version may set at create.
    check_create_body::<Node>(&body, version, &["driver"])?;
    let mut node = Node::new(Uuid::new_v4(), "", initial_provision_state(version));
    apply_create_body(&mut node, body)?;
    check_node_consistency(&node)?;
    apply_driver_defaults(&state, None, &mut node, false)?;
    check_parent_exists(&state.store, None, &node).await?;
    let created_node = state
        .store
        .node_create(&node)
        .await
        .map_err(reference_error)?;
    let base = base_url(&headers);
    let held = held_lease(&state.store, created_node.uuid, &Selection::All).await?;
    let body = node_json(
        &state,
        &created_node,
        &held,
        version,
        &Selection::All,
        &base,
    );
    Ok(created(&created_node, body, &base))
}

/// A chassis the caller named that does not exist is a bad request, not a missing node.
fn reference_error(error: ferric_db::Error) -> ApiError {
    match error {
        ferric_db::Error::NotFound {
            kind: Kind::Chassis,
            ident,
        } => ApiError::bad_request(format!("Chassis {ident} could not be found.")),
        other => db_error(other),
    }
}

/// A newly set `parent_node` must name an existing node other than itself (400 otherwise);
/// storage has no foreign key for it.
async fn check_parent_exists(
    store: &Store,
    before: Option<&Node>,
    after: &Node,
) -> Result<(), ApiError> {
    let Some(parent) = after.parent_node else {
        return Ok(());
    };
    if before.is_some_and(|before| before.parent_node == Some(parent)) {
        return Ok(());
    }
    if parent == after.uuid {
        return Err(ApiError::bad_request(
            "A node cannot be its own parent_node.",
        ));
    }
    match store.node_get(&Ident::Uuid(parent)).await {
        Ok(_) => Ok(()),
        Err(ferric_db::Error::NotFound { .. }) => Err(ApiError::bad_request(format!(
            "parent_node {parent} could not be found."
        ))),
        Err(other) => Err(db_error(other)),
    }
}

/// The node once no conductor holds it, read *after* the wait: 409 if a conductor still holds
/// it (Ironic's NodeLocked) after [`LOCKED_WAIT`]. A record read while the node was held is
/// what the conductor found, not what it left (right after `PUT …/states/power` answers 202 the
/// conductor holds the node until the new power state is written, in the same write as the
/// release), so the record the caller checks and writes over is read once the node is free.
async fn node_when_unlocked(store: &Store, ident: &str) -> Result<Node, ApiError> {
    let uuid = match Ident::parse(ident) {
        Ident::Uuid(uuid) => uuid,
        name @ Ident::Name(_) => store.node_get(&name).await.map_err(db_error)?.uuid,
    };
    if let Some(holder) = lease_holder_after_wait(store, uuid).await? {
        return Err(ApiError::conflict(format!(
            "Node {uuid} is locked by host {holder}, please retry after the current operation is \
             completed."
        )));
    }
    store.node_get(&Ident::Uuid(uuid)).await.map_err(db_error)
}

/// States in which `*_interface` and `resource_class` may change outside maintenance.
fn allows_interface_change(state: ProvisionState) -> bool {
    matches!(
        state,
        ProvisionState::Enroll
            | ProvisionState::Inspecting
            | ProvisionState::InspectWait
            | ProvisionState::Manageable
            | ProvisionState::Available
    )
}

/// `PATCH /v1/nodes/{node_ident}`: RFC 6902 add/replace/remove on the patchable fields, written
/// only if nobody else wrote the node since it was read (409 otherwise).
pub async fn node_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let ops = parse_patch(&body)?;
    check_patch::<Node>(&ops, version)?;
    let reset_interfaces = reset_interfaces_param(&query, version)?;
    if reset_interfaces && !ops.iter().any(|op| op.field == "driver") {
        return Err(ApiError::bad_request(
            "The reset_interfaces parameter can only be used when changing the node's driver.",
        ));
    }
    let node = node_when_unlocked(&state.store, &ident).await?;

    let only_unsets_instance = !ops.is_empty()
        && ops
            .iter()
            .all(|op| op.field == "instance_uuid" && op.op == OpKind::Remove && op.rest.is_empty());
    if !(node.maintenance && only_unsets_instance) {
        let inspecting = node.provision_state == ProvisionState::Inspecting
            && version >= gate::INSPECT_WAIT_STATE;
        let busy = node.target_provision_state.is_some()
            && !node
                .provision_state
                .allows_update_during_transition(version);
        if inspecting || busy {
            return Err(ApiError::conflict(format!(
                "Node {} can not be updated while a state transition is in progress.",
                node.uuid
            )));
        }
    }

    let mut updated = apply_patch(&node, &ops, version)?;
    apply_protection_rules(&node, &mut updated)?;
    check_node_consistency(&updated)?;
    apply_driver_defaults(&state, Some(&node), &mut updated, reset_interfaces)?;
    check_conductor_side_rules(&node, &updated, version)?;
    check_parent_exists(&state.store, Some(&node), &updated).await?;

    let saved = state
        .store
        .node_update(&updated, node.version)
        .await
        .map_err(reference_error)?;
    let base = base_url(&headers);
    let held = held_lease(&state.store, saved.uuid, &Selection::All).await?;
    Ok(Json(node_json(
        &state,
        &saved,
        &held,
        version,
        &Selection::All,
        &base,
    )))
}

/// Ironic's conductor rules for `protected` and `retired`: unsetting either clears its
/// reason; a node becomes protected only in `active` or `rescue`, and retired not in
/// `available` (409 InvalidState).
fn apply_protection_rules(before: &Node, after: &mut Node) -> Result<(), ApiError> {
    if after.protected != before.protected {
        if !after.protected {
            after.protected_reason = None;
        } else if !matches!(
            before.provision_state,
            ProvisionState::Active | ProvisionState::Rescue
        ) {
            return Err(ApiError::conflict(format!(
                "Node {} can only be made protected in provision states 'active' or 'rescue', \
                 the current state is '{}'",
                before.uuid,
                before.provision_state.as_str()
            )));
        }
    }
    if after.retired != before.retired {
        if !after.retired {
            after.retired_reason = None;
        } else if before.provision_state == ProvisionState::Available {
            return Err(ApiError::conflict(format!(
                "Node {} can not have 'retired' set in provision state 'available', the \
                 current state is '{}'",
                before.uuid,
                before.provision_state.as_str()
            )));
        }
    }
    Ok(())
}

/// `?reset_interfaces=` of a node PATCH (1.45; 406 below).
fn reset_interfaces_param(
    query: &[(String, String)],
    version: Microversion,
) -> Result<bool, ApiError> {
    let Some((_, value)) = query.iter().find(|(name, _)| name == "reset_interfaces") else {
        return Ok(false);
    };
    if version < RESET_INTERFACES_SINCE {
        return Err(ApiError::not_acceptable(format!(
            "reset_interfaces needs API version {RESET_INTERFACES_SINCE} or later; this \
             request asked for {version}."
        )));
    }
    parse_bool_param("reset_interfaces", value)
}

/// `?reset_interfaces=` of a node PATCH.
const RESET_INTERFACES_SINCE: Microversion = Microversion::new(45);

/// Checks the hardware type and fills unset interfaces with its defaults. When the driver
/// changes, the interfaces are kept and must suit the new type (400 otherwise, as Ironic),
/// unless `reset_interfaces`: then those the same request did not set go back to the new
/// type's defaults. An update that changes neither the driver nor an interface is not
/// checked, as in Ironic: a node whose interface the site has since disabled can still be
/// edited (and fixed).
fn apply_driver_defaults(
    state: &ApiState,
    before: Option<&Node>,
    node: &mut Node,
    reset_interfaces: bool,
) -> Result<(), ApiError> {
    if let Some(before) = before
        && before.driver == node.driver
        && InterfaceKind::ALL
            .into_iter()
            .all(|kind| before.interface(kind) == node.interface(kind))
    {
        return Ok(());
    }
    // An operator's deploy_interface outranks the one the autodetect interface stashed to put
    // back after the next cleaning (Ironic drops it the same way).
    if let Some(before) = before
        && (before.deploy_interface != node.deploy_interface
            || (before.driver != node.driver && reset_interfaces))
    {
        node.driver_internal_info
            .remove(ferric_drivers::autodetect::ORIGINAL_KEY);
    }
    if let Some(before) = before
        && before.driver != node.driver
        && reset_interfaces
    {
        for kind in InterfaceKind::ALL {
            if node.interface(kind) == before.interface(kind) {
                node.set_interface(kind, None);
            }
        }
    }
    state
        .conductor
        .drivers()
        .apply_defaults(node)
        .map_err(|error| ApiError::bad_request(error.to_string()))
}

/// The checks Ironic's conductor makes on an update (409 InvalidState / NodeAssociated).
fn check_conductor_side_rules(
    before: &Node,
    after: &Node,
    version: Microversion,
) -> Result<(), ApiError> {
    let changed = |name: &str| {
        node_field_value(before, name, version) != node_field_value(after, name, version)
    };
    let maintenance = before.maintenance || after.maintenance;
    if !maintenance
        && !allows_interface_change(before.provision_state)
        && let Some(spec) = NODE_FIELDS
            .iter()
            .find(|spec| is_interface_field(spec.name) && changed(spec.name))
    {
        return Err(ApiError::conflict(format!(
            "Cannot change {} of node {} in state {}: interfaces and resource_class can only \
             change in enroll, inspecting, inspect wait, manageable or available, or in \
             maintenance.",
            spec.name,
            before.uuid,
            before.provision_state.as_str()
        )));
    }
    if let (Some(old), Some(new)) = (before.instance_uuid, after.instance_uuid)
        && old != new
    {
        return Err(ApiError::conflict(format!(
            "Node {} is associated with instance {old}.",
            before.uuid
        )));
    }
    Ok(())
}

/// `DELETE /v1/nodes/{node_ident}`: 204; 403 if protected; 409 while associated or in a state
/// that does not allow deletion (maintenance bypasses both).
pub async fn node_delete(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let node = node_when_unlocked(&state.store, &ident).await?;
    if node.protected {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "Node {} is protected and cannot be undeployed, rebuilt or deleted",
                node.uuid
            ),
        ));
    }
    if !node.maintenance {
        if let Some(instance) = node.instance_uuid {
            return Err(ApiError::conflict(format!(
                "Node {} is associated with instance {instance}.",
                node.uuid
            )));
        }
        if !node
            .provision_state
            .allows_delete(ALLOW_DELETING_AVAILABLE_NODES)
        {
            return Err(ApiError::conflict(format!(
                "Can not delete node {} while it is in state \"{}\"; move it to manageable or \
                 set maintenance first.",
                node.uuid,
                node.provision_state.as_str()
            )));
        }
    }
    state.store.node_delete(node.uuid).await.map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}
