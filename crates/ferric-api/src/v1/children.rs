//! `GET /v1/nodes/{node_ident}/children` (1.83): the UUIDs of a node's child nodes (those
//! whose `parent_node` is it), with a link to the node listing that shows them. A
//! project-scoped caller sees only its project's children. Below 1.83 it answers 404, as
//! Ironic's does.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use ferric_db::{NodeFilter, Page};
use ferric_model::resources::Ident;
use serde_json::{Value, json};

use super::paging::ProjectScope;
use super::{base_url, db_error};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// `GET /v1/nodes/{node_ident}/children`: `{"children": [uuid, …], "links": {href, rel}}`.
pub async fn node_children_list(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let parent = state
        .store
        .node_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    let filter = NodeFilter {
        parent_node: Some(parent.uuid),
        project,
        ..NodeFilter::default()
    };
    let children = state
        .store
        .node_list_heads(&filter, &Page::all())
        .await
        .map_err(db_error)?;
    Ok(Json(json!({
        "children": children.iter().map(|node| node.uuid).collect::<Vec<_>>(),
        "links": {
            "href": format!("{}/v1/nodes?parent_node={}", base_url(&headers), parent.uuid),
            "rel": "children",
        },
    })))
}
