//! Listing parameters shared by every collection: `limit`, `marker`, `sort_key`, `sort_dir`,
//! `fields`, `detail`, and the `next` link of a full page.

use std::convert::Infallible;
use std::str::FromStr;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use ferric_db::{Page, SortDir, UnknownSortKey};
use ferric_model::Microversion;
use serde_json::{Value, json};
use uuid::Uuid;

use super::fields::{FieldSpec, Selection, parse_fields, require_version};
use super::parse_bool_param;
use crate::ApiError;

/// The project a listing is limited to: `Some` for a project-scoped caller without the
/// `…:list_all` rule, `None` (everything) otherwise, as the authorization middleware
/// (`crate::authz`) found. Handlers of listings take it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectScope(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for ProjectScope {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(parts
            .extensions
            .get::<ProjectScope>()
            .cloned()
            .unwrap_or_default())
    }
}

/// `[api]max_limit`: the most records one page holds, and the page size without `limit`.
pub(crate) const MAX_LIMIT: u32 = 1000;

/// The `?fields=` / `detail` versions (§2.4).
const FIELDS_SINCE: Microversion = Microversion::new(8);
const DETAIL_PARAM_SINCE: Microversion = Microversion::new(43);

/// The paging part of a listing request, plus the query pairs left for filters.
#[derive(Debug)]
pub(crate) struct ListParams<K> {
    pub(crate) page: Page<K>,
    /// The effective page size (always set: listings are never unbounded).
    pub(crate) limit: u32,
    /// `None`: the caller did not ask for particular fields (`fields` or `detail`).
    pub(crate) selection: Option<Selection>,
    /// The pairs that were not paging parameters, in order: the resource's filters.
    pub(crate) filters: Vec<(String, String)>,
}

/// Parses the paging parameters of `query`. `json_fields` cannot be sort keys; sort keys and
/// fields are checked against `table` at `version`.
pub(crate) fn parse_list_params<K>(
    query: &[(String, String)],
    table: &[FieldSpec],
    json_fields: &[&str],
    version: Microversion,
) -> Result<ListParams<K>, ApiError>
where
    K: FromStr<Err = UnknownSortKey> + Default,
{
    let mut page = Page::<K>::default();
    let mut limit = MAX_LIMIT;
    let mut selection = None;
    let mut detail = false;
    let mut filters = Vec::new();
    for (name, value) in query {
        match name.as_str() {
            "limit" => {
                let asked: i64 = value.parse().map_err(|_| {
                    ApiError::bad_request(format!("Invalid limit '{value}': use a whole number."))
                })?;
                if asked <= 0 {
                    return Err(ApiError::bad_request("Limit must be positive"));
                }
                // Ironic clamps rather than refuses a limit above the maximum.
                limit = u32::try_from(asked.min(i64::from(MAX_LIMIT))).unwrap_or(MAX_LIMIT);
            }
            "marker" => {
                page.marker = Some(Uuid::parse_str(value).map_err(|_| {
                    ApiError::bad_request(format!(
                        "Invalid marker '{value}': use the UUID of the last item of the \
                         previous page."
                    ))
                })?);
            }
            "sort_key" => {
                if json_fields.contains(&value.as_str()) {
                    return Err(ApiError::bad_request(format!(
                        "The sort_key value \"{value}\" is an invalid field for sorting"
                    )));
                }
                require_version(table, value, version)?;
                page.sort_key = value.parse().map_err(|_| {
                    ApiError::bad_request(format!(
                        "The sort_key value \"{value}\" is an invalid field for sorting"
                    ))
                })?;
            }
            "sort_dir" => {
                page.sort_dir = value
                    .parse::<SortDir>()
                    .map_err(|error| ApiError::bad_request(error.to_string()))?;
            }
            "fields" => {
                if version < FIELDS_SINCE {
                    return Err(ApiError::not_acceptable(format!(
                        "'fields' needs API version {FIELDS_SINCE} or later; this request \
                         asked for {version}."
                    )));
                }
                selection = Some(parse_fields(table, value, version)?);
            }
            "detail" => {
                // 400 as Ironic's `get_request_return_fields` (an invalid parameter), not 406.
                if version < DETAIL_PARAM_SINCE {
                    return Err(ApiError::bad_request(format!(
                        "'detail' needs API version {DETAIL_PARAM_SINCE} or later; this \
                         request asked for {version}."
                    )));
                }
                detail = parse_bool_param("detail", value)?;
            }
            _ => filters.push((name.clone(), value.clone())),
        }
    }
    if detail {
        if selection.is_some() {
            return Err(ApiError::bad_request(
                "Can not specify ?detail=True and fields in the same request.",
            ));
        }
        selection = Some(Selection::All);
    }
    page.limit = Some(limit);
    Ok(ListParams {
        page,
        limit,
        selection,
        filters,
    })
}

/// A list answer: `{"<key>": [items…], "next": "<url>"}`, with `next` only on a full page.
/// `last` is the marker of the page's last item (a UUID; a conductor's hostname).
pub(crate) fn collection_body(
    key: &str,
    items: Vec<Value>,
    base: &str,
    path: &str,
    query: &[(String, String)],
    limit: u32,
    last: Option<String>,
) -> Value {
    let returned = items.len();
    let mut body = json!({ key: items });
    if let Some(next) = next_link(base, path, query, limit, returned, last) {
        body["next"] = Value::String(next);
    }
    body
}

/// The `next` link of a page: the same request continuing after `last`, present only when the
/// page is full (a short page is the last one).
pub(crate) fn next_link(
    base: &str,
    path: &str,
    query: &[(String, String)],
    limit: u32,
    returned: usize,
    last: Option<String>,
) -> Option<String> {
    let last = last?;
    if returned < usize::try_from(limit).unwrap_or(usize::MAX) {
        return None;
    }
    let mut pairs: Vec<String> = query
        .iter()
        .filter(|(name, _)| name != "limit" && name != "marker")
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect();
    pairs.push(format!("limit={limit}"));
    pairs.push(format!("marker={}", encode(&last)));
    Some(format!("{base}/v1/{path}?{}", pairs.join("&")))
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_link_only_for_a_full_page() {
        let marker = Uuid::new_v4();
        let query = vec![
            ("fields".to_owned(), "uuid,name".to_owned()),
            ("limit".to_owned(), "2".to_owned()),
        ];
        let link = next_link("http://h", "nodes", &query, 2, 2, Some(marker.to_string())).unwrap();
        assert_eq!(
            link,
            format!("http://h/v1/nodes?fields=uuid%2Cname&limit=2&marker={marker}")
        );
        assert!(next_link("http://h", "nodes", &query, 2, 1, Some(marker.to_string())).is_none());
    }
}
