//! What one listener serves (Ironic's `[api]enable_ramdisk_endpoints`): a site can keep the
//! unauthenticated agent endpoints off the listener its operators and tenants reach, and serve
//! them on another listener bound to the provisioning network, which in turn serves nothing
//! else.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ApiError;

/// The endpoints a listener answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Endpoints {
    /// Everything (the default).
    #[default]
    All,
    /// Everything but the agent's endpoints (lookup, heartbeat, continue_inspection), which
    /// answer 403 as Ironic's do with `enable_ramdisk_endpoints = false`.
    WithoutRamdisk,
    /// Only the agent's endpoints and version discovery (`/`, `/v1`, `/health`); anything
    /// else is 404.
    RamdiskOnly,
}

/// Whether `path` is one of the agent's endpoints.
pub fn is_ramdisk_route(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".json").unwrap_or(path);
    matches!(path, "/v1/lookup" | "/v1/continue_inspection")
        || path
            .strip_prefix("/v1/heartbeat/")
            .is_some_and(|node| !node.is_empty() && !node.contains('/'))
}

/// Middleware: refuses what this listener does not serve.
pub(crate) async fn serve_only(
    State(endpoints): State<Endpoints>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    match endpoints {
        Endpoints::All => {}
        Endpoints::WithoutRamdisk if is_ramdisk_route(path) => {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "The ramdisk endpoints are disabled on this listener (enable_ramdisk_endpoints \
                 = false); agents reach them on the ramdisk listener (ramdisk_listen).",
            )
            .into_response();
        }
        Endpoints::WithoutRamdisk => {}
        Endpoints::RamdiskOnly => {
            let discovery = matches!(path.trim_end_matches('/'), "" | "/v1" | "/health");
            if !discovery && !is_ramdisk_route(path) {
                return ApiError::not_found(
                    "This listener serves only the agent endpoints (ramdisk_listen); the Bare \
                     Metal API is on api_listen.",
                )
                .into_response();
            }
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_endpoints_are_recognized() {
        for path in [
            "/v1/lookup",
            "/v1/lookup.json",
            "/v1/continue_inspection",
            "/v1/heartbeat/1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
            "/v1/heartbeat/node-1/",
        ] {
            assert!(is_ramdisk_route(path), "{path}");
        }
        for path in [
            "/v1/nodes",
            "/v1/heartbeat/",
            "/v1/heartbeat/a/b",
            "/",
            "/v1",
        ] {
            assert!(!is_ramdisk_route(path), "{path}");
        }
    }
}
