//! Microversion negotiation for every request (`reference/ironic.md` §2.2): reads the two
//! request headers, answers 406 when the version is outside `[MIN_VERSION, MAX_VERSION]`, and
//! stamps the version and request-id headers on every response, errors included.
//!
//! `MAX_VERSION` is upstream Ironic's newest (1.115). Every state, verb, field and list filter up
//! to it is served, with two gaps: inspection rules (their endpoints answer 404), and a few
//! 1.113–1.115 fields not recorded yet and shown as null (node history's `project`, `state`,
//! `target_provision_state`, `duration_seconds`; a firmware component's `vendor`, `model`,
//! `serial_number`).

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ferric_model::microversion::{
    IRONIC_API_VERSION_HEADER, Microversion, OPENSTACK_API_VERSION_HEADER, gate, negotiate,
};

use crate::ApiError;

/// The oldest version served; requests without a version header run at it.
pub const MIN_VERSION: Microversion = Microversion::MIN;

/// The newest version whose features Ferric really implements. It only moves up when every
/// feature up to it works; fields and verbs newer than a request's version stay hidden.
pub const MAX_VERSION: Microversion = gate::NODE_HISTORY_FIELDS;

const MINIMUM_VERSION_HEADER: &str = "x-openstack-ironic-api-minimum-version";
const MAXIMUM_VERSION_HEADER: &str = "x-openstack-ironic-api-maximum-version";

/// The microversion a request runs at, available to handlers as an extractor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiVersion(pub Microversion);

impl<S: Send + Sync> FromRequestParts<S> for ApiVersion {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // Set by `negotiate`, which wraps every route; its absence is a wiring bug.
        Ok(parts
            .extensions
            .get::<ApiVersion>()
            .copied()
            .unwrap_or(ApiVersion(MIN_VERSION)))
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ApiError> {
    match headers.get(name) {
        None => Ok(None),
        Some(value) => value.to_str().map(Some).map_err(|_| {
            ApiError::not_acceptable(format!(
                "Invalid value for {IRONIC_API_VERSION_HEADER} header"
            ))
        }),
    }
}

fn requested_version(headers: &HeaderMap) -> Result<Microversion, ApiError> {
    let standard = header_text(headers, OPENSTACK_API_VERSION_HEADER)?;
    let legacy = header_text(headers, IRONIC_API_VERSION_HEADER)?;
    negotiate(standard, legacy, MAX_VERSION)
        .map_err(|error| ApiError::not_acceptable(error.to_string()))
}

/// Middleware: negotiate the version, run the request, stamp the headers.
pub(crate) async fn negotiate_version(mut request: Request, next: Next) -> Response {
    let request_id = format!("req-{}", uuid::Uuid::new_v4());
    let (version, mut response) = match requested_version(request.headers()) {
        Ok(version) => {
            request.extensions_mut().insert(ApiVersion(version));
            (Some(version), next.run(request).await)
        }
        Err(error) => (None, error.into_response()),
    };
    let headers = response.headers_mut();
    if let Some(version) = version {
        headers.insert(
            HeaderName::from_static("x-openstack-ironic-api-version"),
            header_value(&version.to_string()),
        );
    }
    headers.insert(
        HeaderName::from_static(MINIMUM_VERSION_HEADER),
        header_value(&MIN_VERSION.to_string()),
    );
    headers.insert(
        HeaderName::from_static(MAXIMUM_VERSION_HEADER),
        header_value(&MAX_VERSION.to_string()),
    );
    let request_id = header_value(&request_id);
    headers.insert(
        HeaderName::from_static("openstack-request-id"),
        request_id.clone(),
    );
    headers.insert(
        HeaderName::from_static("x-openstack-request-id"),
        request_id,
    );
    response
}

/// Version strings and request ids are ASCII by construction.
fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}
