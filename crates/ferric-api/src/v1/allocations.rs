//! `/v1/allocations` (1.52) and `/v1/nodes/{node}/allocation`: asking for one available node
//! that matches a resource class, traits and optionally a list of candidates
//! (`reference/ironic.md` §2.7).
//!
//! Theory of operation: as Ironic, a new allocation is stored `allocating` and the answer is
//! 201 at once; the matching runs in the background (`ferric_conductor::allocations`, on this
//! process's conductor, or in this process when it runs no conductor) and moves it to
//! `active` or `error`; clients poll. A claimed node gets the allocation's UUID as
//! `allocation_uuid` and `instance_uuid`, and its traits in `instance_info.traits`; deleting
//! the allocation clears both UUIDs, and so does tearing the node down (the conductor
//! deletes its allocation). No provision state changes: allocations only reserve.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use ferric_db::{AllocationFilter, AllocationSortKey, Kind};
use ferric_model::resources::{Allocation, AllocationState, Ident};
use ferric_model::{Microversion, ProvisionState};
use serde_json::{Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{
    Access::{CreateOnly, ReadOnly, Writable},
    FieldSpec, Selection, field, is_valid_logical_name, object, opt_string, opt_text_value,
    show_selection, uuid_value,
};
use super::paging::ProjectScope;
use super::patch::parse_patch;
use super::resource::{
    Page as ListPage, Resource, apply_create_body, apply_patch, check_create_body, check_patch,
    created, known_filter, list_body, list_params, record_json,
};
use super::traits::{MAX_TRAITS_PER_NODE, check_trait};
use super::{base_url, db_error, json_object_body, links, opt_timestamp, timestamp};
use crate::endpoints::since;
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

pub(crate) const ALLOCATIONS_SINCE: u16 = since::ALLOCATIONS.minor();
/// PATCH of `name` and `extra`.
const UPDATE_SINCE: u16 = 57;
/// `node` in a create body: backfill an allocation for an already deployed node.
const BACKFILL_SINCE: u16 = 58;

pub(crate) const ALLOCATION_FIELDS: &[FieldSpec] = &[
    field("uuid", ALLOCATIONS_SINCE, CreateOnly, T::Uuid),
    field("name", ALLOCATIONS_SINCE, Writable, T::OptText),
    field("node_uuid", ALLOCATIONS_SINCE, ReadOnly, T::OptUuid),
    field("state", ALLOCATIONS_SINCE, ReadOnly, T::Text),
    field("last_error", ALLOCATIONS_SINCE, ReadOnly, T::OptText),
    field("resource_class", ALLOCATIONS_SINCE, CreateOnly, T::OptText),
    field("traits", ALLOCATIONS_SINCE, CreateOnly, T::StringList),
    field(
        "candidate_nodes",
        ALLOCATIONS_SINCE,
        CreateOnly,
        T::StringList,
    ),
    field("extra", ALLOCATIONS_SINCE, Writable, T::Object),
    field("owner", 60, CreateOnly, T::OptText),
    field("created_at", ALLOCATIONS_SINCE, ReadOnly, T::Time),
    field("updated_at", ALLOCATIONS_SINCE, ReadOnly, T::OptTime),
    field("links", ALLOCATIONS_SINCE, ReadOnly, T::Links),
];

pub(crate) const ALLOCATION_FILTERS: &[(&str, u16)] = &[
    ("node", ALLOCATIONS_SINCE),
    ("resource_class", ALLOCATIONS_SINCE),
    ("state", ALLOCATIONS_SINCE),
    ("owner", 60),
];

impl Resource for Allocation {
    type SortKey = AllocationSortKey;
    const NAME: &'static str = "allocation";
    const COLLECTION: &'static str = "allocations";
    const FIELDS: &'static [FieldSpec] = ALLOCATION_FIELDS;
    // Ironic's allocation listing shows every field; there is no `/detail`.
    const DEFAULT_LIST_FIELDS: &'static [&'static str] = &[
        "uuid",
        "name",
        "node_uuid",
        "state",
        "last_error",
        "resource_class",
        "traits",
        "candidate_nodes",
        "extra",
        "owner",
        "created_at",
        "updated_at",
    ];
    const UNSORTABLE: &'static [&'static str] = &["traits", "candidate_nodes", "extra"];

    fn uuid(&self) -> Uuid {
        self.uuid
    }

    fn field_json(&self, name: &str, _version: Microversion, base: &str) -> Value {
        match name {
            "uuid" => json!(self.uuid),
            "name" => opt_text_value(self.name.as_deref()),
            "node_uuid" => uuid_value(self.node_uuid),
            "state" => json!(self.state.as_str()),
            "last_error" => opt_text_value(self.last_error.as_deref()),
            "resource_class" => opt_text_value(self.resource_class.as_deref()),
            "traits" => json!(self.traits),
            "candidate_nodes" => json!(self.candidate_nodes),
            "extra" => Value::Object(self.extra.clone()),
            "owner" => opt_text_value(self.owner.as_deref()),
            "created_at" => timestamp(self.created_at),
            "updated_at" => opt_timestamp(self.updated_at),
            "links" => links(base, &format!("allocations/{}", self.uuid)),
            _ => Value::Null,
        }
    }

    fn field_value(&self, name: &str, version: Microversion) -> Value {
        self.field_json(name, version, "")
    }

    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError> {
        match name {
            "uuid" => {
                self.uuid = super::fields::opt_uuid(name, value)?.unwrap_or_else(Uuid::new_v4);
            }
            "name" => {
                let name_value = opt_string(name, value, 255)?;
                if let Some(text) = &name_value
                    && (!is_valid_logical_name(text) || Uuid::parse_str(text).is_ok())
                {
                    return Err(ApiError::bad_request(format!(
                        "Cannot use '{text}' as an allocation name: use letters, digits, '-', \
                         '.', '_' and '~', and nothing that looks like a UUID."
                    )));
                }
                self.name = name_value;
            }
            "resource_class" => self.resource_class = opt_string(name, value, 80)?,
            "owner" => self.owner = opt_string(name, value, 255)?,
            "extra" => self.extra = object(name, value)?,
            "traits" => self.traits = string_list(name, value)?,
            "candidate_nodes" => self.candidate_nodes = string_list(name, value)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "'{other}' cannot be set on an allocation."
                )));
            }
        }
        Ok(())
    }
}

fn string_list(name: &str, value: Value) -> Result<Vec<String>, ApiError> {
    let bad = || {
        ApiError::bad_request(format!(
            "Invalid value for {name}: expected a list of strings."
        ))
    };
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                _ => Err(bad()),
            })
            .collect(),
        _ => Err(bad()),
    }
}

fn allocation_filter(
    store_filter: &mut AllocationFilter,
    pairs: &[(String, String)],
    version: Microversion,
) -> Result<Option<String>, ApiError> {
    let mut node = None;
    for (name, value) in pairs {
        if !known_filter("allocations", ALLOCATION_FILTERS, name, version)? {
            return Err(ApiError::bad_request(format!(
                "Unknown query parameter '{name}' for listing allocations."
            )));
        }
        match name.as_str() {
            "node" => node = Some(value.clone()),
            "resource_class" => store_filter.resource_class = Some(value.clone()),
            "owner" => store_filter.owner = Some(value.clone()),
            "state" => {
                store_filter.state =
                    Some(value.parse::<AllocationState>().map_err(|error| {
                        ApiError::bad_request(format!("Invalid state: {error}"))
                    })?);
            }
            _ => {}
        }
    }
    Ok(node)
}

/// `GET /v1/allocations`.
pub async fn allocation_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let (params, selection) = list_params::<Allocation>(&query, version, false)?;
    let mut filter = AllocationFilter::default();
    let node = allocation_filter(&mut filter, &params.filters, version)?;
    if project.is_some() {
        // A project-scoped caller sees its project's allocations, whatever it asks for.
        filter.owner = project;
    }
    if let Some(node) = node {
        let node =
            state
                .store
                .node_get(&Ident::parse(&node))
                .await
                .map_err(|error| match error {
                    ferric_db::Error::NotFound { .. } => {
                        ApiError::bad_request(format!("Node {node} could not be found."))
                    }
                    other => db_error(other),
                })?;
        filter.node = Some(node.uuid);
    }
    let allocations = state
        .store
        .allocation_list(&filter, &params.page)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    let page = ListPage {
        version,
        selection: &selection,
        base: &base,
        path: "allocations",
        query: &query,
        limit: params.limit,
    };
    Ok(Json(list_body(&allocations, &page)))
}

/// `GET /v1/allocations/{allocation_ident}`.
pub async fn allocation_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let selection = show_selection(ALLOCATION_FIELDS, "allocation", &query, version)?;
    let allocation = state
        .store
        .allocation_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    Ok(Json(record_json(
        &allocation,
        version,
        &selection,
        &base_url(&headers),
    )))
}

/// `POST /v1/allocations`: 201 with the allocation `allocating` (or, backfilled, `active`).
pub async fn allocation_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut body = json_object_body(&body)?;
    let backfill = match body.remove("node") {
        None => None,
        // 400 as Ironic's request schema before 1.58 (no `node` property), not 406.
        Some(_) if version.minor() < BACKFILL_SINCE => {
            return Err(ApiError::bad_request(format!(
                "'node' needs API version 1.{BACKFILL_SINCE} or later; this request asked \
                 for {version}."
            )));
        }
        Some(Value::String(node)) => Some(node),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid value for node: expected a node UUID or name, got {other}."
            )));
        }
    };
    check_create_body::<Allocation>(&body, version, &[])?;
    let mut allocation = Allocation::new(Uuid::new_v4());
    apply_create_body(&mut allocation, body)?;
    if allocation.traits.len() > MAX_TRAITS_PER_NODE {
        return Err(ApiError::bad_request(format!(
            "An allocation may ask for at most {MAX_TRAITS_PER_NODE} traits."
        )));
    }
    for name in &allocation.traits {
        check_trait("traits", name)?;
    }
    allocation.candidate_nodes = candidate_uuids(&state, &allocation.candidate_nodes).await?;

    let saved = match backfill {
        Some(node) => backfill_allocation(&state, allocation, &node).await?,
        None => {
            if allocation
                .resource_class
                .as_deref()
                .is_none_or(str::is_empty)
            {
                return Err(ApiError::bad_request(
                    "The resource_class field is mandatory when not backfilling",
                ));
            }
            let saved = state
                .store
                .allocation_create(&allocation)
                .await
                .map_err(db_error)?;
            start_allocating(&state, saved.clone());
            saved
        }
    };
    let base = base_url(&headers);
    let body = record_json(&saved, version, &Selection::All, &base);
    Ok(created(&saved, body, &base))
}

/// Candidates as UUIDs: each named node must exist (400 otherwise).
async fn candidate_uuids(state: &ApiState, candidates: &[String]) -> Result<Vec<String>, ApiError> {
    let mut uuids = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let node = state
            .store
            .node_get(&Ident::parse(candidate))
            .await
            .map_err(|error| match error {
                ferric_db::Error::NotFound { .. } => {
                    ApiError::bad_request(format!("Candidate node {candidate} could not be found."))
                }
                other => db_error(other),
            })?;
        let uuid = node.uuid.to_string();
        if !uuids.contains(&uuid) {
            uuids.push(uuid);
        }
    }
    Ok(uuids)
}

/// Hands a stored `allocating` allocation to the background matching: this process's
/// conductor when it has one, else a task of this process (a conductor's recovery takes it
/// over if this process dies before it is done).
fn start_allocating(state: &ApiState, allocation: Allocation) {
    match state.conductor.local() {
        Some(conductor) => conductor.allocate(allocation),
        None => {
            let store = state.store.clone();
            tokio::spawn(async move {
                let uuid = allocation.uuid;
                if let Err(error) = ferric_conductor::allocations::process(&store, allocation).await
                {
                    tracing::error!(allocation = %uuid, %error, "could not process the allocation");
                }
            });
        }
    }
}

/// An allocation for a node that is already deployed (1.58): active at once.
async fn backfill_allocation(
    state: &ApiState,
    mut allocation: Allocation,
    ident: &str,
) -> Result<Allocation, ApiError> {
    let node = state
        .store
        .node_get(&Ident::parse(ident))
        .await
        .map_err(|error| match error {
            ferric_db::Error::NotFound { .. } => {
                ApiError::bad_request(format!("Node {ident} could not be found."))
            }
            other => db_error(other),
        })?;
    if node.provision_state != ProvisionState::Active {
        return Err(ApiError::bad_request(format!(
            "Cannot backfill an allocation for node {} in state \"{}\": only active nodes \
             can be backfilled.",
            node.uuid,
            node.provision_state.as_str()
        )));
    }
    if node.allocation_uuid.is_some() {
        return Err(ApiError::conflict(format!(
            "Node {} already has an allocation.",
            node.uuid
        )));
    }
    if allocation.resource_class.is_none() {
        allocation.resource_class = node.resource_class.clone();
    }
    if !ferric_conductor::allocations::matches(&allocation, &node)
        || allocation
            .resource_class
            .as_ref()
            .is_some_and(|class| node.resource_class.as_ref() != Some(class))
    {
        return Err(ApiError::bad_request(format!(
            "Node {} does not match the allocation's resource class, traits, candidates or \
             owner.",
            node.uuid
        )));
    }
    allocation.state = AllocationState::Active;
    allocation.node_uuid = Some(node.uuid);
    let saved = state
        .store
        .allocation_create(&allocation)
        .await
        .map_err(db_error)?;
    let mut claimed = node.clone();
    claimed.allocation_uuid = Some(saved.uuid);
    if claimed.instance_uuid.is_none() {
        claimed.instance_uuid = Some(saved.uuid);
    }
    // As a matched allocation: the node's instance traits are the allocation's.
    claimed
        .instance_info
        .insert("traits".to_owned(), Value::from(saved.traits.clone()));
    if let Err(error) = state.store.node_update(&claimed, node.version).await {
        // The node moved on meanwhile: undo, so no allocation points at a node that does
        // not point back.
        let _ = state.store.allocation_delete(saved.uuid).await;
        return Err(db_error(error));
    }
    Ok(saved)
}

/// `PATCH /v1/allocations/{allocation_ident}` (1.57): `name` and `extra`.
pub async fn allocation_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    if version.minor() < UPDATE_SINCE {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "Updating an allocation needs API version 1.{UPDATE_SINCE} or later; this \
                 request asked for {version}."
            ),
        ));
    }
    let ops = parse_patch(&body)?;
    check_patch::<Allocation>(&ops, version)?;
    let allocation = state
        .store
        .allocation_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    let updated = apply_patch(&allocation, &ops, version)?;
    let saved = state
        .store
        .allocation_update(&updated, allocation.version)
        .await
        .map_err(db_error)?;
    Ok(Json(record_json(
        &saved,
        version,
        &Selection::All,
        &base_url(&headers),
    )))
}

/// Frees the allocation's node (if it still points at it) and deletes the allocation. 409
/// while the node is deployed or busy, unless it is in maintenance.
async fn delete(state: &ApiState, allocation: &Allocation) -> Result<StatusCode, ApiError> {
    if let Some(node_uuid) = allocation.node_uuid {
        match state.store.node_get(&Ident::Uuid(node_uuid)).await {
            Ok(node) => {
                let busy = node.provision_state == ProvisionState::Active
                    || node.target_provision_state.is_some();
                if busy && !node.maintenance {
                    return Err(ApiError::conflict(format!(
                        "Cannot remove allocation {} as node {} is in state \"{}\"; undeploy \
                         it or set maintenance first.",
                        allocation.uuid,
                        node.uuid,
                        node.provision_state.as_str()
                    )));
                }
                if node.allocation_uuid == Some(allocation.uuid) {
                    let mut freed = node.clone();
                    freed.allocation_uuid = None;
                    if freed.instance_uuid == Some(allocation.uuid) {
                        freed.instance_uuid = None;
                    }
                    state
                        .store
                        .node_update(&freed, node.version)
                        .await
                        .map_err(db_error)?;
                }
            }
            Err(ferric_db::Error::NotFound { .. }) => {}
            Err(other) => return Err(db_error(other)),
        }
    }
    state
        .store
        .allocation_delete(allocation.uuid)
        .await
        .map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/allocations/{allocation_ident}`.
pub async fn allocation_delete(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let allocation = state
        .store
        .allocation_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    delete(&state, &allocation).await
}

/// The allocation of a node; 404 when it has none.
async fn node_allocation(state: &ApiState, ident: &str) -> Result<Allocation, ApiError> {
    let node = state
        .store
        .node_get(&Ident::parse(ident))
        .await
        .map_err(db_error)?;
    let missing = || {
        ApiError::not_found(format!(
            "Allocation for node {} could not be found.",
            node.uuid
        ))
    };
    let Some(allocation) = node.allocation_uuid else {
        return Err(missing());
    };
    match state.store.allocation_get(&Ident::Uuid(allocation)).await {
        Ok(allocation) => Ok(allocation),
        Err(ferric_db::Error::NotFound {
            kind: Kind::Allocation,
            ..
        }) => Err(missing()),
        Err(other) => Err(db_error(other)),
    }
}

/// `GET /v1/nodes/{node_ident}/allocation`.
pub async fn node_allocation_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let selection = show_selection(ALLOCATION_FIELDS, "allocation", &query, version)?;
    // Ironic reads the node as a filter of the allocation listing, where a node that does
    // not exist is the caller's mistake: 400, not 404 (ironic-tempest-plugin's
    // `test_show_allocation_by_node` relies on it).
    let allocation = node_allocation(&state, &ident).await.map_err(|error| {
        if error.status == StatusCode::NOT_FOUND && error.message.starts_with("Node ") {
            ApiError::bad_request(error.message)
        } else {
            error
        }
    })?;
    Ok(Json(record_json(
        &allocation,
        version,
        &selection,
        &base_url(&headers),
    )))
}

/// `DELETE /v1/nodes/{node_ident}/allocation`.
pub async fn node_allocation_delete(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let allocation = node_allocation(&state, &ident).await?;
    delete(&state, &allocation).await
}
