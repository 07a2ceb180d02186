//! The request bodies checked both ways: every endpoint's body is declared by a `BodySpec`
//! (or is one of the listed others, a list that only shrinks), each declared body's parser
//! agrees with the OpenAPI schema generated from it, and no handler outside the listed ones
//! reads a body by hand.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use ferric_model::Microversion;
use serde_json::{Map, Value, json};

use super::{BodyDoc, all};
use crate::v1::body::BodySpec;
use crate::version::MAX_VERSION;

/// Bodies whose schema a field table generates (`create_schema`) or that the field tables check
/// (`JsonPatch`): declared once already.
const FROM_FIELD_TABLES: &[&str] = &[
    "AllocationCreate",
    "ChassisCreate",
    "DeployTemplateCreate",
    "InspectionRuleCreate",
    "JsonPatch",
    "NodeCreate",
    "PortCreate",
    "PortgroupCreate",
    "RunbookCreate",
    "VolumeConnectorCreate",
    "VolumeTargetCreate",
];

/// Bodies still parsed by hand, their schema written in `openapi/schemas.rs`. Convert one to a
/// `BodySpec` and remove it here; nothing may be added.
const NOT_YET_DECLARED: &[&str] = &[
    "Events",
    "InspectionData",
    "RaidConfig",
    "Traits",
    "VendorArguments",
    "VifAttachRequest",
];

/// Files that read a request body without a `BodySpec` (field-table creates, PATCH, the
/// bodies above), found by their calls of `json_object_body` or `serde_json::from_slice` on
/// the body; only shrinks.
const HAND_PARSED_FILES: &[&str] = &[
    "v1/allocations.rs",
    "v1/chassis.rs",
    "v1/deploy_templates.rs",
    "v1/inspection_rules.rs",
    "v1/node_data.rs",
    "v1/nodes.rs",
    "v1/patch.rs",
    "v1/portgroups.rs",
    "v1/ports.rs",
    "v1/raid.rs",
    "v1/ramdisk.rs",
    "v1/runbooks.rs",
    "v1/traits.rs",
    "v1/vendor.rs",
    "v1/vifs.rs",
    "v1/volumes.rs",
];

fn declared() -> Vec<&'static BodySpec> {
    let mut specs: Vec<&'static BodySpec> = Vec::new();
    for endpoint in all() {
        if let Some(BodyDoc::Spec(spec)) = endpoint.doc.body
            && !specs.iter().any(|known| std::ptr::eq(*known, spec))
        {
            specs.push(spec);
        }
    }
    specs
}

#[test]
fn every_request_body_is_declared_or_listed() {
    let mut still_written = BTreeSet::new();
    let mut names = BTreeSet::new();
    for endpoint in all() {
        match endpoint.doc.body {
            None => {}
            Some(BodyDoc::Spec(spec)) => {
                assert!(
                    !FROM_FIELD_TABLES.contains(&spec.schema)
                        && !NOT_YET_DECLARED.contains(&spec.schema),
                    "{}: {} is declared; take it off the lists",
                    endpoint.id,
                    spec.schema
                );
            }
            Some(BodyDoc::Schema(name)) => {
                assert!(
                    FROM_FIELD_TABLES.contains(&name) || NOT_YET_DECLARED.contains(&name),
                    "{}: the body {name} is written by hand; declare it with a BodySpec \
                     (`v1/body.rs`) and `.body_spec(..)`",
                    endpoint.id
                );
                if NOT_YET_DECLARED.contains(&name) {
                    still_written.insert(name);
                }
            }
        }
    }
    let listed: BTreeSet<&str> = NOT_YET_DECLARED.iter().copied().collect();
    assert_eq!(
        still_written, listed,
        "NOT_YET_DECLARED lists a declared body"
    );
    for spec in declared() {
        assert!(names.insert(spec.schema), "two specs named {}", spec.schema);
    }
}

#[test]
fn only_the_listed_files_read_bodies_by_hand() {
    let src = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(src.join("v1")).unwrap() {
        let path = entry.unwrap().path();
        let name = format!("v1/{}", path.file_name().unwrap().to_string_lossy());
        if name == "v1/mod.rs" || name == "v1/body.rs" || path.is_dir() {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        if text.contains("json_object_body(")
            || text.contains("serde_json::from_slice(body")
            || text.contains("serde_json::from_slice(&body")
        {
            found.insert(name);
        }
    }
    let listed: BTreeSet<String> = HAND_PARSED_FILES.iter().map(|&f| f.to_owned()).collect();
    assert_eq!(
        found, listed,
        "a file reads a body by hand (declare a BodySpec) or no longer does (shrink the list)"
    );
}

// ---- the parser against the generated schema ---------------------------------------------

/// The schema with `$ref`s and single-entry `allOf`s resolved.
fn resolve<'a>(schema: &'a Value, components: &'a Map<String, Value>) -> &'a Value {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        return resolve(&components[name], components);
    }
    if let Some([only]) = schema["allOf"].as_array().map(Vec::as_slice) {
        return resolve(only, components);
    }
    schema
}

/// The JSON types a property's schema admits.
fn types(schema: &Value, components: &Map<String, Value>) -> BTreeSet<String> {
    let schema = resolve(schema, components);
    if let Some(options) = schema["oneOf"].as_array() {
        return options
            .iter()
            .flat_map(|option| types(option, components))
            .collect();
    }
    schema["type"]
        .as_str()
        .map(str::to_owned)
        .into_iter()
        .collect()
}

/// A value the schema accepts.
fn sample(schema: &Value, components: &Map<String, Value>) -> Value {
    let schema = resolve(schema, components);
    if let Some(first) = schema["oneOf"]
        .as_array()
        .and_then(|options| options.first())
    {
        return sample(first, components);
    }
    if let Some(first) = schema["enum"].as_array().and_then(|names| names.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("string") if schema["pattern"].is_string() => json!("http://192.0.2.1/image.iso"),
        Some("string") => json!("some text"),
        Some("boolean") => json!(true),
        Some("integer") => json!(schema["minimum"].as_i64().unwrap_or(1)),
        Some("array") => json!([]),
        Some("object") => json!({}),
        other => panic!("no sample for a schema of type {other:?}: {schema}"),
    }
}

/// A value of a JSON type the schema does not admit.
fn wrong_type(schema: &Value, components: &Map<String, Value>) -> Value {
    let admitted = types(schema, components);
    [
        ("integer", json!(12345)),
        ("string", json!("some text")),
        ("array", json!([1])),
        ("object", json!({"key": 1})),
        ("boolean", json!(true)),
    ]
    .into_iter()
    .find(|(kind, _)| !admitted.contains(*kind))
    .map(|(_, value)| value)
    .unwrap()
}

/// A value of an admitted type the schema still refuses (not a choice, below the minimum,
/// too long, not matching the pattern), if it refuses any.
fn wrong_value(schema: &Value, components: &Map<String, Value>) -> Option<Value> {
    let schema = resolve(schema, components);
    if let Some(options) = schema["oneOf"].as_array() {
        // A flag: text that is not one of its words.
        return options
            .iter()
            .any(|option| option["enum"].is_array())
            .then(|| json!("not-a-choice"));
    }
    if schema["enum"].is_array() {
        return Some(json!("not-a-choice"));
    }
    if let Some(minimum) = schema["minimum"].as_i64() {
        return Some(json!(minimum - 1));
    }
    if let Some(max) = schema["maxLength"].as_u64() {
        return Some(json!("x".repeat(usize::try_from(max).unwrap() + 1)));
    }
    schema["pattern"]
        .is_string()
        .then(|| json!("ftp://192.0.2.1/image.iso"))
}

fn status(spec: &BodySpec, body: &Value, minor: u16) -> Result<(), StatusCode> {
    spec.parse(body.to_string().as_bytes(), Microversion::new(minor))
        .map(drop)
        .map_err(|error| error.status)
}

#[test]
fn every_declared_body_parses_what_its_schema_admits_and_nothing_else() {
    let document = crate::openapi::document();
    let components = document["components"]["schemas"].as_object().unwrap();
    let latest = MAX_VERSION.minor();
    let bad = Err(StatusCode::BAD_REQUEST);
    for spec in declared() {
        let schema = &components[spec.schema];
        let name = spec.schema;
        assert_eq!(
            schema["additionalProperties"],
            json!(false),
            "{name} is closed"
        );
        let properties = schema["properties"].as_object().unwrap();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let fields: BTreeSet<&str> = spec.fields.iter().map(|field| field.name).collect();
        let documented: BTreeSet<&str> = properties.keys().map(String::as_str).collect();
        assert_eq!(
            fields, documented,
            "{name}: the schema documents the declared fields"
        );
        let minimal: Map<String, Value> = required
            .iter()
            .map(|field| ((*field).to_owned(), sample(&properties[*field], components)))
            .collect();
        let minimal = Value::Object(minimal);
        assert_eq!(status(spec, &minimal, latest), Ok(()), "{name}: {minimal}");
        for field in &required {
            let mut without = minimal.clone();
            without.as_object_mut().unwrap().remove(*field);
            assert_eq!(
                status(spec, &without, latest),
                bad,
                "{name} without {field}"
            );
        }
        let mut unknown = minimal.clone();
        unknown["no_such_field"] = json!(1);
        assert_eq!(
            status(spec, &unknown, latest),
            bad,
            "{name} + an unknown key"
        );
        for (field, property) in properties {
            let with = |value: Value| {
                let mut body = minimal.clone();
                body[field] = value;
                body
            };
            let good = with(sample(property, components));
            assert_eq!(status(spec, &good, latest), Ok(()), "{name}: {good}");
            let refused = with(wrong_type(property, components));
            assert_eq!(status(spec, &refused, latest), bad, "{name}: {refused}");
            if let Some(value) = wrong_value(property, components) {
                let refused = with(value);
                assert_eq!(status(spec, &refused, latest), bad, "{name}: {refused}");
            }
            let null = with(Value::Null);
            let nullable = property["nullable"] == json!(true);
            assert_eq!(
                status(spec, &null, latest).is_ok(),
                nullable,
                "{name}: {field} null, nullable {nullable}"
            );
            if let Some(since) = property["x-ironic-since"].as_str() {
                let minor: u16 = since.trim_start_matches("1.").parse().unwrap();
                assert_eq!(
                    status(spec, &good, minor),
                    Ok(()),
                    "{name}: {good} at {since}"
                );
                let older = status(spec, &good, minor - 1);
                assert!(
                    matches!(
                        older,
                        Err(StatusCode::BAD_REQUEST | StatusCode::NOT_ACCEPTABLE)
                    ),
                    "{name}: {field} below {since}: {older:?}"
                );
            }
        }
    }
}

#[test]
fn a_body_may_be_left_out_exactly_when_the_document_says_so() {
    let document = crate::openapi::document();
    for endpoint in all() {
        let Some(BodyDoc::Spec(spec)) = endpoint.doc.body else {
            continue;
        };
        let operation = &document["paths"][endpoint.path][endpoint.verb.openapi()];
        let optional = operation["requestBody"]["required"] == json!(false);
        let empty = spec.parse(b"", MAX_VERSION);
        assert_eq!(empty.is_ok(), optional, "{}: an empty body", endpoint.id);
    }
}
