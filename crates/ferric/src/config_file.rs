//! `packaging/ferric.toml`, the settings file the Debian package installs as
//! `/etc/ferric/ferric.toml`: every setting commented out at its default with its doc comment,
//! generated from the same source as `docs/configuration.md` (`config_doc.rs`), so the file
//! never drifts from the code. `cargo xtask docs` rewrites it.

use serde_json::Value;

use crate::config::Settings;
use crate::config_doc;

/// Settings the package sets rather than leaves at their default, with why.
const PACKAGE_SETTINGS: [(&str, &str, &str); 1] = [(
    "database_url",
    "\"/var/lib/ferric/ferric.db\"",
    "The package keeps its state in /var/lib/ferric, whatever directory `ferric db …` runs in.",
)];

/// A default as a TOML value; `None` for an unset option.
fn toml_value(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::Array(items) => Some(format!(
            "[{}]",
            items
                .iter()
                .filter_map(toml_value)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        // JSON's string escapes and numbers are TOML's too.
        other => Some(other.to_string()),
    }
}

/// `text` as `# ` comment lines of at most about 90 characters.
fn comment(text: &str) -> String {
    let mut out = String::new();
    for paragraph in text.split("\n\n") {
        let mut line = String::from("#");
        for word in paragraph.split_whitespace() {
            if line.len() + word.len() > 90 && line.len() > 1 {
                out.push_str(&line);
                out.push('\n');
                line = String::from("#");
            }
            line.push(' ');
            line.push_str(word);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

pub(crate) fn render() -> String {
    let defaults = serde_json::to_value(Settings::default()).unwrap_or(Value::Null);
    let mut file = String::from(
        "# /etc/ferric/ferric.toml: settings of `ferric server`, `ferric inspector` and `ferric db`.\n\
         # Generated from crates/ferric/src/config.rs by `cargo xtask docs`; the reference with\n\
         # types, environment variables and flags is /usr/share/doc/ferric/configuration.md.\n\
         # Every setting below is commented out at its built-in default: uncomment to change.\n\
         # Environment variables (FERRIC_<KEY>) and flags override this file.\n",
    );
    for (name, value, why) in PACKAGE_SETTINGS {
        file.push('\n');
        file.push_str(&comment(why));
        file.push_str(&format!("{name} = {value}\n"));
    }
    for setting in config_doc::settings() {
        file.push('\n');
        file.push_str(&comment(&setting.doc));
        if PACKAGE_SETTINGS
            .iter()
            .any(|(name, ..)| *name == setting.name)
        {
            file.push_str(&format!("# ({} is set above.)\n", setting.name));
            continue;
        }
        match toml_value(&defaults[setting.name]) {
            _ if setting.name == "conductor_hostname" => {
                file.push_str("# conductor_hostname = \"<the machine's host name>\"\n");
            }
            Some(value) => file.push_str(&format!("# {} = {value}\n", setting.name)),
            None => file.push_str(&format!("# {} = (unset by default)\n", setting.name)),
        }
    }
    file
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn file_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../packaging/ferric.toml")
    }

    /// The packaged file is what the settings say; `FERRIC_UPDATE_DOCS=1` rewrites it.
    #[test]
    fn packaged_config_file_doc_is_up_to_date() {
        ferric_testkit::doc::assert_up_to_date(
            &file_path(),
            &render(),
            "the settings",
            "cargo xtask docs",
        );
    }

    /// The file loads as it is, and uncommenting every default changes nothing.
    #[test]
    fn packaged_config_file_loads_and_its_defaults_are_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ferric.toml");
        std::fs::write(&path, render()).unwrap();
        let loaded = Settings::load(Some(&path), &Default::default()).unwrap();
        assert_eq!(loaded.database_url, "/var/lib/ferric/ferric.db");

        let uncommented: String = render()
            .lines()
            .map(|line| match line.strip_prefix("# ") {
                Some(setting)
                    if Settings::KEYS
                        .iter()
                        .any(|key| setting.starts_with(&format!("{key} = ")))
                        && !setting.contains("(unset by default)")
                        && !setting.starts_with("conductor_hostname") =>
                {
                    format!("{setting}\n")
                }
                _ => format!("{line}\n"),
            })
            .collect();
        std::fs::write(&path, uncommented).unwrap();
        let mut all_defaults = Settings::load(Some(&path), &Default::default()).unwrap();
        all_defaults.database_url = Settings::default().database_url;
        let expected = Settings {
            conductor_hostname: all_defaults.conductor_hostname.clone(),
            ..Settings::default()
        };
        assert_eq!(all_defaults, expected);
    }
}
