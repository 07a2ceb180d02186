//! The one API error type and Ironic's error body.
//!
//! Ironic clients parse `json.loads(body["error_message"])["faultstring"]`: the body is
//! `{"error_message": "<JSON text>"}` where the inner JSON holds `faultcode` ("Client" for
//! 4xx, "Server" for 5xx), `faultstring` and `debuginfo` (always null here: internal details go
//! to the log, never to the caller).

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answered to an API caller: a status and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_ACCEPTABLE, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// An internal fault. The cause is logged here; the caller learns only that it happened.
    pub fn internal(cause: &(dyn std::error::Error + 'static)) -> Self {
        tracing::error!(error = %error_chain(cause), "internal error while serving a request");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error; the server log has the details.",
        )
    }
}

/// `cause: source: source …`, for log lines.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Ironic's `{"error_message": "<json>"}` body for a status and message.
pub fn error_body(status: StatusCode, message: &str) -> serde_json::Value {
    let faultcode = if status.is_server_error() {
        "Server"
    } else {
        "Client"
    };
    let inner = json!({ "faultcode": faultcode, "faultstring": message, "debuginfo": null });
    json!({ "error_message": inner.to_string() })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = error_body(self.status, &self.message);
        let mut response = (self.status, axum::Json(body)).into_response();
        // Mark it so the error-body middleware leaves it alone.
        response.extensions_mut().insert(AlreadyFormatted);
        response
    }
}

#[derive(Clone, Copy)]
struct AlreadyFormatted;

/// The largest framework error text we are willing to wrap into an error body.
const MAX_WRAPPED_ERROR_TEXT: usize = 16 * 1024;

/// Rewrites error responses that did not come from [`ApiError`] (axum's 405, 415, 422 and
/// body-size rejections) into Ironic's error body, keeping their status and text.
pub(crate) async fn ironic_error_bodies(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || response.extensions().get::<AlreadyFormatted>().is_some()
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, MAX_WRAPPED_ERROR_TEXT).await {
        Ok(bytes) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).trim().to_owned(),
        _ => status.canonical_reason().unwrap_or("Error").to_owned(),
    };
    let body = error_body(status, &text).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_is_double_encoded() {
        let body = error_body(StatusCode::CONFLICT, "Node x is locked");
        let inner: serde_json::Value =
            serde_json::from_str(body["error_message"].as_str().unwrap()).unwrap();
        assert_eq!(inner["faultcode"], "Client");
        assert_eq!(inner["faultstring"], "Node x is locked");
        assert!(inner["debuginfo"].is_null());

        let body = error_body(StatusCode::SERVICE_UNAVAILABLE, "busy");
        let inner: serde_json::Value =
            serde_json::from_str(body["error_message"].as_str().unwrap()).unwrap();
        assert_eq!(inner["faultcode"], "Server");
    }
}
