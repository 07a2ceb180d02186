//! The declarations checked against each other and against the code around them: every
//! endpoint is guarded by a rule the policy knows, found again by its own path, documented
//! with its path parameters, public exactly when authentication lets it pass, and the router
//! is built from this table alone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use axum::http::Method;

use super::*;
use crate::auth::is_public_route;
use crate::policy::RULES;

/// A concrete path for a template: every `{param}` becomes a value.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|segment| {
            if segment.starts_with('{') {
                "x1"
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn method(verb: Verb) -> Method {
    match verb {
        Verb::Get => Method::GET,
        Verb::Post => Method::POST,
        Verb::Put => Method::PUT,
        Verb::Patch => Method::PATCH,
        Verb::Delete => Method::DELETE,
    }
}

#[test]
fn every_endpoint_is_declared_once_with_a_unique_id() {
    let mut seen = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for endpoint in all() {
        assert!(
            seen.insert((endpoint.path, endpoint.verb.openapi())),
            "{} {} is declared twice",
            endpoint.verb.openapi(),
            endpoint.path
        );
        assert!(
            ids.insert(endpoint.id),
            "operationId {} is used twice",
            endpoint.id
        );
        assert!(
            !endpoint.doc.summary.is_empty(),
            "{} has no summary",
            endpoint.id
        );
    }
}

#[test]
fn every_endpoint_has_a_policy_rule_the_policy_knows() {
    let known: BTreeSet<&str> = RULES.iter().map(|(name, _, _)| *name).collect();
    for endpoint in all() {
        let rules: Vec<String> = match endpoint.guard {
            Guard::Unset => panic!("{} declares no guard (policy rule)", endpoint.id),
            Guard::Public => Vec::new(),
            Guard::Rule(rule, _) => vec![rule.to_owned()],
            Guard::List(kind) => vec![
                format!("baremetal:{kind}:list"),
                format!("baremetal:{kind}:list_all"),
            ],
            Guard::Provision => vec![
                "baremetal:node:set_provision_state".to_owned(),
                "baremetal:node:set_provision_state:instance".to_owned(),
            ],
            Guard::NodeUpdate => vec![
                "baremetal:node:update".to_owned(),
                "baremetal:node:update:owner".to_owned(),
            ],
            Guard::RunbookUpdate => vec![
                "baremetal:runbook:update".to_owned(),
                "baremetal:runbook:update:owner".to_owned(),
                "baremetal:runbook:update:public".to_owned(),
            ],
        };
        for rule in rules {
            assert!(
                known.contains(rule.as_str()),
                "{} is guarded by {rule}, which policy::RULES does not define",
                endpoint.id
            );
        }
    }
}

#[test]
fn every_endpoint_is_found_by_its_own_path() {
    for endpoint in all() {
        let path = concrete(endpoint.path);
        let found = find(&method(endpoint.verb), &path).map(|(found, _)| found.id);
        assert_eq!(
            found,
            Some(endpoint.id),
            "{} {path}",
            endpoint.verb.openapi()
        );
    }
    let (endpoint, ident) = find(&Method::HEAD, "/v1/nodes/n1/ports/").unwrap();
    assert_eq!((endpoint.id, ident), ("node_port_list", Some("n1")));
    assert!(find(&Method::GET, "/v1/nodes/n1/nope").is_none());
    assert!(find(&Method::OPTIONS, "/v1/nodes").is_none());
}

#[test]
fn public_endpoints_are_exactly_those_authentication_lets_pass() {
    for endpoint in all() {
        let path = concrete(endpoint.path).replace("x1", "node-1");
        assert_eq!(
            is_public_route(&path),
            endpoint.guard == Guard::Public,
            "{} {}: is_public_route disagrees with the declaration",
            endpoint.verb.openapi(),
            endpoint.path
        );
    }
}

#[test]
fn every_path_parameter_is_documented() {
    for endpoint in all() {
        for name in endpoint
            .path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        {
            let reference = format!("#/components/parameters/{name}");
            assert!(
                endpoint
                    .doc
                    .params
                    .iter()
                    .any(|param| param["$ref"] == reference.as_str()),
                "{}: the path parameter {{{name}}} is not among its parameters",
                endpoint.id
            );
        }
    }
}

#[test]
fn nothing_is_versioned_by_bare_numbers_in_declarations() {
    let here = source_dir().join("endpoints");
    for file in ["nodes.rs", "resources.rs", "templates.rs"] {
        let text = std::fs::read_to_string(here.join(file)).unwrap();
        assert!(
            !text.contains(".since(Microversion"),
            "{file}: name the version in since.rs"
        );
    }
}

fn source_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The other direction: nothing is routed but from this table, so every routed endpoint is
/// declared, documented and guarded.
#[test]
fn routes_are_made_only_from_the_declarations() {
    let mut files = Vec::new();
    rust_files(&source_dir(), &mut files);
    let this = source_dir().join("endpoints").join("mod.rs");
    let tests = source_dir().join("endpoints").join("tests.rs");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let routes = text.contains(".route(\"") || text.contains(".nest(");
        assert!(
            file == this || file == tests || !routes,
            "{} adds routes by hand; declare them in crate::endpoints instead",
            file.display()
        );
    }
}

/// The markdown table of `docs/security.md` that names, for every endpoint, the rule that
/// guards it (`cargo xtask docs` writes it through the test below).
fn rule_table() -> String {
    let mut table = String::from("| endpoint | rule |\n|---|---|\n");
    for endpoint in all() {
        let rule = match endpoint.guard {
            Guard::Unset => "`default`".to_owned(),
            Guard::Public => "none: public".to_owned(),
            Guard::Rule(rule, On::BodyNode) => format!("`{rule}` on the body's `node_uuid`"),
            Guard::Rule(rule, _) => format!("`{rule}`"),
            Guard::List(kind) => format!(
                "`baremetal:{kind}:list` (the caller's project only) or `baremetal:{kind}:list_all`"
            ),
            Guard::Provision => "`baremetal:node:set_provision_state`, or \
                 `…:set_provision_state:instance` for the instance verbs; naming a runbook also \
                 `baremetal:runbook:use`"
                .to_owned(),
            Guard::NodeUpdate => {
                "`baremetal:node:update`, and `…:update:owner` to touch `owner`".to_owned()
            }
            Guard::RunbookUpdate => "`baremetal:runbook:update`, and `…:update:owner` / \
                 `…:update:public` to touch `owner` / `public`"
                .to_owned(),
        };
        let method = endpoint.verb.openapi().to_ascii_uppercase();
        table.push_str(&format!("| `{method} {}` | {rule} |\n", endpoint.path));
    }
    table
}

/// The markers around the generated table in `docs/security.md`.
const TABLE_START: &str = "<!-- generated from the endpoint table by `cargo xtask docs` -->\n";
const TABLE_END: &str = "<!-- end of the generated table -->\n";

#[test]
fn security_doc_is_up_to_date() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/security.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find(TABLE_START)
        .expect("docs/security.md lost its table's start marker")
        + TABLE_START.len();
    let end = text
        .find(TABLE_END)
        .expect("docs/security.md lost its table's end marker");
    let rendered = format!("{}{}{}", &text[..start], rule_table(), &text[end..]);
    ferric_testkit::doc::assert_up_to_date(
        &path,
        &rendered,
        "the endpoint table",
        "FERRIC_UPDATE_DOCS=1 cargo test -p ferric-api --lib security_doc_is_up_to_date",
    );
}
