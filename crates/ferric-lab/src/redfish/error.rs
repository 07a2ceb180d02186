//! Redfish error responses: one type mapping caller mistakes to 4xx with DMTF's error body.
//!
//! The body follows DSP0266 §9.5: `{"error": {"code", "message", "@Message.ExtendedInfo": […]}}`
//! with message ids from the Base message registry, which clients such as sushy show verbatim.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::machine::MachineError;

const REGISTRY: &str = "Base.1.8";

#[derive(Debug, thiserror::Error)]
pub enum RedfishError {
    #[error("authentication is required: basic auth or an X-Auth-Token session")]
    Unauthorized,
    #[error("the resource at {uri} was not found")]
    NotFound { uri: String },
    #[error("the request body is not valid JSON: {detail}")]
    MalformedJson { detail: String },
    #[error(
        "the value {value} for the property {property} is not in the list of acceptable values"
    )]
    ValueNotInList { property: String, value: String },
    #[error("the property {property} is not a writable property of this resource")]
    PropertyUnknown { property: String },
    #[error("the property {property} is read-only")]
    PropertyNotWritable { property: String },
    #[error("the action requires the parameter {parameter}")]
    ParameterMissing { parameter: String },
    #[error("the value of {property} is not valid: {detail}")]
    PropertyValueError { property: String, detail: String },
    #[error("the machine refused the request")]
    Machine(#[source] MachineError),
}

impl RedfishError {
    fn status_and_id(&self) -> (StatusCode, &'static str) {
        match self {
            RedfishError::Unauthorized => (StatusCode::UNAUTHORIZED, "NoValidSession"),
            RedfishError::NotFound { .. } => (StatusCode::NOT_FOUND, "ResourceMissingAtURI"),
            RedfishError::MalformedJson { .. } => (StatusCode::BAD_REQUEST, "MalformedJSON"),
            RedfishError::ValueNotInList { .. } => {
                (StatusCode::BAD_REQUEST, "PropertyValueNotInList")
            }
            RedfishError::PropertyUnknown { .. } => (StatusCode::BAD_REQUEST, "PropertyUnknown"),
            RedfishError::PropertyNotWritable { .. } => {
                (StatusCode::BAD_REQUEST, "PropertyNotWritable")
            }
            RedfishError::ParameterMissing { .. } => {
                (StatusCode::BAD_REQUEST, "ActionParameterMissing")
            }
            RedfishError::PropertyValueError { .. } => {
                (StatusCode::BAD_REQUEST, "PropertyValueError")
            }
            RedfishError::Machine(MachineError::Unsupported { .. }) => {
                (StatusCode::BAD_REQUEST, "ActionNotSupported")
            }
            RedfishError::Machine(_) => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        }
    }
}

impl IntoResponse for RedfishError {
    fn into_response(self) -> Response {
        let (status, message_id) = self.status_and_id();
        // A caller mistake is described fully; an internal fault is logged with its cause and
        // reported with its top-level message only.
        let message = match &self {
            RedfishError::Machine(error @ MachineError::Unsupported { .. }) => error.to_string(),
            RedfishError::Machine(error) => {
                tracing::error!(error = %error, source = ?std::error::Error::source(error), "machine operation failed");
                error.to_string()
            }
            other => other.to_string(),
        };
        let body = json!({
            "error": {
                "code": format!("{REGISTRY}.GeneralError"),
                "message": "A general error has occurred. See ExtendedInfo for more information.",
                "@Message.ExtendedInfo": [{
                    "@odata.type": "#Message.v1_1_1.Message",
                    "MessageId": format!("{REGISTRY}.{message_id}"),
                    "Message": message,
                    "Severity": if status.is_server_error() { "Critical" } else { "Warning" },
                    "Resolution": resolution(message_id),
                }],
            }
        });
        let mut response = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"Ferric lab BMC\""),
            );
        }
        response
    }
}

fn resolution(message_id: &str) -> &'static str {
    match message_id {
        "NoValidSession" => {
            "Retry with basic auth or create a session in /redfish/v1/SessionService/Sessions."
        }
        "ResourceMissingAtURI" => "Use a URI from the resource's @odata.id links.",
        "MalformedJSON" => "Send a JSON object as the request body.",
        "PropertyValueNotInList" => "Choose a value from the property's @Redfish.AllowableValues.",
        "PropertyUnknown" => "Remove the property from the request body.",
        "PropertyNotWritable" => "Remove the read-only property from the request body.",
        "ActionParameterMissing" => "Add the parameter to the request body.",
        "PropertyValueError" => "Correct the value in the request body and resubmit it.",
        _ => "None.",
    }
}
