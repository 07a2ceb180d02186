//! `ferric deploy-template …` (API 1.55) and `ferric runbook …` (API 1.92): list, show,
//! create and delete named step lists. Steps are given as Ironic's `baremetal` CLI takes them:
//! a JSON list, inline, in a file or `-` for standard input.

use clap::Subcommand;
use serde_json::{Map, Value, json};

use crate::resources::{Listing, Showing, create, delete, list, show};
use crate::{CliError, Context, insert_pairs, json_argument, key_value};

/// A `--steps` argument (JSON text, a file holding it, or `-` for stdin): a JSON list.
fn read_steps(text: &str) -> Result<Value, CliError> {
    match json_argument("--steps", text)? {
        steps @ Value::Array(_) => Ok(steps),
        _ => Err(CliError::Usage(
            "--steps must be a JSON list of step objects".to_owned(),
        )),
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum DeployTemplateCommand {
    /// List deploy templates (GET /v1/deploy_templates).
    ///
    /// Example: `ferric deploy-template list --long`.
    List {
        #[command(flatten)]
        listing: Listing,
    },
    /// Show one deploy template by name or UUID.
    ///
    /// Example: `ferric deploy-template show CUSTOM_HYPERTHREADING_ON`.
    Show(Showing),
    /// Create a deploy template (POST /v1/deploy_templates). A node deployed with the
    /// template's name among its `instance_info.traits` runs its steps.
    ///
    /// Example: `ferric deploy-template create CUSTOM_VT_OFF --steps '[{"interface": "bios",
    /// "step": "apply_configuration", "args": {"settings": [{"name": "ProcVirtualization",
    /// "value": "Disabled"}]}, "priority": 150}]'`.
    Create {
        /// The template's name: a trait (`CUSTOM_…`).
        name: String,
        /// The steps: a JSON list of {interface, step, args, priority}, inline, a file or `-`.
        #[arg(long)]
        steps: String,
        #[arg(long)]
        uuid: Option<String>,
        /// An extra key; repeatable.
        #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
        extra: Vec<(String, String)>,
    },
    /// Delete deploy templates by name or UUID.
    ///
    /// Example: `ferric deploy-template delete CUSTOM_VT_OFF`.
    Delete {
        #[arg(required = true)]
        templates: Vec<String>,
    },
}

pub(crate) fn run_deploy_template(
    context: &Context,
    command: DeployTemplateCommand,
) -> Result<(), CliError> {
    match command {
        DeployTemplateCommand::List { listing } => list(
            context,
            "deploy_templates",
            &listing,
            Vec::new(),
            &["uuid", "name"],
            true,
        ),
        DeployTemplateCommand::Show(showing) => show(context, "deploy_templates", &showing),
        DeployTemplateCommand::Create {
            name,
            steps,
            uuid,
            extra,
        } => {
            let mut body = Map::new();
            body.insert("name".into(), json!(name));
            body.insert("steps".into(), read_steps(&steps)?);
            if let Some(uuid) = uuid {
                body.insert("uuid".into(), json!(uuid));
            }
            insert_pairs(&mut body, "extra", &extra);
            create(context, "deploy_templates", body)
        }
        DeployTemplateCommand::Delete { templates } => {
            delete(context, "deploy_templates", "deploy template", &templates)
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunbookCommand {
    /// List runbooks (GET /v1/runbooks); a project's users see theirs and the public ones.
    ///
    /// Example: `ferric runbook list --long`.
    List {
        #[command(flatten)]
        listing: Listing,
    },
    /// Show one runbook by name or UUID.
    ///
    /// Example: `ferric runbook show CUSTOM_WIPE`.
    Show(Showing),
    /// Create a runbook (POST /v1/runbooks). A node with a trait of the runbook's name can
    /// run it: `ferric node clean NODE --runbook NAME`.
    ///
    /// Example: `ferric runbook create CUSTOM_WIPE --steps '[{"interface": "deploy", "step":
    /// "erase_devices_metadata", "order": 1}]'`.
    Create {
        /// The runbook's name: a trait (`CUSTOM_…`).
        name: String,
        /// The steps: a JSON list of {interface, step, args, order}, inline, a file or `-`.
        #[arg(long)]
        steps: String,
        #[arg(long)]
        uuid: Option<String>,
        /// Usable by every project (a public runbook has no owner).
        #[arg(long)]
        public: bool,
        /// The owning project.
        #[arg(long)]
        owner: Option<String>,
        /// Run the steps without booting the agent ramdisk.
        #[arg(long)]
        disable_ramdisk: bool,
        /// An extra key; repeatable.
        #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
        extra: Vec<(String, String)>,
    },
    /// Delete runbooks by name or UUID.
    ///
    /// Example: `ferric runbook delete CUSTOM_WIPE`.
    Delete {
        #[arg(required = true)]
        runbooks: Vec<String>,
    },
}

pub(crate) fn run_runbook(context: &Context, command: RunbookCommand) -> Result<(), CliError> {
    match command {
        RunbookCommand::List { listing } => list(
            context,
            "runbooks",
            &listing,
            Vec::new(),
            &["uuid", "name"],
            true,
        ),
        RunbookCommand::Show(showing) => show(context, "runbooks", &showing),
        RunbookCommand::Create {
            name,
            steps,
            uuid,
            public,
            owner,
            disable_ramdisk,
            extra,
        } => {
            let mut body = Map::new();
            body.insert("name".into(), json!(name));
            body.insert("steps".into(), read_steps(&steps)?);
            for (field, value) in [("uuid", uuid), ("owner", owner)] {
                if let Some(value) = value {
                    body.insert(field.into(), json!(value));
                }
            }
            if public {
                body.insert("public".into(), json!(true));
            }
            if disable_ramdisk {
                body.insert("disable_ramdisk".into(), json!(true));
            }
            insert_pairs(&mut body, "extra", &extra);
            create(context, "runbooks", body)
        }
        RunbookCommand::Delete { runbooks } => delete(context, "runbooks", "runbook", &runbooks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_a_json_list_inline_or_from_a_file() {
        let inline = read_steps(r#"[{"interface": "deploy", "step": "s", "order": 1}]"#).unwrap();
        assert_eq!(inline[0]["order"], 1);
        let dir = std::env::temp_dir().join(format!("ferric-steps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("steps.json");
        std::fs::write(&path, "[]").unwrap();
        assert_eq!(read_steps(path.to_str().unwrap()).unwrap(), json!([]));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            read_steps("{}")
                .unwrap_err()
                .to_string()
                .contains("JSON list")
        );
        assert!(
            read_steps("[")
                .unwrap_err()
                .to_string()
                .contains("must be JSON")
        );
    }
}
