//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`): the request parsers of
//! the API with everything around them that needs a database or a server taken away.
//!
//! Each function runs the same code a handler runs on the bytes a client sent and returns
//! what the client would be told; a panic in any of them is a bug.

use ferric_model::ProvisionState;
use ferric_model::microversion::{Microversion, negotiate};
use ferric_model::resources::{Node, Port};
use serde_json::Value;
use uuid::Uuid;

use crate::ApiError;
use crate::v1::fields::Selection;
use crate::v1::node_fields::check_node_consistency;
use crate::v1::patch::parse_patch;
use crate::v1::resource::{Resource, apply_patch, check_patch, record_json};
use crate::version::MAX_VERSION;

/// A JSON-PATCH body applied to a node at microversion `1.<minor>` (clamped to the supported
/// range), as `PATCH /v1/nodes/{node}` does before it saves: parse, check against the field
/// table, apply, check the node's cross-field rules, and render the result. Returns the
/// rendered node or the client's error message.
pub fn node_patch(body: &[u8], minor: u16, current: &Value) -> Result<Value, ApiError> {
    let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Enroll);
    if let Value::Object(fields) = current {
        for (name, value) in fields {
            // Any starting value a client could have written before.
            let _ = node.set_field(name, value.clone());
        }
    }
    patch_record(node, body, minor, check_node_consistency)
}

/// The same for `PATCH /v1/ports/{port}`.
pub fn port_patch(body: &[u8], minor: u16) -> Result<Value, ApiError> {
    let port = Port::new(Uuid::nil(), Uuid::nil(), "52:54:00:12:34:56");
    patch_record(port, body, minor, |_| Ok(()))
}

fn patch_record<R: Resource>(
    record: R,
    body: &[u8],
    minor: u16,
    check: impl Fn(&R) -> Result<(), ApiError>,
) -> Result<Value, ApiError> {
    let version = Microversion::new(minor.clamp(Microversion::MIN.minor(), MAX_VERSION.minor()));
    let ops = parse_patch(body)?;
    check_patch::<R>(&ops, version)?;
    let updated = apply_patch(&record, &ops, version)?;
    check(&updated)?;
    Ok(record_json(
        &updated,
        version,
        &Selection::All,
        "http://fuzz.invalid",
    ))
}

/// The two version headers as the middleware reads them.
pub fn version_headers(
    openstack_api_version: Option<&str>,
    ironic_api_version: Option<&str>,
) -> Result<Microversion, String> {
    negotiate(openstack_api_version, ironic_api_version, MAX_VERSION)
        .map_err(|error| error.to_string())
}
