//! The OpenAPI 3.0 document of the Bare Metal API, built from the tables that serve it: each
//! resource's schema comes from its field table (type, microversion, who may write it), its
//! list filters from the handler's filter table, and the operations from the endpoint
//! declarations ([`crate::endpoints`]), one per route; the schemas are in [`schemas`].
//! `docs/openapi.json` is this document, checked in; a test fails when it is stale and
//! another checks that every documented operation is routed.
//!
//! Theory of operation: Ironic's responses depend on the microversion (newer fields are hidden
//! from older clients), so no response field is `required` but `links` (which `?fields=` keeps too);
//! each field carries `x-ironic-since` (the version it appeared in). Request bodies are closed
//! (`additionalProperties: false`), as the handlers are. Every 4xx/5xx is Ironic's
//! double-encoded error body.

mod schemas;

use ferric_model::Microversion;
use serde_json::{Map, Value, json};

use crate::endpoints::{self, BodyDoc, Endpoint};
use crate::v1::body::BodySpec;
use crate::version::{MAX_VERSION, MIN_VERSION};

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for endpoint in endpoints::all() {
        let entry = paths
            .entry(endpoint.path.to_owned())
            .or_insert_with(|| json!({}));
        entry[endpoint.verb.openapi()] = operation_json(endpoint);
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Ferric Bare Metal API",
            "version": MAX_VERSION.to_string(),
            "description": format!(
                "The OpenStack Ironic-compatible Bare Metal API v1 served by Ferric. Requests \
                 choose a microversion with the `X-OpenStack-Ironic-API-Version` header \
                 (`{MIN_VERSION}` when absent, up to `{MAX_VERSION}`, or `latest`); fields, \
                 filters and endpoints newer than it are hidden (`x-ironic-since` names the \
                 version each appeared in). Generated from the code by `cargo xtask docs`."
            ),
        },
        "servers": [{ "url": "http://127.0.0.1:6385" }],
        "paths": paths,
        "components": {
            "schemas": schemas::schemas(&declared_bodies()),
            "parameters": parameters(),
            "responses": error_responses(),
        },
    })
}

/// The request bodies the endpoints declare with a [`BodySpec`], each once.
fn declared_bodies() -> Vec<&'static BodySpec> {
    let mut bodies: Vec<&'static BodySpec> = Vec::new();
    for endpoint in endpoints::all() {
        if let Some(BodyDoc::Spec(spec)) = endpoint.doc.body
            && !bodies.iter().any(|known| known.schema == spec.schema)
        {
            bodies.push(spec);
        }
    }
    bodies
}

// ---- parameters --------------------------------------------------------------------------

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "required": true,
        "description": description,
        "schema": { "type": "string" },
    })
}

fn parameters() -> Value {
    json!({
        "ApiVersion": {
            "name": "X-OpenStack-Ironic-API-Version",
            "in": "header",
            "required": false,
            "description": "The microversion: `1.N` or `latest`; 1.1 when absent.",
            "schema": { "type": "string", "pattern": "^(1\\.[0-9]+|latest)$" },
        },
        "node_ident": path_param("node_ident", "A node's UUID or name."),
        "port_ident": path_param("port_ident", "A port's UUID or name (1.88)."),
        "portgroup_ident": path_param("portgroup_ident", "A portgroup's UUID or name."),
        "chassis_uuid": path_param("chassis_uuid", "A chassis's UUID."),
        "hostname": path_param("hostname", "A conductor's hostname."),
        "driver_name": path_param("driver_name", "A hardware type's name."),
        "vendor_method": path_param("vendor_method", "A vendor method's name."),
        "method": {
            "name": "method", "in": "query", "required": true,
            "description": "The vendor method's name.",
            "schema": { "type": "string" },
        },
        "trait_name": path_param("trait_name", "A trait: CUSTOM_* or a standard trait."),
        "indicator": path_param(
            "indicator",
            "An indicator as {name}@{component}, as the node's indicator listing names it.",
        ),
        "vif_id": path_param("vif_id", "The VIF's identifier."),
        "event_uuid": path_param("event_uuid", "A history event's UUID."),
        "allocation_ident": path_param("allocation_ident", "An allocation's UUID or name."),
        "template_ident": path_param("template_ident", "A deploy template's UUID or name."),
        "rule_uuid": path_param("rule_uuid", "An inspection rule's UUID."),
        "runbook_ident": path_param("runbook_ident", "A runbook's UUID or name."),
        "setting_name": path_param("setting_name", "A BIOS setting's name."),
        "connector_uuid": path_param("connector_uuid", "A volume connector's UUID."),
        "target_uuid": path_param("target_uuid", "A volume target's UUID."),
        "limit": {
            "name": "limit", "in": "query", "required": false,
            "description": "Page size, at most 1000.",
            "schema": { "type": "integer", "minimum": 1 },
        },
        "marker": {
            "name": "marker", "in": "query", "required": false,
            "description": "The UUID of the last item of the previous page.",
            "schema": { "type": "string", "format": "uuid" },
        },
        "sort_key": {
            "name": "sort_key", "in": "query", "required": false,
            "schema": { "type": "string" },
        },
        "sort_dir": {
            "name": "sort_dir", "in": "query", "required": false,
            "schema": { "type": "string", "enum": ["asc", "desc"] },
        },
        "fields": {
            "name": "fields", "in": "query", "required": false,
            "description": "Comma-separated field names (1.8).",
            "schema": { "type": "string" },
            "x-ironic-since": "1.8",
        },
        "detail": {
            "name": "detail", "in": "query", "required": false,
            "description": "Show every field (1.43); not with `fields`.",
            "schema": { "type": "boolean" },
            "x-ironic-since": "1.43",
        },
    })
}

fn error_responses() -> Value {
    let error = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } },
        })
    };
    json!({
        "BadRequest": error("The request is invalid (Ironic's Invalid* family)."),
        "Unauthorized": error("Credentials are missing or wrong (http_basic)."),
        "Forbidden": error("The node is protected, or the action is not allowed."),
        "NotFound": error("No such resource, or the endpoint is newer than the microversion."),
        "MethodNotAllowed": error("The path does not accept this method."),
        "NotAcceptable": error("The microversion is outside the supported range, or a field, filter or verb is newer than it."),
        "Conflict": error("A duplicate, a locked node, or a state that refuses the change."),
        "PayloadTooLarge": error("The body is larger than the configured limit."),
        "UnsupportedMediaType": error("The body is not JSON."),
        "ServiceUnavailable": error("No conductor can take the work now; retry."),
        "InternalError": error("An unexpected fault; details are in the server log."),
    })
}

// ---- operations --------------------------------------------------------------------------

/// One endpoint as an OpenAPI operation.
fn operation_json(endpoint: &Endpoint) -> Value {
    let doc = &endpoint.doc;
    let mut parameters = vec![json!({ "$ref": "#/components/parameters/ApiVersion" })];
    parameters.extend(doc.params.iter().cloned());
    let (status, schema) = doc.success;
    let success = match schema {
        Some(schema) => json!({
            "description": "Success.",
            "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } },
        }),
        None if doc.plain_text => json!({
            "description": "Success.",
            "content": { "text/plain": { "schema": { "type": "string" } } },
        }),
        None => json!({ "description": "Success, no body." }),
    };
    let mut responses = Map::new();
    responses.insert(status.to_string(), success);
    if doc.accepted_too {
        responses.insert(
            "202".to_owned(),
            json!({ "description": "Started (an asynchronous method), no body." }),
        );
    }
    let mut errors: Vec<u16> = vec![401, 404, 406, 500];
    if doc.body.is_some() {
        errors.extend([400, 413, 415]);
    }
    errors.extend(doc.errors.iter().copied());
    errors.sort_unstable();
    errors.dedup();
    for error in errors {
        let name = match error {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            406 => "NotAcceptable",
            409 => "Conflict",
            413 => "PayloadTooLarge",
            415 => "UnsupportedMediaType",
            503 => "ServiceUnavailable",
            _ => "InternalError",
        };
        responses.insert(
            error.to_string(),
            json!({ "$ref": format!("#/components/responses/{name}") }),
        );
    }
    let mut operation = json!({
        "operationId": endpoint.id,
        "summary": doc.summary,
        "tags": [endpoint.path.trim_start_matches("/v1/").split('/').next().unwrap_or("root")],
        "parameters": parameters,
        "responses": responses,
    });
    if endpoint.since > Microversion::MIN {
        operation["x-ironic-since"] = json!(endpoint.since.to_string());
    }
    if let Some(body) = doc.body {
        let body = body.schema();
        operation["requestBody"] = json!({
            "required": !doc.body_optional,
            "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{body}") } } },
        });
    }
    operation
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_id_is_unique_and_every_ref_resolves() {
        let document = document();
        let mut ids: Vec<&str> = endpoints::all()
            .iter()
            .map(|endpoint| endpoint.id)
            .collect();
        ids.sort_unstable();
        let count = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), count, "duplicate operationId");

        let text = document.to_string();
        for reference in text.split("\"$ref\":\"").skip(1) {
            let target = reference.split('"').next().unwrap();
            let pointer = target.trim_start_matches('#');
            assert!(
                document.pointer(pointer).is_some(),
                "unresolved reference {target}"
            );
        }
    }
}
