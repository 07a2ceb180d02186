//! The configuration reference, `docs/configuration.md`, generated from the settings
//! themselves: each setting's name, type and doc comment come from [`Settings`]' JSON schema
//! (`schemars` reads the doc comments), its default from `Settings::default()`, its flag from
//! the clap definition of [`SettingsOverrides`]. Nobody edits the page by hand; a test fails
//! when the checked-in copy is stale and `cargo xtask docs` rewrites it.

use std::collections::HashMap;

use serde_json::Value;

use crate::config::{Settings, SettingsOverrides};

/// One setting, as the reference shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SettingDoc {
    /// The key in the TOML file.
    pub(crate) name: &'static str,
    /// What kind of value it takes: `string`, `integer`, `text` or `json`, ….
    pub(crate) kind: String,
    /// The built-in default, as TOML would spell it, or what happens when it is unset.
    pub(crate) default: String,
    pub(crate) env: String,
    pub(crate) flag: Option<String>,
    /// The doc comment, paragraphs separated by blank lines.
    pub(crate) doc: String,
}

/// The sections of the reference, each named by its first setting in [`Settings::KEYS`]
/// order; a setting belongs to the last section that starts at or before it.
const SECTIONS: [(&str, &str); 7] = [
    ("database_url", "Database, API address and logging"),
    ("conductor_hostname", "The conductor"),
    ("auth_strategy", "API access"),
    ("api_url", "Network boot and the agent"),
    ("inspector_enabled", "In-band inspection"),
    ("switch_config_file", "Switch networking"),
    ("enabled_hardware_types", "Hardware types and interfaces"),
];

/// Defaults computed on the machine that runs `ferric`: what the reference says instead.
const MACHINE_DEPENDENT_DEFAULTS: [(&str, &str); 1] =
    [("conductor_hostname", "the machine's host name")];

/// Every setting, in [`Settings::KEYS`] order.
pub(crate) fn settings() -> Vec<SettingDoc> {
    let schema = schemars::schema_for!(Settings);
    let schema = schema.as_value();
    let definitions = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let defaults = serde_json::to_value(Settings::default()).unwrap_or(Value::Null);
    let flags = flags();
    Settings::KEYS
        .iter()
        .map(|&name| {
            let property = &schema["properties"][name];
            let default = match MACHINE_DEPENDENT_DEFAULTS
                .iter()
                .find(|(key, _)| *key == name)
            {
                Some((_, text)) => (*text).to_owned(),
                None => default_text(&defaults[name]),
            };
            SettingDoc {
                name,
                kind: kind(property, &definitions),
                default,
                env: format!("FERRIC_{}", name.to_ascii_uppercase()),
                flag: flags.get(name).cloned(),
                doc: paragraphs(property["description"].as_str().unwrap_or_default()),
            }
        })
        .collect()
}

/// `--flag` per setting, for the settings `ferric server` takes on its command line.
fn flags() -> HashMap<String, String> {
    let command = <SettingsOverrides as clap::Args>::augment_args(clap::Command::new("server"));
    command
        .get_arguments()
        .filter_map(|argument| argument.get_long())
        .map(|long| (long.replace('-', "_"), format!("--{long}")))
        .collect()
}

/// A readable type from a property's schema (`$ref`s resolved through `definitions`).
fn kind(property: &Value, definitions: &Value) -> String {
    if let Some(reference) = property["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or_default();
        return kind(&definitions[name], definitions);
    }
    let choices: Vec<String> = property["oneOf"]
        .as_array()
        .or_else(|| property["enum"].as_array())
        .map(|choices| {
            choices
                .iter()
                .filter_map(|choice| choice["const"].as_str().or_else(|| choice.as_str()))
                .map(|choice| format!("`{choice}`"))
                .collect()
        })
        .unwrap_or_default();
    if !choices.is_empty() {
        return format!("one of {}", choices.join(", "));
    }
    let types: Vec<&str> = match &property["type"] {
        Value::String(single) => vec![single.as_str()],
        Value::Array(several) => several.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let optional = types.contains(&"null");
    let base = match types.iter().find(|name| **name != "null") {
        Some(&"array") => format!("list of {}s", kind(&property["items"], definitions)),
        Some(&"integer") if property["minimum"].as_f64() == Some(0.0) => "integer ≥ 0".to_owned(),
        Some(other) => (*other).to_owned(),
        None => "value".to_owned(),
    };
    if optional {
        format!("{base} (optional)")
    } else {
        base
    }
}

/// A default as the TOML file would spell it; unset options say so.
fn default_text(value: &Value) -> String {
    match value {
        Value::Null => "unset".to_owned(),
        Value::String(text) if text.is_empty() => "`\"\"` (empty)".to_owned(),
        other => format!("`{other}`"),
    }
}

/// Doc comment text with each paragraph on one line.
fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| paragraph.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|paragraph| !paragraph.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `docs/configuration.md`.
pub(crate) fn render() -> String {
    let mut page = String::from(
        "<!-- Generated from crates/ferric/src/config.rs by `cargo xtask docs`; do not edit. -->\n\
         # Configuration reference\n\n\
         `ferric server` (and `ferric inspector`) read their settings from four layers, each \
         overriding the one before:\n\n\
         1. the built-in defaults below;\n\
         2. a TOML file named with `--config FILE` (or `FERRIC_CONFIG`), keys as below \
         (`database_url = \"postgres://ferric@db/ferric\"`);\n\
         3. environment variables: `FERRIC_` and the key in capitals (`FERRIC_DATABASE_URL`);\n\
         4. command-line flags, for the settings that have one (`--database-url`).\n\n\
         An unknown key in the file is refused, as is a value of the wrong type, so a typo \
         stops the server at start-up instead of being ignored. In the file, lists are arrays \
         in brackets. An environment variable is read as the type of its setting: \
         `true`/`false` (also `yes`/`no`, `on`/`off`, `1`/`0`) for a boolean, a whole number \
         for a number, a comma-separated list (`FERRIC_ENABLED_HARDWARE_TYPES=redfish,ipmi`) \
         or a JSON array (`'[\"redfish\", \"ipmi\"]'`) for a list, and the text as written \
         for everything else (so `FERRIC_AGENT_VERIFY_CA=false` and \
         `FERRIC_CONDUCTOR_HOSTNAME=1234` are what they say); an empty value unsets a setting \
         whose default is unset. Durations are whole seconds.\n\n\
         Interfaces: a node may use an interface implementation only if its hardware type \
         supports it and the site enabled it (`enabled_<kind>_interfaces`); asking for \
         another is refused with 400. The built-in lists enable every implementation except \
         `fake` (kept only for power and management, which no BMC type offers), so a \
         `redfish` or `ipmi` node can never deploy through the fake deploy or boot \
         interface unless the site lists `fake`; the `fake-hardware` type drives no machine \
         and may always use its fake implementations, which keeps the quick start working. \
         See [`enabled_deploy_interfaces`](#enabled_deploy_interfaces).\n\n\
         The [operator guide](operator-guide.md) explains how the pieces fit together.\n",
    );
    let settings = settings();
    let mut section = None;
    for setting in &settings {
        if let Some((_, title)) = SECTIONS.iter().find(|(first, _)| *first == setting.name) {
            section = Some(*title);
            page.push_str(&format!("\n## {title}\n\n"));
            page.push_str("| setting | type | default | environment | flag |\n");
            page.push_str("|---|---|---|---|---|\n");
            for row in settings
                .iter()
                .skip_while(|row| row.name != setting.name)
                .take_while(|row| {
                    row.name == setting.name
                        || !SECTIONS.iter().any(|(first, _)| *first == row.name)
                })
            {
                page.push_str(&format!(
                    "| [`{name}`](#{name}) | {kind} | {default} | `{env}` | {flag} |\n",
                    name = row.name,
                    kind = row.kind,
                    default = row.default.replace('|', "\\|"),
                    env = row.env,
                    flag = row
                        .flag
                        .as_deref()
                        .map_or("—".to_owned(), |flag| format!("`{flag}`")),
                ));
            }
        }
        debug_assert!(section.is_some(), "the first setting opens a section");
        page.push_str(&format!("\n### `{}`\n\n{}\n", setting.name, setting.doc));
    }
    page
}

#[cfg(test)]
#[allow(
    clippy::result_large_err,
    reason = "figment::Jail's closures return figment's own error"
)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn doc_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md")
    }

    /// `docs/configuration.md` is what the settings say; `FERRIC_UPDATE_DOCS=1` (what
    /// `cargo xtask docs` sets) rewrites it.
    #[test]
    fn configuration_doc_is_up_to_date() {
        ferric_testkit::doc::assert_up_to_date(
            &doc_path(),
            &render(),
            "the settings",
            "cargo xtask docs",
        );
    }

    #[test]
    fn every_setting_is_documented_and_in_a_section() {
        let settings = settings();
        assert_eq!(settings.len(), Settings::KEYS.len());
        for setting in &settings {
            assert!(
                setting.doc.len() > 20,
                "setting {} needs a doc comment in config.rs",
                setting.name
            );
            assert!(
                !setting.kind.is_empty() && setting.kind != "value",
                "{}: {}",
                setting.name,
                setting.kind
            );
        }
        for (first, _) in SECTIONS {
            assert!(
                Settings::KEYS.contains(&first),
                "section starts at unknown setting {first}"
            );
        }
        assert_eq!(Settings::KEYS[0], SECTIONS[0].0);
    }

    /// The page's examples of a list in the environment work as written.
    #[test]
    fn lists_in_the_environment_are_bracketed_arrays() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("FERRIC_ENABLED_HARDWARE_TYPES", r#"["redfish", "ipmi"]"#);
            let settings = Settings::load(None, &SettingsOverrides::default())
                .map_err(|error| error.to_string())?;
            assert_eq!(settings.enabled_hardware_types, ["redfish", "ipmi"]);
            jail.set_env("FERRIC_ENABLED_HARDWARE_TYPES", "redfish, ipmi");
            let settings = Settings::load(None, &SettingsOverrides::default())
                .map_err(|error| error.to_string())?;
            assert_eq!(settings.enabled_hardware_types, ["redfish", "ipmi"]);
            Ok(())
        });
    }

    #[test]
    fn rows_say_type_default_environment_and_flag() {
        let settings = settings();
        let find = |name: &str| {
            settings
                .iter()
                .find(|setting| setting.name == name)
                .unwrap()
                .clone()
        };
        let database = find("database_url");
        assert_eq!(database.kind, "string");
        assert_eq!(database.default, "`\"sqlite://ferric.db\"`");
        assert_eq!(database.env, "FERRIC_DATABASE_URL");
        assert_eq!(database.flag.as_deref(), Some("--database-url"));
        let format = find("log_format");
        assert_eq!(format.kind, "one of `text`, `json`");
        let workers = find("conductor_workers");
        assert_eq!(workers.default, "`300`");
        assert_eq!(workers.flag, None);
        assert_eq!(find("api_url").default, "unset");
        assert_eq!(
            find("conductor_hostname").default,
            "the machine's host name"
        );
    }
}
