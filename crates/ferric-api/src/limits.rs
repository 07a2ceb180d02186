//! Request body size limits (Ironic's `[api]max_json_body_size` and its larger siblings for
//! the provisioning and inspection endpoints): a body over the limit is answered 413 before
//! any handler parses it.
//!
//! A declared `Content-Length` over the limit is refused without reading; any other body is
//! read up to the limit (so a chunked upload cannot grow without bound either) and handed on
//! in memory — every handler reads whole bodies anyway.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::ApiError;

/// Ironic's defaults: 1 MiB in general, 64 MiB for `…/states/provision` (config drives, deploy
/// steps) and 16 MiB for `/v1/continue_inspection` (inventories with logs).
pub const DEFAULT_MAX_BODY_SIZE: usize = 1024 * 1024;
pub const DEFAULT_MAX_BODY_SIZE_PROVISION: usize = 64 * 1024 * 1024;
pub const DEFAULT_MAX_BODY_SIZE_INSPECTION: usize = 16 * 1024 * 1024;

/// The largest request bodies accepted, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    pub general: usize,
    pub provision: usize,
    pub inspection: usize,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            general: DEFAULT_MAX_BODY_SIZE,
            provision: DEFAULT_MAX_BODY_SIZE_PROVISION,
            inspection: DEFAULT_MAX_BODY_SIZE_INSPECTION,
        }
    }
}

impl BodyLimits {
    /// The limit for a request to `path`.
    pub fn for_path(&self, path: &str) -> usize {
        let path = path.trim_matches('/');
        if path.ends_with("states/provision") {
            self.provision
        } else if path.ends_with("continue_inspection") {
            self.inspection
        } else {
            self.general
        }
    }
}

fn too_large(path: &str, size: Option<usize>, limit: usize) -> Response {
    tracing::warn!(
        path,
        size,
        limit,
        "request body over the size limit refused"
    );
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "Request body is too large. Please contact the service administrator.",
    )
    .into_response()
}

/// Middleware: 413 for a body over the limit of its path.
pub(crate) async fn limit_body(
    State(limits): State<BodyLimits>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let limit = limits.for_path(&path);
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if let Some(size) = declared
        && size > limit
    {
        return too_large(&path, Some(size), limit);
    }
    let (parts, body) = request.into_parts();
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.is::<LengthLimitError>() => return too_large(&path, None, limit),
        Err(error) => {
            tracing::info!(%error, path, "could not read a request body");
            return ApiError::bad_request("Could not read the request body.").into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisioning_and_inspection_have_larger_limits() {
        let limits = BodyLimits::default();
        assert_eq!(limits.for_path("/v1/nodes"), DEFAULT_MAX_BODY_SIZE);
        assert_eq!(
            limits.for_path("/v1/nodes/n1/states/provision"),
            DEFAULT_MAX_BODY_SIZE_PROVISION
        );
        assert_eq!(
            limits.for_path("/v1/continue_inspection/"),
            DEFAULT_MAX_BODY_SIZE_INSPECTION
        );
    }
}
