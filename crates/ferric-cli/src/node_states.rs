//! The provision verbs (`PUT /v1/nodes/{node}/states/provision`) and their `--wait`.

use clap::Args;
use serde_json::{Map, Value, json};

use crate::context::{node_path, summary_fields};
use crate::{CliError, Context, json_argument, wait};

/// The node and `--wait`, which every verb takes.
#[derive(Debug, Args)]
pub(crate) struct Plain {
    /// Name or UUID of the node.
    node: String,
    /// Follow the node until it rests (progress on stderr) and fail if it lands in a failed
    /// state; give up after SECONDS (no value or 0: never).
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "0")]
    wait: Option<u64>,
}

#[derive(Debug, Args)]
pub(crate) struct Deploy {
    #[command(flatten)]
    plain: Plain,
    /// A config drive: a URL, base64 gzipped ISO text, or a JSON object (meta_data,
    /// user_data, network_data) the conductor renders.
    #[arg(long, value_name = "DRIVE")]
    config_drive: Option<String>,
    /// Deploy steps as JSON (text, a file, or - for stdin), API 1.69.
    #[arg(long, value_name = "JSON")]
    deploy_steps: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct Clean {
    #[command(flatten)]
    plain: Plain,
    /// The clean steps as JSON (text, a file, or - for stdin), e.g.
    /// '[{"interface": "deploy", "step": "erase_devices_metadata"}]'.
    #[arg(long, value_name = "JSON", required_unless_present = "runbook")]
    clean_steps: Option<String>,
    /// Run this runbook's steps instead (name or UUID; the node needs a trait of its name;
    /// API 1.92).
    #[arg(long, value_name = "RUNBOOK", conflicts_with = "clean_steps")]
    runbook: Option<String>,
    /// Run the steps without booting the agent ramdisk (API 1.70).
    #[arg(long)]
    disable_ramdisk: bool,
}

#[derive(Debug, Args)]
pub(crate) struct Service {
    #[command(flatten)]
    plain: Plain,
    /// The service steps as JSON (text, a file, or - for stdin).
    #[arg(long, value_name = "JSON", required_unless_present = "runbook")]
    service_steps: Option<String>,
    /// Run this runbook's steps instead (name or UUID; the node needs a trait of its name;
    /// API 1.92).
    #[arg(long, value_name = "RUNBOOK", conflicts_with = "service_steps")]
    runbook: Option<String>,
    /// Run the steps without booting the agent ramdisk.
    #[arg(long)]
    disable_ramdisk: bool,
}

#[derive(Debug, Args)]
pub(crate) struct Rescue {
    #[command(flatten)]
    plain: Plain,
    /// The password of the rescue ramdisk's user.
    #[arg(long, value_name = "PASSWORD")]
    rescue_password: String,
}

/// Sends the verb `target` with `extra` fields in the body, then follows the node when asked.
pub(crate) fn provision(
    context: &Context,
    target: &str,
    args: &Plain,
    extra: Map<String, Value>,
) -> Result<(), CliError> {
    let mut body = extra;
    body.insert("target".into(), json!(target));
    let path = format!("{}/states/provision", node_path(&args.node));
    context.client.put(&path, &Value::Object(body))?;
    let Some(seconds) = args.wait else {
        return Ok(());
    };
    let node = wait::follow_provision(&context.client, &args.node, target, seconds)?;
    context.show(&node, Some(&summary_fields()))
}

pub(crate) fn deploy(context: &Context, target: &str, args: Deploy) -> Result<(), CliError> {
    let mut extra = Map::new();
    if let Some(drive) = args.config_drive {
        // A JSON object is rendered by the conductor; anything else is a URL or ISO text.
        let value = match serde_json::from_str::<Value>(&drive) {
            Ok(object @ Value::Object(_)) => object,
            _ => Value::String(drive),
        };
        extra.insert("configdrive".into(), value);
    }
    if let Some(steps) = args.deploy_steps {
        extra.insert(
            "deploy_steps".into(),
            json_argument("--deploy-steps", &steps)?,
        );
    }
    provision(context, target, &args.plain, extra)
}

pub(crate) fn clean(context: &Context, args: Clean) -> Result<(), CliError> {
    let mut extra = Map::new();
    if let Some(steps) = &args.clean_steps {
        extra.insert("clean_steps".into(), json_argument("--clean-steps", steps)?);
    }
    if let Some(runbook) = args.runbook {
        extra.insert("runbook".into(), json!(runbook));
    }
    if args.disable_ramdisk {
        extra.insert("disable_ramdisk".into(), json!(true));
    }
    provision(context, "clean", &args.plain, extra)
}

pub(crate) fn service(context: &Context, args: Service) -> Result<(), CliError> {
    let mut extra = Map::new();
    if let Some(steps) = &args.service_steps {
        extra.insert(
            "service_steps".into(),
            json_argument("--service-steps", steps)?,
        );
    }
    if let Some(runbook) = args.runbook {
        extra.insert("runbook".into(), json!(runbook));
    }
    if args.disable_ramdisk {
        extra.insert("disable_ramdisk".into(), json!(true));
    }
    provision(context, "service", &args.plain, extra)
}

pub(crate) fn rescue(context: &Context, args: Rescue) -> Result<(), CliError> {
    let mut extra = Map::new();
    extra.insert("rescue_password".into(), json!(args.rescue_password));
    provision(context, "rescue", &args.plain, extra)
}
