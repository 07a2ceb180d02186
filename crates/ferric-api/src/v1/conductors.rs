//! `/v1/conductors` (1.49): the registered conductors, read-only (`reference/ironic.md` §2.7).
//!
//! Conductors are few (one per conductor process), so a listing reads them all and sorts and
//! pages in memory; the paging marker is the hostname, as in Ironic.
//!
//! `alive` means online — its liveness lock held — with a heartbeat no older than
//! `conductor_heartbeat_timeout` (60 s by default): the same rule as the hash ring's.

use std::cmp::Ordering;
use std::str::FromStr;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use chrono::{DateTime, TimeDelta, Utc};
use ferric_db::{ConductorFilter, SortDir, UnknownSortKey};
use ferric_model::Microversion;
use ferric_model::resources::Conductor;
use serde_json::{Map, Value, json};

use super::fields::FieldType as T;
use super::fields::{Access::ReadOnly, FieldSpec, Selection, field, select, show_selection};
use super::paging::{collection_body, parse_list_params};
use super::{base_url, db_error, links, timestamp};
use crate::endpoints::since;
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

const CONDUCTORS_SINCE: u16 = since::CONDUCTORS.minor();

/// Ironic's `[conductor]heartbeat_timeout` default: a conductor whose last heartbeat is older
/// is not alive. The process's own setting (`conductor_heartbeat_timeout`, the one its hash
/// ring uses) wins: see [`heartbeat_timeout`].
pub const HEARTBEAT_TIMEOUT: TimeDelta = TimeDelta::seconds(60);

/// The heartbeat timeout this process's hash ring uses.
pub(crate) fn heartbeat_timeout(state: &ApiState) -> TimeDelta {
    TimeDelta::from_std(state.conductor.membership().heartbeat_timeout())
        .unwrap_or(HEARTBEAT_TIMEOUT)
}

pub(crate) const CONDUCTOR_FIELDS: &[FieldSpec] = &[
    field("hostname", CONDUCTORS_SINCE, ReadOnly, T::Text),
    field("conductor_group", CONDUCTORS_SINCE, ReadOnly, T::Text),
    field("alive", CONDUCTORS_SINCE, ReadOnly, T::Bool),
    field("drivers", CONDUCTORS_SINCE, ReadOnly, T::StringList),
    field("created_at", CONDUCTORS_SINCE, ReadOnly, T::Time),
    field("updated_at", CONDUCTORS_SINCE, ReadOnly, T::Time),
    field("links", CONDUCTORS_SINCE, ReadOnly, T::Links),
];

const DEFAULT_LIST_FIELDS: &[&str] = &["hostname", "conductor_group", "alive"];

/// Whether a conductor counts as alive at `now` (the store's clock, the database's): online —
/// for a conductor registered under its liveness lock, the lock held — with a heartbeat no
/// older than `timeout`.
pub fn is_alive(conductor: &Conductor, now: DateTime<Utc>, timeout: TimeDelta) -> bool {
    conductor.online && now - conductor.updated_at <= timeout
}

fn conductor_json(
    conductor: &Conductor,
    alive: bool,
    version: Microversion,
    selection: &Selection,
    base: &str,
) -> Value {
    let mut full = Map::new();
    full.insert("hostname".to_owned(), json!(conductor.hostname));
    full.insert(
        "conductor_group".to_owned(),
        json!(conductor.conductor_group),
    );
    full.insert("alive".to_owned(), json!(alive));
    full.insert("drivers".to_owned(), json!(conductor.drivers));
    full.insert("created_at".to_owned(), timestamp(conductor.created_at));
    full.insert("updated_at".to_owned(), timestamp(conductor.updated_at));
    full.insert(
        "links".to_owned(),
        links(base, &format!("conductors/{}", conductor.hostname)),
    );
    Value::Object(select(CONDUCTOR_FIELDS, full, selection, version))
}

/// What a conductor listing may be sorted by. Ironic's default, `id`, is registration order:
/// here the registration time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum ConductorSortKey {
    #[default]
    Id,
    Hostname,
    ConductorGroup,
    CreatedAt,
    UpdatedAt,
}

impl FromStr for ConductorSortKey {
    type Err = UnknownSortKey;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Ok(match name {
            "id" => Self::Id,
            "hostname" => Self::Hostname,
            "conductor_group" => Self::ConductorGroup,
            "created_at" => Self::CreatedAt,
            "updated_at" => Self::UpdatedAt,
            other => return Err(UnknownSortKey(other.to_owned())),
        })
    }
}

fn compare(key: ConductorSortKey, a: &Conductor, b: &Conductor) -> Ordering {
    let by_key = match key {
        ConductorSortKey::Id | ConductorSortKey::CreatedAt => a.created_at.cmp(&b.created_at),
        ConductorSortKey::Hostname => Ordering::Equal,
        ConductorSortKey::ConductorGroup => a.conductor_group.cmp(&b.conductor_group),
        ConductorSortKey::UpdatedAt => a.updated_at.cmp(&b.updated_at),
    };
    // Hostnames are unique: they make the order total.
    by_key.then_with(|| a.hostname.cmp(&b.hostname))
}

/// `GET /v1/conductors`: default fields (`hostname`, `conductor_group`, `alive`), `?fields=`
/// or `?detail=true` (adds `drivers` and the timestamps); paged by hostname.
pub async fn conductor_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    // The marker is a hostname, not the UUID the shared parser expects.
    let (markers, rest): (Vec<_>, Vec<_>) = query
        .iter()
        .cloned()
        .partition(|(name, _)| name == "marker");
    let params = parse_list_params::<ConductorSortKey>(
        &rest,
        CONDUCTOR_FIELDS,
        &["alive", "drivers"],
        version,
    )?;
    if let Some((name, _)) = params.filters.first() {
        return Err(ApiError::bad_request(format!(
            "Unknown query parameter '{name}' for listing conductors."
        )));
    }
    let selection = params.selection.unwrap_or_else(|| {
        Selection::Only(
            DEFAULT_LIST_FIELDS
                .iter()
                .map(|&name| name.to_owned())
                .collect(),
        )
    });
    let mut conductors = state
        .store
        .conductor_list(&ConductorFilter::default())
        .await
        .map_err(db_error)?;
    let key = params.page.sort_key;
    conductors.sort_by(|a, b| match params.page.sort_dir {
        SortDir::Asc => compare(key, a, b),
        SortDir::Desc => compare(key, b, a),
    });
    if let Some((_, marker)) = markers.last() {
        let Some(position) = conductors.iter().position(|c| &c.hostname == marker) else {
            return Err(ApiError::not_found(format!(
                "Conductor {marker} could not be found."
            )));
        };
        conductors.drain(..=position);
    }
    conductors.truncate(usize::try_from(params.limit).unwrap_or(usize::MAX));

    let base = base_url(&headers);
    let now = state.store.now();
    let timeout = heartbeat_timeout(&state);
    let items = conductors
        .iter()
        .map(|conductor| {
            let alive = is_alive(conductor, now, timeout);
            conductor_json(conductor, alive, version, &selection, &base)
        })
        .collect();
    let last = conductors
        .last()
        .map(|conductor| conductor.hostname.clone());
    Ok(Json(collection_body(
        "conductors",
        items,
        &base,
        "conductors",
        &query,
        params.limit,
        last,
    )))
}

/// `GET /v1/conductors/{hostname}`: every field (`?fields=`).
pub async fn conductor_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(hostname): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let selection = show_selection(CONDUCTOR_FIELDS, "conductor", &query, version)?;
    let conductor = state
        .store
        .conductor_get(&hostname)
        .await
        .map_err(db_error)?;
    let alive = is_alive(&conductor, Utc::now(), heartbeat_timeout(&state));
    Ok(Json(conductor_json(
        &conductor,
        alive,
        version,
        &selection,
        &base_url(&headers),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conductor(online: bool, updated_at: DateTime<Utc>) -> Conductor {
        Conductor {
            hostname: "c1".to_owned(),
            conductor_group: String::new(),
            drivers: Vec::new(),
            online,
            created_at: updated_at,
            updated_at,
        }
    }

    #[test]
    fn alive_means_online_with_a_recent_heartbeat() {
        let now = Utc::now();
        assert!(is_alive(&conductor(true, now), now, HEARTBEAT_TIMEOUT));
        assert!(is_alive(
            &conductor(true, now - HEARTBEAT_TIMEOUT),
            now,
            HEARTBEAT_TIMEOUT
        ));
        let stale = now - HEARTBEAT_TIMEOUT - TimeDelta::seconds(1);
        assert!(!is_alive(&conductor(true, stale), now, HEARTBEAT_TIMEOUT));
        assert!(!is_alive(&conductor(false, now), now, HEARTBEAT_TIMEOUT));
    }
}
