//! What every client command shares: the global options ([`GlobalArgs`]), the [`Context`] a
//! command runs with (the API client and the output format), and the helpers that turn flags
//! into requests (`KEY=VALUE` pairs, JSON arguments, RFC 6902 patches, escaped path segments,
//! node paths and `fields` queries).

use std::io::Write;

use clap::Args;
use serde_json::{Map, Value};

use crate::client::{Client, Connection};
use crate::error::CliError;
use crate::openstack;
use crate::output::{self, Format};

/// Where the API is and how to talk to it: shared by every client subcommand, and accepted
/// before or after the subcommand's name.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// The Bare Metal API's URL (default: the `baremetal` endpoint of the Keystone catalog
    /// when OS_CLOUD or OS_AUTH_URL is set, else http://127.0.0.1:6385).
    #[arg(
        long,
        env = "FERRIC_URL",
        global = true,
        help_heading = "Global options",
        value_name = "URL"
    )]
    pub url: Option<String>,

    /// A cloud of clouds.yaml to authenticate with Keystone as (the `OS_*` variables
    /// override its settings, as with the `baremetal` CLI).
    #[arg(
        long,
        env = "OS_CLOUD",
        global = true,
        help_heading = "Global options",
        value_name = "CLOUD"
    )]
    pub os_cloud: Option<String>,

    /// User name for http_basic authentication.
    #[arg(
        long,
        env = "FERRIC_USERNAME",
        global = true,
        help_heading = "Global options",
        value_name = "NAME"
    )]
    pub username: Option<String>,

    /// Password for http_basic authentication.
    #[arg(
        long,
        env = "FERRIC_PASSWORD",
        global = true,
        help_heading = "Global options",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub password: Option<String>,

    /// The API microversion to request (`1.N`), or `latest`.
    #[arg(
        long,
        env = "FERRIC_API_VERSION",
        default_value = "latest",
        global = true,
        help_heading = "Global options",
        value_name = "VERSION"
    )]
    pub api_version: String,

    /// Output format: a table for people, JSON or YAML for scripts.
    #[arg(
        short = 'f',
        long,
        value_enum,
        default_value_t = Format::Table,
        global = true,
        help_heading = "Global options"
    )]
    pub format: Format,
}

/// The API's URL when nothing names one.
const DEFAULT_URL: &str = "http://127.0.0.1:6385";

/// What every command runs with: the client and the output format.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) client: Client,
    pub(crate) format: Format,
}

impl Context {
    pub(crate) fn new(global: &GlobalArgs) -> Result<Self, CliError> {
        // Keystone when a cloud, an auth URL or a token says so (http_basic flags win).
        let keystone = openstack::KeystoneConfig::from_env(global.os_cloud.as_deref(), &|name| {
            std::env::var(name).ok()
        })?;
        let (token, catalog_url) = if keystone.in_use() && global.username.is_none() {
            let session = keystone.login()?;
            (Some(session.token), session.endpoint)
        } else {
            (None, None)
        };
        let url = global
            .url
            .clone()
            .or(catalog_url)
            .unwrap_or_else(|| DEFAULT_URL.to_owned());
        let client = Client::new(Connection {
            url,
            username: global.username.clone(),
            password: global.password.clone(),
            token,
            api_version: global.api_version.clone(),
        })?;
        Ok(Self {
            client,
            format: global.format,
        })
    }

    /// Shows one record (links dropped, `fields` in order when given).
    pub(crate) fn show(&self, record: &Value, fields: Option<&[String]>) -> Result<(), CliError> {
        emit(&output::record(
            self.format,
            &output::shape(record, fields),
            fields,
        )?)
    }

    /// Shows a listing with `defaults` as the table's columns unless `fields` names them (an
    /// empty `defaults`: every field, for `--long`).
    pub(crate) fn show_list(
        &self,
        items: &[Value],
        fields: Option<&[String]>,
        defaults: &[&str],
    ) -> Result<(), CliError> {
        let shaped: Vec<Value> = items
            .iter()
            .map(|item| output::shape(item, fields))
            .collect();
        let columns = output::columns(&shaped, fields, defaults);
        emit(&output::list(self.format, &shaped, &columns)?)
    }
}

/// Writes `text` and a newline to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn emit(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{text}") {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::Output(error.to_string()))
        }
        _ => Ok(()),
    }
}

/// Parses `KEY=VALUE` (the value is kept as a string, as the API stores what it is given).
pub(crate) fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got '{text}'")),
    }
}

/// `KEY=VALUE` pairs as a JSON object.
pub(crate) fn object_of(pairs: &[(String, String)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(key, value)| (key.clone(), Value::String(value.clone())))
        .collect()
}

/// Puts `--key name=value` pairs into a create body as the object `field`, when any were given.
pub(crate) fn insert_pairs(body: &mut Map<String, Value>, field: &str, pairs: &[(String, String)]) {
    if !pairs.is_empty() {
        body.insert(field.to_owned(), Value::Object(object_of(pairs)));
    }
}

/// `--fields a,b --fields c` as one list, or `None` when not given.
pub(crate) fn fields_of(fields: &[String]) -> Option<Vec<String>> {
    let all: Vec<String> = fields
        .iter()
        .flat_map(|field| field.split(','))
        .map(str::trim)
        .filter(|field| !field.is_empty())
        .map(str::to_owned)
        .collect();
    (!all.is_empty()).then_some(all)
}

/// A JSON argument: the text itself, `-` for stdin, or the path of a file holding it.
pub(crate) fn json_argument(name: &str, text: &str) -> Result<Value, CliError> {
    let content = if text == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|error| CliError::Usage(format!("cannot read {name} from stdin: {error}")))?
    } else if !text.trim_start().starts_with(['{', '[']) && std::path::Path::new(text).is_file() {
        std::fs::read_to_string(text)
            .map_err(|error| CliError::Usage(format!("cannot read {name} from {text}: {error}")))?
    } else {
        text.to_owned()
    };
    serde_json::from_str(&content).map_err(|error| {
        CliError::Usage(format!(
            "{name} must be JSON (or a file holding JSON, or - for stdin): {error}"
        ))
    })
}

/// An RFC 6902 patch, built from `set`/`unset` flags.
#[derive(Debug, Default)]
pub(crate) struct Patch(Vec<Value>);

impl Patch {
    /// Sets a top-level field.
    pub(crate) fn replace(&mut self, field: &str, value: Value) {
        self.0
            .push(serde_json::json!({"op": "replace", "path": pointer(&[field]), "value": value}));
    }

    /// Sets `key` inside the object field `field` (adding it or replacing it).
    pub(crate) fn add_in(&mut self, field: &str, key: &str, value: Value) {
        self.0
            .push(serde_json::json!({"op": "add", "path": pointer(&[field, key]), "value": value}));
    }

    /// Removes a top-level field, or `key` inside it.
    pub(crate) fn remove(&mut self, path: &[&str]) {
        self.0
            .push(serde_json::json!({"op": "remove", "path": pointer(path)}));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn into_value(self) -> Value {
        Value::Array(self.0)
    }
}

/// A JSON pointer from path segments, escaped per RFC 6901.
fn pointer(segments: &[&str]) -> String {
    segments
        .iter()
        .map(|segment| format!("/{}", segment.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// Percent-encodes one path segment (a node name may hold characters a URL path may not).
pub(crate) fn segment(ident: &str) -> String {
    let mut encoded = String::with_capacity(ident.len());
    for byte in ident.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~:".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// A node's path in the API.
pub(crate) fn node_path(node: &str) -> String {
    format!("/v1/nodes/{}", segment(node))
}

/// What a verb followed with `--wait` shows at the end.
pub(crate) fn summary_fields() -> Vec<String> {
    [
        "uuid",
        "name",
        "provision_state",
        "target_provision_state",
        "power_state",
        "maintenance",
        "last_error",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `fields` as the query of a listing or a show.
pub(crate) fn fields_query(fields: Option<&[String]>) -> Vec<(&'static str, String)> {
    match fields {
        Some(fields) => vec![("fields", fields.join(","))],
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_and_patches_escape_their_paths() {
        assert_eq!(key_value("a=b=c"), Ok(("a".to_owned(), "b=c".to_owned())));
        assert!(key_value("novalue").is_err());
        assert!(key_value("=x").is_err());
        assert_eq!(
            fields_of(&["uuid, name".to_owned(), "power_state".to_owned()]),
            Some(vec!["uuid".into(), "name".into(), "power_state".into()])
        );
        assert_eq!(fields_of(&[]), None);
        let mut patch = Patch::default();
        patch.add_in("driver_info", "a/b~c", Value::from("x"));
        patch.remove(&["extra"]);
        let patch = patch.into_value();
        assert_eq!(patch[0]["path"], "/driver_info/a~1b~0c");
        assert_eq!(
            patch[1],
            serde_json::json!({"op": "remove", "path": "/extra"})
        );
        assert_eq!(segment("node 1/é"), "node%201%2F%C3%A9");
        assert!(json_argument("--clean-steps", "[{\"step\": ").is_err());
        assert_eq!(
            json_argument("--clean-steps", "[]").ok(),
            Some(Value::Array(vec![]))
        );
    }
}
