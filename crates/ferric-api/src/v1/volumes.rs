//! `/v1/volume`, `/v1/volume/connectors`, `/v1/volume/targets` (1.32) and the node's
//! `/v1/nodes/{node_ident}/volume[/connectors|/targets]`: create, list (`?detail=`), show,
//! PATCH, delete (`reference/ironic.md` §2.7).
//!
//! A connector's `(type, connector_id)` is unique (409); a target's `boot_index` is unique per
//! node (409). As in Ironic's conductor, a connector or target is changed only while its node
//! is powered off, and deleted only then or while the node may itself be deleted (`enroll`,
//! `manageable`, `adopt failed`); otherwise 400. Both are data the API writes under the node's
//! revision-free tables, refused with 409 while a conductor holds the node.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use ferric_db::{Kind, Store, VolumeConnectorSortKey, VolumeFilter, VolumeTargetSortKey};
use ferric_model::Microversion;
use ferric_model::resources::{
    Ident, Node, PowerState, VOLUME_CONNECTOR_TYPES, VolumeConnector, VolumeTarget,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{
    Access::{CreateOnly, ReadOnly, Writable},
    FieldSpec, Selection, field, mask_secrets, object, opt_uuid, show_selection,
};
use super::paging::ProjectScope;
use super::patch::parse_patch;
use super::ports::check_node_not_locked;
use super::resource::{
    Page, Resource, apply_create_body, apply_patch, check_create_body, check_patch, created,
    list_body, list_params, record_json,
};
use super::{
    base_url, db_error, json_object_body, links, opt_timestamp, parse_bool_param, timestamp,
};
use crate::endpoints::since;
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// The version volume connectors and targets appeared in.
pub(crate) const VOLUME_SINCE: u16 = since::VOLUME.minor();

/// Every volume connector field.
pub(crate) const CONNECTOR_FIELDS: &[FieldSpec] = &[
    field("uuid", VOLUME_SINCE, CreateOnly, T::Uuid),
    field("type", VOLUME_SINCE, Writable, T::Text),
    field("connector_id", VOLUME_SINCE, Writable, T::Text),
    field("node_uuid", VOLUME_SINCE, Writable, T::Uuid),
    field("extra", VOLUME_SINCE, Writable, T::Object),
    field("created_at", VOLUME_SINCE, ReadOnly, T::Time),
    field("updated_at", VOLUME_SINCE, ReadOnly, T::OptTime),
    field("links", VOLUME_SINCE, ReadOnly, T::Links),
];

/// Every volume target field.
pub(crate) const TARGET_FIELDS: &[FieldSpec] = &[
    field("uuid", VOLUME_SINCE, CreateOnly, T::Uuid),
    field("volume_type", VOLUME_SINCE, Writable, T::Text),
    field("properties", VOLUME_SINCE, Writable, T::Object),
    field("boot_index", VOLUME_SINCE, Writable, T::Int),
    field("volume_id", VOLUME_SINCE, Writable, T::Text),
    field("node_uuid", VOLUME_SINCE, Writable, T::Uuid),
    field("extra", VOLUME_SINCE, Writable, T::Object),
    field("created_at", VOLUME_SINCE, ReadOnly, T::Time),
    field("updated_at", VOLUME_SINCE, ReadOnly, T::OptTime),
    field("links", VOLUME_SINCE, ReadOnly, T::Links),
];

/// What a create body must hold.
pub(crate) const CONNECTOR_REQUIRED: &[&str] = &["type", "connector_id", "node_uuid"];
pub(crate) const TARGET_REQUIRED: &[&str] =
    &["volume_type", "boot_index", "volume_id", "node_uuid"];

/// Volume list filters and the minor version each appeared in.
pub(crate) const VOLUME_FILTERS: &[(&str, u16)] = &[("node", VOLUME_SINCE)];

/// Ironic's InvalidInput wording.
fn invalid_input(name: &str, value: &Value, hint: &str) -> ApiError {
    let shown = value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned);
    ApiError::bad_request(format!(
        "Invalid input for field/attribute {name}. Value: '{shown}'. {hint}"
    ))
}

/// A required, non-empty string of at most `max_len` characters.
fn text(name: &str, value: Value, max_len: usize) -> Result<String, ApiError> {
    match &value {
        Value::String(text) if !text.is_empty() && text.chars().count() <= max_len => {
            Ok(text.clone())
        }
        Value::String(text) if text.is_empty() => Err(invalid_input(
            name,
            &value,
            "It is required and cannot be empty.",
        )),
        Value::String(_) => Err(invalid_input(
            name,
            &value,
            &format!("At most {max_len} characters are allowed."),
        )),
        _ => Err(invalid_input(name, &value, "Expected a string.")),
    }
}

fn node_uuid_field(value: Value) -> Result<Uuid, ApiError> {
    match &value {
        Value::String(text) => Uuid::parse_str(text).map_err(|_| {
            ApiError::bad_request(format!(
                "Expected a UUID for node_uuid, but received {text}."
            ))
        }),
        _ => Err(invalid_input(
            "node_uuid",
            &value,
            "Expected the UUID of a node.",
        )),
    }
}

fn not_settable(name: &str) -> ApiError {
    ApiError::bad_request(format!("'{name}' cannot be set by the API."))
}

impl Resource for VolumeConnector {
    type SortKey = VolumeConnectorSortKey;
    const NAME: &'static str = "volume connector";
    const COLLECTION: &'static str = "connectors";
    const FIELDS: &'static [FieldSpec] = CONNECTOR_FIELDS;
    const DEFAULT_LIST_FIELDS: &'static [&'static str] =
        &["uuid", "node_uuid", "type", "connector_id"];
    const UNSORTABLE: &'static [&'static str] = &["extra"];

    fn uuid(&self) -> Uuid {
        self.uuid
    }

    fn field_json(&self, name: &str, _version: Microversion, base: &str) -> Value {
        match name {
            "uuid" => json!(self.uuid),
            "type" => json!(self.connector_type),
            "connector_id" => json!(self.connector_id),
            "node_uuid" => json!(self.node_uuid),
            "extra" => Value::Object(self.extra.clone()),
            "created_at" => timestamp(self.created_at),
            "updated_at" => opt_timestamp(self.updated_at),
            "links" => links(base, &format!("volume/connectors/{}", self.uuid)),
            _ => Value::Null,
        }
    }

    fn field_value(&self, name: &str, version: Microversion) -> Value {
        self.field_json(name, version, "")
    }

    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError> {
        match name {
            "uuid" => {
                self.uuid = opt_uuid(name, value)?
                    .ok_or_else(|| ApiError::bad_request("uuid cannot be null."))?;
            }
            "type" => {
                if !value
                    .as_str()
                    .is_some_and(|kind| VOLUME_CONNECTOR_TYPES.contains(&kind))
                {
                    return Err(invalid_input(
                        name,
                        &value,
                        &format!(
                            "Value should be one of: {}.",
                            VOLUME_CONNECTOR_TYPES.join(", ")
                        ),
                    ));
                }
                self.connector_type = text(name, value, 32)?;
            }
            "connector_id" => self.connector_id = text(name, value, 255)?,
            "node_uuid" => self.node_uuid = node_uuid_field(value)?,
            "extra" => self.extra = object(name, value)?,
            other => return Err(not_settable(other)),
        }
        Ok(())
    }
}

impl Resource for VolumeTarget {
    type SortKey = VolumeTargetSortKey;
    const NAME: &'static str = "volume target";
    const COLLECTION: &'static str = "targets";
    const FIELDS: &'static [FieldSpec] = TARGET_FIELDS;
    const DEFAULT_LIST_FIELDS: &'static [&'static str] = &[
        "uuid",
        "node_uuid",
        "volume_type",
        "boot_index",
        "volume_id",
    ];
    const UNSORTABLE: &'static [&'static str] = &["extra", "properties"];

    fn uuid(&self) -> Uuid {
        self.uuid
    }

    fn field_json(&self, name: &str, version: Microversion, base: &str) -> Value {
        match name {
            // Connection details may hold CHAP secrets: masked as Ironic masks them.
            "properties" => mask_secrets(&self.properties),
            "links" => links(base, &format!("volume/targets/{}", self.uuid)),
            other => self.field_value(other, version),
        }
    }

    fn field_value(&self, name: &str, _version: Microversion) -> Value {
        match name {
            "uuid" => json!(self.uuid),
            "volume_type" => json!(self.volume_type),
            "properties" => Value::Object(self.properties.clone()),
            "boot_index" => json!(self.boot_index),
            "volume_id" => json!(self.volume_id),
            "node_uuid" => json!(self.node_uuid),
            "extra" => Value::Object(self.extra.clone()),
            "created_at" => timestamp(self.created_at),
            "updated_at" => opt_timestamp(self.updated_at),
            _ => Value::Null,
        }
    }

    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError> {
        match name {
            "uuid" => {
                self.uuid = opt_uuid(name, value)?
                    .ok_or_else(|| ApiError::bad_request("uuid cannot be null."))?;
            }
            "volume_type" => self.volume_type = text(name, value, 64)?,
            "properties" => self.properties = object(name, value)?,
            "boot_index" => {
                self.boot_index = value
                    .as_i64()
                    .ok_or_else(|| invalid_input(name, &value, "Expected an integer."))?;
            }
            "volume_id" => self.volume_id = text(name, value, 36)?,
            "node_uuid" => self.node_uuid = node_uuid_field(value)?,
            "extra" => self.extra = object(name, value)?,
            other => return Err(not_settable(other)),
        }
        Ok(())
    }
}

/// `{"links", "connectors", "targets"}` for `prefix` (`volume` or `nodes/<ident>/volume`).
fn volume_document(base: &str, prefix: &str) -> Value {
    json!({
        "links": links(base, &format!("{prefix}/")),
        "connectors": links(base, &format!("{prefix}/connectors")),
        "targets": links(base, &format!("{prefix}/targets")),
    })
}

/// `GET /v1/volume` (1.32): links to the connectors and targets.
pub async fn volume_root(
    ApiVersion(_version): ApiVersion,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(volume_document(&base_url(&headers), "volume")))
}

/// `GET /v1/nodes/{node_ident}/volume` (1.32).
pub async fn node_volume_root(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = state
        .store
        .node_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    let prefix = format!("nodes/{}/volume", node.uuid);
    Ok(Json(volume_document(&base_url(&headers), &prefix)))
}

fn parse_uuid(kind: &str, text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| {
        ApiError::bad_request(format!(
            "Expected a UUID for the {kind} but received {text}."
        ))
    })
}

/// Which listing: all (with the caller's project scope) or one node's.
enum Scope {
    All(Option<String>),
    Node(Uuid),
}

/// The listing's page: Ironic's volume lists take `?detail=` from 1.32 (not only from 1.43
/// like the other resources), so it is read here before the generic parameters.
async fn list<R: Listed>(
    state: &ApiState,
    version: Microversion,
    query: &[(String, String)],
    scope: Scope,
) -> Result<ListPage<R>, ApiError> {
    let mut detail = false;
    let mut rest = Vec::new();
    for (name, value) in query {
        if name == "detail" {
            detail = parse_bool_param("detail", value)?;
        } else {
            rest.push((name.clone(), value.clone()));
        }
    }
    if detail && rest.iter().any(|(name, _)| name == "fields") {
        return Err(ApiError::bad_request(
            "Can't fetch a subset of fields with 'detail' set.",
        ));
    }
    let (params, selection) = list_params::<R>(&rest, version, detail)?;
    let mut filter = VolumeFilter::default();
    for (name, value) in &params.filters {
        if name != "node" {
            return Err(ApiError::bad_request(format!(
                "Unknown query parameter '{name}' for listing volume {}; the only filter is \
                 'node'.",
                R::COLLECTION
            )));
        }
        if matches!(scope, Scope::Node(_)) {
            return Err(ApiError::bad_request(
                "The node is already named in the path; drop 'node'.",
            ));
        }
        let node = state
            .store
            .node_get(&Ident::parse(value))
            .await
            .map_err(db_error)?;
        filter.node_uuid = Some(node.uuid);
    }
    let path = match scope {
        Scope::All(project) => {
            filter.project = project;
            format!("volume/{}", R::COLLECTION)
        }
        Scope::Node(node) => {
            filter.node_uuid = Some(node);
            format!("nodes/{node}/volume/{}", R::COLLECTION)
        }
    };
    let records = R::fetch(&state.store, &filter, &params.page).await?;
    Ok(ListPage {
        records,
        selection,
        path,
        limit: params.limit,
    })
}

/// One page of records, ready to be shown.
struct ListPage<R> {
    records: Vec<R>,
    selection: Selection,
    path: String,
    limit: u32,
}

/// A volume record's listing query.
trait Listed: Resource + Sized {
    async fn fetch(
        store: &Store,
        filter: &VolumeFilter,
        page: &ferric_db::Page<Self::SortKey>,
    ) -> Result<Vec<Self>, ApiError>;
}

impl Listed for VolumeConnector {
    async fn fetch(
        store: &Store,
        filter: &VolumeFilter,
        page: &ferric_db::Page<VolumeConnectorSortKey>,
    ) -> Result<Vec<Self>, ApiError> {
        store
            .volume_connector_list(filter, page)
            .await
            .map_err(db_error)
    }
}

impl Listed for VolumeTarget {
    async fn fetch(
        store: &Store,
        filter: &VolumeFilter,
        page: &ferric_db::Page<VolumeTargetSortKey>,
    ) -> Result<Vec<Self>, ApiError> {
        store
            .volume_target_list(filter, page)
            .await
            .map_err(db_error)
    }
}

async fn list_response<R: Listed>(
    state: &ApiState,
    version: Microversion,
    headers: &HeaderMap,
    query: &[(String, String)],
    scope: Scope,
) -> Result<Json<Value>, ApiError> {
    let page = list::<R>(state, version, query, scope).await?;
    let base = base_url(headers);
    let shown = Page {
        version,
        selection: &page.selection,
        base: &base,
        path: &page.path,
        query,
        limit: page.limit,
    };
    Ok(Json(list_body(&page.records, &shown)))
}

/// The node a volume listing's path names (404 when it does not exist).
async fn path_node(state: &ApiState, ident: &str) -> Result<Node, ApiError> {
    state
        .store
        .node_get(&Ident::parse(ident))
        .await
        .map_err(db_error)
}

/// `GET /v1/volume/connectors`: default fields or `?fields=`/`?detail=`, `?node=`, paged.
pub async fn connector_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list_response::<VolumeConnector>(&state, version, &headers, &query, Scope::All(project)).await
}

/// `GET /v1/volume/targets`.
pub async fn target_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list_response::<VolumeTarget>(&state, version, &headers, &query, Scope::All(project)).await
}

/// `GET /v1/nodes/{node_ident}/volume/connectors`.
pub async fn node_connector_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let _path = format!("/v1/nodes/{ident}/volume/connectors");
    let node = path_node(&state, &ident).await?;
    list_response::<VolumeConnector>(&state, version, &headers, &query, Scope::Node(node.uuid))
        .await
}

/// `GET /v1/nodes/{node_ident}/volume/targets`.
pub async fn node_target_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let _path = format!("/v1/nodes/{ident}/volume/targets");
    let node = path_node(&state, &ident).await?;
    list_response::<VolumeTarget>(&state, version, &headers, &query, Scope::Node(node.uuid)).await
}

/// `GET /v1/volume/connectors/{connector_uuid}` (`?fields=`).
pub async fn connector_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let uuid = parse_uuid("volume connector", &ident)?;
    let selection = show_selection(CONNECTOR_FIELDS, "volume connector", &query, version)?;
    let connector = state
        .store
        .volume_connector_get(uuid)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    Ok(Json(record_json(&connector, version, &selection, &base)))
}

/// `GET /v1/volume/targets/{target_uuid}` (`?fields=`).
pub async fn target_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let uuid = parse_uuid("volume target", &ident)?;
    let selection = show_selection(TARGET_FIELDS, "volume target", &query, version)?;
    let target = state
        .store
        .volume_target_get(uuid)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    Ok(Json(record_json(&target, version, &selection, &base)))
}

/// The node a create body or patch names: missing is the caller's mistake (400).
async fn body_node(store: &Store, node: Uuid) -> Result<Node, ApiError> {
    store
        .node_get(&Ident::Uuid(node))
        .await
        .map_err(|error| match error {
            ferric_db::Error::NotFound {
                kind: Kind::Node, ..
            } => invalid_input(
                "node_uuid",
                &json!(node.to_string()),
                "No node has this UUID.",
            ),
            other => db_error(other),
        })
}

/// Ironic's InvalidStateRequested (400).
fn invalid_state(action: &str, node: &Node) -> ApiError {
    let state = node.power_state.map_or("None", PowerState::as_str);
    ApiError::bad_request(format!(
        "The requested action \"{action}\" can not be performed on node \"{}\" while it is in \
         state \"{state}\". Power the node off first.",
        node.uuid
    ))
}

/// A connector or target changes only while its node is powered off (Ironic's conductor).
fn check_update_allowed(action: &str, node: &Node) -> Result<(), ApiError> {
    if node.power_state == Some(PowerState::Off) {
        Ok(())
    } else {
        Err(invalid_state(action, node))
    }
}

/// ... and goes away while it is powered off or the node itself could be deleted.
fn check_delete_allowed(action: &str, node: &Node) -> Result<(), ApiError> {
    if node.power_state == Some(PowerState::Off) || node.provision_state.allows_delete(false) {
        Ok(())
    } else {
        Err(invalid_state(action, node))
    }
}

/// `POST /v1/volume/connectors`: 201 with the new connector and its `Location`.
pub async fn connector_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object_body(&body)?;
    check_create_body::<VolumeConnector>(&body, version, CONNECTOR_REQUIRED)?;
    let mut connector = VolumeConnector::new(Uuid::new_v4(), Uuid::nil());
    apply_create_body(&mut connector, body)?;
    body_node(&state.store, connector.node_uuid).await?;
    let saved = state
        .store
        .volume_connector_create(&connector)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    let shown = record_json(&saved, version, &Selection::All, &base);
    Ok(located(
        created(&saved, shown, &base),
        &base,
        "connectors",
        saved.uuid,
    ))
}

/// `POST /v1/volume/targets`: 201 with the new target and its `Location`.
pub async fn target_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object_body(&body)?;
    check_create_body::<VolumeTarget>(&body, version, TARGET_REQUIRED)?;
    let mut target = VolumeTarget::new(Uuid::new_v4(), Uuid::nil());
    apply_create_body(&mut target, body)?;
    body_node(&state.store, target.node_uuid).await?;
    let saved = state
        .store
        .volume_target_create(&target)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    let shown = record_json(&saved, version, &Selection::All, &base);
    Ok(located(
        created(&saved, shown, &base),
        &base,
        "targets",
        saved.uuid,
    ))
}

/// `created` names `/v1/<collection>/<uuid>`; volume records live under `/v1/volume/`.
fn located(mut response: Response, base: &str, collection: &str, uuid: Uuid) -> Response {
    let location = format!("{base}/v1/volume/{collection}/{uuid}");
    if let Ok(location) = axum::http::HeaderValue::from_str(&location) {
        response
            .headers_mut()
            .insert(axum::http::header::LOCATION, location);
    }
    response
}

/// The checks every volume write makes on the record's node (and, when a patch moves the
/// record, on the new node): not locked by a conductor (409), in a state that allows it (400).
/// Each node is read only once it is free: a record read while a conductor held it (say right
/// after a power change's 202) would still show the power state from before.
async fn check_nodes(
    store: &Store,
    action: &str,
    old_node: Uuid,
    new_node: Uuid,
    delete: bool,
) -> Result<(), ApiError> {
    let mut nodes = vec![old_node];
    if new_node != old_node {
        nodes.push(new_node);
    }
    for (index, uuid) in nodes.into_iter().enumerate() {
        check_node_not_locked(store, uuid).await?;
        let node = if index == 0 {
            store.node_get(&Ident::Uuid(uuid)).await.map_err(db_error)?
        } else {
            body_node(store, uuid).await?
        };
        if delete {
            check_delete_allowed(action, &node)?;
        } else {
            check_update_allowed(action, &node)?;
        }
    }
    Ok(())
}

/// `PATCH /v1/volume/connectors/{connector_uuid}`: only while the node is powered off.
pub async fn connector_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let uuid = parse_uuid("volume connector", &ident)?;
    let ops = parse_patch(&body)?;
    check_patch::<VolumeConnector>(&ops, version)?;
    let connector = state
        .store
        .volume_connector_get(uuid)
        .await
        .map_err(db_error)?;
    let updated = apply_patch(&connector, &ops, version)?;
    check_nodes(
        &state.store,
        "volume connector update",
        connector.node_uuid,
        updated.node_uuid,
        false,
    )
    .await?;
    let saved = state
        .store
        .volume_connector_update(&updated, connector.version)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    Ok(Json(record_json(&saved, version, &Selection::All, &base)))
}

/// `PATCH /v1/volume/targets/{target_uuid}`: only while the node is powered off.
pub async fn target_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let uuid = parse_uuid("volume target", &ident)?;
    let ops = parse_patch(&body)?;
    check_patch::<VolumeTarget>(&ops, version)?;
    let target = state
        .store
        .volume_target_get(uuid)
        .await
        .map_err(db_error)?;
    let updated = apply_patch(&target, &ops, version)?;
    check_nodes(
        &state.store,
        "volume target update",
        target.node_uuid,
        updated.node_uuid,
        false,
    )
    .await?;
    let saved = state
        .store
        .volume_target_update(&updated, target.version)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    Ok(Json(record_json(&saved, version, &Selection::All, &base)))
}

/// `DELETE /v1/volume/connectors/{connector_uuid}`: 204.
pub async fn connector_delete(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let uuid = parse_uuid("volume connector", &ident)?;
    let connector = state
        .store
        .volume_connector_get(uuid)
        .await
        .map_err(db_error)?;
    let node = connector.node_uuid;
    check_nodes(&state.store, "volume connector deletion", node, node, true).await?;
    state
        .store
        .volume_connector_delete(uuid)
        .await
        .map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/volume/targets/{target_uuid}`: 204.
pub async fn target_delete(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let uuid = parse_uuid("volume target", &ident)?;
    let target = state
        .store
        .volume_target_get(uuid)
        .await
        .map_err(db_error)?;
    let node = target.node_uuid;
    check_nodes(&state.store, "volume target deletion", node, node, true).await?;
    state
        .store
        .volume_target_delete(uuid)
        .await
        .map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}
