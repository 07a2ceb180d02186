//! `/v1/nodes/{node_ident}/history` and `…/history/{event_uuid}` (1.78): the node's event
//! log, read-only (`reference/ironic.md` §2.5).
//!
//! Storage keeps a bounded number of events per node, so a listing reads the node's whole
//! history and sorts and pages it in memory.

use std::cmp::Ordering;
use std::str::FromStr;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use ferric_db::{Kind, SortDir, UnknownSortKey};
use ferric_model::Microversion;
use ferric_model::microversion::gate;
use ferric_model::resources::{Ident, NodeHistoryEntry};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{Access::ReadOnly, FieldSpec, field};
use super::paging::{collection_body, parse_list_params};
use super::{base_url, db_error, parse_bool_param, timestamp};
use crate::endpoints::since;
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

const HISTORY_SINCE: u16 = since::HISTORY.minor();
/// `project` (1.113) and `state`, `target_provision_state`, `duration_seconds` (1.115) are
/// not recorded by Ferric yet; detail views at those versions show them as null.
const PROJECT_SINCE: u16 = gate::NODE_HISTORY_PROJECT.minor();
const STATE_FIELDS_SINCE: u16 = gate::NODE_HISTORY_FIELDS.minor();

/// The fields a history listing may be sorted by; none is a JSON document.
const HISTORY_FIELDS: &[FieldSpec] = &[
    field("uuid", HISTORY_SINCE, ReadOnly, T::Uuid),
    field("created_at", HISTORY_SINCE, ReadOnly, T::Time),
    field("severity", HISTORY_SINCE, ReadOnly, T::Text),
    field("event_type", HISTORY_SINCE, ReadOnly, T::Text),
];

/// Events longer than this are cut (with `...`) in non-detail listings.
const SHORT_EVENT_LEN: usize = 255;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum HistorySortKey {
    #[default]
    CreatedAt,
    Uuid,
    Severity,
    EventType,
}

impl FromStr for HistorySortKey {
    type Err = UnknownSortKey;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Ok(match name {
            "created_at" => Self::CreatedAt,
            "uuid" => Self::Uuid,
            "severity" => Self::Severity,
            "event_type" => Self::EventType,
            other => return Err(UnknownSortKey(other.to_owned())),
        })
    }
}

fn compare(key: HistorySortKey, a: &NodeHistoryEntry, b: &NodeHistoryEntry) -> Ordering {
    match key {
        HistorySortKey::CreatedAt => a.created_at.cmp(&b.created_at),
        HistorySortKey::Uuid => a.uuid.cmp(&b.uuid),
        HistorySortKey::Severity => a.severity.cmp(&b.severity),
        HistorySortKey::EventType => a.event_type.cmp(&b.event_type),
    }
}

/// One event as Ironic shows it: the short form (`uuid`, `created_at`, `severity`, `event`
/// cut to 255 characters) or the detailed one.
fn entry_json(entry: &NodeHistoryEntry, detail: bool, version: Microversion, base: &str) -> Value {
    let mut shown = Map::new();
    shown.insert("uuid".to_owned(), json!(entry.uuid));
    shown.insert("created_at".to_owned(), timestamp(entry.created_at));
    shown.insert("severity".to_owned(), json!(entry.severity));
    let event = if !detail && entry.event.chars().count() > SHORT_EVENT_LEN {
        let cut: String = entry.event.chars().take(SHORT_EVENT_LEN - 4).collect();
        format!("{cut}...")
    } else {
        entry.event.clone()
    };
    shown.insert("event".to_owned(), json!(event));
    if detail {
        shown.insert("event_type".to_owned(), json!(entry.event_type));
        shown.insert("conductor".to_owned(), json!(entry.conductor));
        shown.insert("user".to_owned(), json!(entry.user));
        if version.minor() >= PROJECT_SINCE {
            shown.insert("project".to_owned(), Value::Null);
        }
        if version.minor() >= STATE_FIELDS_SINCE {
            for name in ["state", "target_provision_state", "duration_seconds"] {
                shown.insert(name.to_owned(), Value::Null);
            }
        }
    }
    shown.insert(
        "links".to_owned(),
        json!([{
            "href": format!("{base}/v1/nodes/{}/history/{}", entry.node, entry.uuid),
            "rel": "self",
        }]),
    );
    Value::Object(shown)
}

/// `GET /v1/nodes/{node_ident}/history` (`?detail=`, paging): the node's events.
pub async fn history_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let mut detail = false;
    let mut paging = Vec::new();
    for (name, value) in &query {
        match name.as_str() {
            "detail" => detail = parse_bool_param(name, value)?,
            "limit" | "marker" | "sort_key" | "sort_dir" => {
                paging.push((name.clone(), value.clone()));
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unknown query parameter '{other}' for listing node history."
                )));
            }
        }
    }
    let params = parse_list_params::<HistorySortKey>(&paging, HISTORY_FIELDS, &[], version)?;
    let node = state
        .store
        .node_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    let mut entries = state
        .store
        .node_history_list(node.uuid)
        .await
        .map_err(db_error)?;
    let key = params.page.sort_key;
    // Stable: equal keys keep the order events were recorded in.
    entries.sort_by(|a, b| match params.page.sort_dir {
        SortDir::Asc => compare(key, a, b),
        SortDir::Desc => compare(key, b, a),
    });
    if let Some(marker) = params.page.marker {
        let Some(position) = entries.iter().position(|entry| entry.uuid == marker) else {
            return Err(history_not_found(marker));
        };
        entries.drain(..=position);
    }
    entries.truncate(usize::try_from(params.limit).unwrap_or(usize::MAX));

    let base = base_url(&headers);
    let items = entries
        .iter()
        .map(|entry| entry_json(entry, detail, version, &base))
        .collect();
    let last = entries.last().map(|entry| entry.uuid.to_string());
    Ok(Json(collection_body(
        "history",
        items,
        &base,
        &format!("nodes/{ident}/history"),
        &query,
        params.limit,
        last,
    )))
}

fn history_not_found(uuid: impl std::fmt::Display) -> ApiError {
    db_error(ferric_db::Error::NotFound {
        kind: Kind::NodeHistory,
        ident: uuid.to_string(),
    })
}

/// `GET /v1/nodes/{node_ident}/history/{event_uuid}`: one event, in detail.
pub async fn history_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path((ident, event)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let node = state
        .store
        .node_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    let Ok(uuid) = Uuid::parse_str(&event) else {
        return Err(history_not_found(&event));
    };
    let entries = state
        .store
        .node_history_list(node.uuid)
        .await
        .map_err(db_error)?;
    let entry = entries
        .iter()
        .find(|entry| entry.uuid == uuid)
        .ok_or_else(|| history_not_found(uuid))?;
    Ok(Json(entry_json(entry, true, version, &base_url(&headers))))
}
