//! Version discovery: `GET /` and `GET /v1` (`reference/ironic.md` §2.1). keystoneauth and
//! openstacksdk read `version` (the maximum) and `min_version` from these documents.

use axum::Json;
use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::v1::{base_url, links};
use crate::version::{ApiVersion, MAX_VERSION, MIN_VERSION};

fn version_object(base: &str) -> Value {
    json!({
        "id": "v1",
        "links": [{ "href": format!("{base}/v1/"), "rel": "self" }],
        "status": "CURRENT",
        "min_version": MIN_VERSION.to_string(),
        "version": MAX_VERSION.to_string(),
    })
}

pub(crate) async fn root_get(headers: HeaderMap) -> Json<Value> {
    let base = base_url(&headers);
    let version = version_object(&base);
    Json(json!({
        "name": "OpenStack Ironic API",
        "description": "Ferric: bare-metal provisioning, compatible with OpenStack Ironic's \
                        Bare Metal API v1.",
        "default_version": version,
        "versions": [version],
    }))
}

/// Top-level resources and the microversion from which each is advertised.
const RESOURCES: [(&str, u16); 12] = [
    ("chassis", 1),
    ("nodes", 1),
    ("ports", 1),
    ("drivers", 1),
    ("portgroups", 23),
    ("volume", 32),
    ("conductors", 49),
    ("allocations", 52),
    ("events", 54),
    ("deploy_templates", 55),
    ("shards", 82),
    ("runbooks", 92),
];

pub(crate) async fn v1_get(requested: ApiVersion, headers: HeaderMap) -> Json<Value> {
    let base = base_url(&headers);
    let mut document = json!({
        "id": "v1",
        "links": [
            { "href": format!("{base}/v1/"), "rel": "self" },
            {
                "href": "https://docs.openstack.org/api-ref/baremetal/",
                "rel": "describedby",
                "type": "text/html",
            },
        ],
        "media_types": {
            "base": "application/json",
            "type": "application/vnd.openstack.ironic.v1+json",
        },
        "version": version_object(&base),
    });
    for (resource, since_minor) in RESOURCES {
        if requested.0.minor() >= since_minor {
            document[resource] = links(&base, &format!("{resource}/"));
        }
    }
    Json(document)
}
