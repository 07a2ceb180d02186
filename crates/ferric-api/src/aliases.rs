//! The other spellings of v1 paths Ironic serves, rewritten to the one the endpoint table
//! declares before anything routes, authenticates or authorizes the request, so they reach the
//! same handler under the same rules:
//!
//! - **version-less paths** (`/nodes/{node}`, `/ports/detail?address=…`, `/drivers/…`): Ironic's
//!   root controller hands any path whose first segment is not `v1` to the v1 controller, and
//!   every `rel: bookmark` link in its (and Ferric's) answers is such a path;
//! - **the node last** (`/v1/nodes/states/console/{node}`): Ironic's node controller walks
//!   to its `states`, `management` and `maintenance` controllers before it takes the node;
//! - **a `.json` suffix** (`/v1/nodes/{node}.json`): stripped when the request names a
//!   microversion below 1.91 in `X-OpenStack-Ironic-API-Version`, as Ironic's
//!   `JsonExtensionMiddleware` does; from 1.91 (or with no header) the suffix is part of the
//!   name.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use axum::extract::Request;
use axum::http::Uri;
use axum::http::uri::PathAndQuery;

use crate::endpoints;

/// The microversion from which `.json` is no longer stripped.
const JSON_SUFFIX_UNTIL_MINOR: u16 = 91;

/// The first segments of the v1 resource paths (`nodes`, `ports`, `lookup`, …).
fn v1_resources() -> &'static BTreeSet<&'static str> {
    static RESOURCES: LazyLock<BTreeSet<&'static str>> = LazyLock::new(|| {
        endpoints::all()
            .iter()
            .filter_map(|endpoint| endpoint.path.strip_prefix("/v1/"))
            .filter_map(|rest| rest.split('/').next())
            .filter(|segment| !segment.is_empty() && !segment.starts_with('{'))
            .collect()
    });
    &RESOURCES
}

/// `path` as the endpoint table spells it, or `None` when it already is.
fn canonical_path(path: &str, minor: Option<u16>) -> Option<String> {
    let mut path = std::borrow::Cow::Borrowed(path);
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    if first != "v1" && v1_resources().contains(first) {
        path = format!("/v1{path}").into();
    }
    if minor.is_some_and(|minor| minor < JSON_SUFFIX_UNTIL_MINOR) {
        let trimmed = path.trim_end_matches('/');
        if let Some(stripped) = trimmed.strip_suffix(".json")
            && stripped.starts_with("/v1/")
        {
            path = stripped.to_owned().into();
        }
    }
    if let Some(rewritten) = node_first(&path) {
        path = rewritten.into();
    }
    match path {
        std::borrow::Cow::Borrowed(_) => None,
        std::borrow::Cow::Owned(path) => Some(path),
    }
}

/// The node-level controllers Ironic also reaches with the node last (pecan walks
/// `NodesController.states` before it takes a node): `/v1/nodes/states/console/{node}` is
/// `/v1/nodes/{node}/states/console`.
const NODE_CONTROLLERS: [&str; 3] = ["states", "management", "maintenance"];

/// `/v1/nodes/<controller>/<…>/<node>` as `/v1/nodes/<node>/<controller>/<…>`, when only the
/// latter is an endpoint.
fn node_first(path: &str) -> Option<String> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    let ["", "v1", "nodes", controller, rest @ .., node] = segments.as_slice() else {
        return None;
    };
    if !NODE_CONTROLLERS.contains(controller) || node.is_empty() || endpoints::serves_path(path) {
        return None;
    }
    let mut rewritten = format!("/v1/nodes/{node}/{controller}");
    for segment in rest {
        rewritten.push('/');
        rewritten.push_str(segment);
    }
    endpoints::serves_path(&rewritten).then_some(rewritten)
}

/// The minor version of a well-formed `X-OpenStack-Ironic-API-Version: 1.N` header.
fn legacy_header_minor(request: &Request) -> Option<u16> {
    let value = request
        .headers()
        .get("x-openstack-ironic-api-version")?
        .to_str()
        .ok()?;
    let (major, minor) = value.trim().split_once('.')?;
    if major != "1" {
        return None;
    }
    minor.parse().ok()
}

/// Rewrites the request's path to its canonical spelling (module comment).
pub(crate) async fn canonical(mut request: Request) -> Request {
    let minor = legacy_header_minor(&request);
    let Some(path) = canonical_path(request.uri().path(), minor) else {
        return request;
    };
    let path_and_query = match request.uri().query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let mut parts = request.uri().clone().into_parts();
    if let Ok(path_and_query) = PathAndQuery::try_from(path_and_query) {
        parts.path_and_query = Some(path_and_query);
        if let Ok(uri) = Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_less_resource_paths_get_the_prefix() {
        assert_eq!(
            canonical_path("/nodes/n1", None).as_deref(),
            Some("/v1/nodes/n1")
        );
        assert_eq!(
            canonical_path("/ports/detail", None).as_deref(),
            Some("/v1/ports/detail")
        );
        assert_eq!(
            canonical_path("/drivers", None).as_deref(),
            Some("/v1/drivers")
        );
        assert_eq!(canonical_path("/v1/nodes", None), None);
        for other in [
            "/",
            "/v1",
            "/health",
            "/metrics",
            "/ui/app.js",
            "/unknown/x",
        ] {
            assert_eq!(canonical_path(other, None), None, "{other}");
        }
    }

    #[test]
    fn the_node_may_come_last() {
        assert_eq!(
            canonical_path("/v1/nodes/states/console/n1", None).as_deref(),
            Some("/v1/nodes/n1/states/console")
        );
        assert_eq!(
            canonical_path("/v1/nodes/states/n1", None).as_deref(),
            Some("/v1/nodes/n1/states")
        );
        // Declared paths, and rewrites that serve nothing, stay as they are.
        assert_eq!(canonical_path("/v1/nodes/n1/states/console", None), None);
        assert_eq!(canonical_path("/v1/nodes/states/nothing/n1", None), None);
        assert_eq!(canonical_path("/v1/nodes/states", None), None);
    }

    #[test]
    fn a_json_suffix_goes_below_1_91_only() {
        assert_eq!(
            canonical_path("/v1/nodes/n1.json", Some(90)).as_deref(),
            Some("/v1/nodes/n1")
        );
        assert_eq!(
            canonical_path("/nodes/n1.json", Some(1)).as_deref(),
            Some("/v1/nodes/n1")
        );
        assert_eq!(canonical_path("/v1/nodes/n1.json", Some(91)), None);
        assert_eq!(canonical_path("/v1/nodes/n1.json", None), None);
    }
}
