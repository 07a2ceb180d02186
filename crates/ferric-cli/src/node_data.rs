//! `ferric node trait|vif|bios|inventory|vmedia …`: the node sub-resources that are data
//! rather than state (`/v1/nodes/{node}/traits`, `/vifs`, `/bios`, `/inventory`, `/vmedia`).

use clap::Subcommand;
use serde_json::{Value, json};

use crate::context::node_path;
use crate::output::Format;
use crate::{CliError, Context, emit, segment};

#[derive(Debug, Subcommand)]
pub(crate) enum TraitCommand {
    /// List a node's traits (GET /v1/nodes/{node}/traits, API 1.37).
    List {
        /// Name or UUID of the node.
        node: String,
    },
    /// Add traits (PUT /v1/nodes/{node}/traits/{trait}, once per trait).
    ///
    /// Example: `ferric node trait add n1 CUSTOM_GPU HW_CPU_X86_AVX2`.
    Add {
        /// Name or UUID of the node.
        node: String,
        #[arg(required = true, value_name = "TRAIT")]
        traits: Vec<String>,
    },
    /// Replace all of a node's traits (PUT /v1/nodes/{node}/traits).
    ///
    /// Example: `ferric node trait set n1 CUSTOM_GPU`.
    Set {
        /// Name or UUID of the node.
        node: String,
        #[arg(value_name = "TRAIT")]
        traits: Vec<String>,
    },
    /// Remove traits, or all of them with --all (DELETE /v1/nodes/{node}/traits[/{trait}]).
    ///
    /// Example: `ferric node trait remove n1 CUSTOM_GPU`.
    Remove {
        /// Name or UUID of the node.
        node: String,
        #[arg(value_name = "TRAIT", required_unless_present = "all")]
        traits: Vec<String>,
        /// Remove every trait.
        #[arg(long, conflicts_with = "traits")]
        all: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum VifCommand {
    /// List the VIFs attached to a node (GET /v1/nodes/{node}/vifs, API 1.28).
    List {
        /// Name or UUID of the node.
        node: String,
    },
    /// Attach a VIF to a free port or port group of the node (POST /v1/nodes/{node}/vifs).
    ///
    /// Example: `ferric node vif attach n1 4a0e4bd4-7c6d-4d0e-9e0e-5b0a4a3c1f00`.
    Attach {
        /// Name or UUID of the node.
        node: String,
        /// The VIF's id (a Neutron port UUID, or any name the network side uses).
        vif: String,
    },
    /// Detach a VIF (DELETE /v1/nodes/{node}/vifs/{vif}).
    Detach {
        /// Name or UUID of the node.
        node: String,
        vif: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum BiosCommand {
    /// List a node's BIOS settings, as the driver last read them (API 1.40).
    List {
        /// Name or UUID of the node.
        node: String,
        /// Every field of each setting (limits, allowed values, …; API 1.74).
        #[arg(long)]
        long: bool,
    },
    /// Show one BIOS setting.
    ///
    /// Example: `ferric node bios show n1 ProcVirtualization`.
    Show {
        /// Name or UUID of the node.
        node: String,
        setting: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum VmediaCommand {
    /// List the node's virtual media devices as its BMC reports them (GET
    /// /v1/nodes/{node}/vmedia, API 1.93).
    List {
        /// Name or UUID of the node.
        node: String,
    },
    /// Present an image as the node's virtual CD (or floppy, USB disk); the BMC fetches it
    /// (POST /v1/nodes/{node}/vmedia, API 1.89).
    ///
    /// Example: `ferric node vmedia attach n1 http://10.0.0.1:8080/images/live.iso`.
    Attach {
        /// Name or UUID of the node.
        node: String,
        /// The http(s) URL the BMC fetches the image from.
        image_url: String,
        /// cdrom, floppy or disk.
        #[arg(long, default_value = "cdrom")]
        device_type: String,
    },
    /// Eject the node's virtual media (DELETE /v1/nodes/{node}/vmedia).
    ///
    /// Example: `ferric node vmedia detach n1 --device-type cdrom`.
    Detach {
        /// Name or UUID of the node.
        node: String,
        /// Only these kinds (repeatable; default: every kind).
        #[arg(long = "device-type", value_name = "TYPE")]
        device_types: Vec<String>,
    },
}

pub(crate) fn run_vmedia(context: &Context, command: VmediaCommand) -> Result<(), CliError> {
    let client = &context.client;
    match command {
        VmediaCommand::List { node } => {
            let answer = client.get(&format!("{}/vmedia", node_path(&node)), &[])?;
            let slots = answer
                .get("vmedia")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            context.show_list(&slots, None, &["device_type", "inserted", "image_url"])
        }
        VmediaCommand::Attach {
            node,
            image_url,
            device_type,
        } => {
            client.post(
                &format!("{}/vmedia", node_path(&node)),
                &json!({"device_type": device_type, "image_url": image_url}),
            )?;
            Ok(())
        }
        VmediaCommand::Detach { node, device_types } => {
            let query = if device_types.is_empty() {
                Vec::new()
            } else {
                vec![("device_types", device_types.join(","))]
            };
            client.send(
                reqwest::Method::DELETE,
                &format!("{}/vmedia", node_path(&node)),
                &query,
                None,
            )?;
            Ok(())
        }
    }
}

pub(crate) fn run_trait(context: &Context, command: TraitCommand) -> Result<(), CliError> {
    let client = &context.client;
    match command {
        TraitCommand::List { node } => {
            let answer = client.get(&format!("{}/traits", node_path(&node)), &[])?;
            let rows: Vec<Value> = answer
                .get("traits")
                .and_then(Value::as_array)
                .map(|traits| traits.iter().map(|name| json!({"trait": name})).collect())
                .unwrap_or_default();
            context.show_list(&rows, None, &["trait"])
        }
        TraitCommand::Add { node, traits } => {
            for name in traits {
                let path = format!("{}/traits/{}", node_path(&node), segment(&name));
                client.send(reqwest::Method::PUT, &path, &[], None)?;
            }
            Ok(())
        }
        TraitCommand::Set { node, traits } => {
            let path = format!("{}/traits", node_path(&node));
            client.put(&path, &json!({ "traits": traits }))?;
            Ok(())
        }
        TraitCommand::Remove { node, traits, all } => {
            if all {
                client.delete(&format!("{}/traits", node_path(&node)))?;
            }
            for name in traits {
                client.delete(&format!("{}/traits/{}", node_path(&node), segment(&name)))?;
            }
            Ok(())
        }
    }
}

pub(crate) fn run_vif(context: &Context, command: VifCommand) -> Result<(), CliError> {
    let client = &context.client;
    match command {
        VifCommand::List { node } => {
            let answer = client.get(&format!("{}/vifs", node_path(&node)), &[])?;
            let vifs = answer
                .get("vifs")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            context.show_list(&vifs, None, &["id"])
        }
        VifCommand::Attach { node, vif } => {
            client.post(&format!("{}/vifs", node_path(&node)), &json!({ "id": vif }))?;
            Ok(())
        }
        VifCommand::Detach { node, vif } => {
            client.delete(&format!("{}/vifs/{}", node_path(&node), segment(&vif)))?;
            Ok(())
        }
    }
}

pub(crate) fn run_bios(context: &Context, command: BiosCommand) -> Result<(), CliError> {
    let client = &context.client;
    match command {
        BiosCommand::List { node, long } => {
            let query = if long {
                vec![("detail", "true".to_owned())]
            } else {
                Vec::new()
            };
            let settings =
                client.list(&format!("{}/bios", node_path(&node)), "bios", &query, None)?;
            let defaults: &[&str] = if long { &[] } else { &["name", "value"] };
            context.show_list(&settings, None, defaults)
        }
        BiosCommand::Show { node, setting } => {
            let path = format!("{}/bios/{}", node_path(&node), segment(&setting));
            let answer = client.get(&path, &[])?;
            // `{"<name>": {…}}`: show the setting itself.
            let record = answer.get(&setting).cloned().unwrap_or(answer);
            context.show(&record, None)
        }
    }
}

/// `GET /v1/nodes/{node}/inventory` (API 1.81): the hardware inventory and plugin data
/// inspection stored. It is a deep document, so a table would only hold two JSON cells: it is
/// shown as JSON unless YAML is asked for.
pub(crate) fn inventory(context: &Context, node: &str) -> Result<(), CliError> {
    let answer = context
        .client
        .get(&format!("{}/inventory", node_path(node)), &[])?;
    let format = match context.format {
        Format::Yaml => Format::Yaml,
        Format::Json | Format::Table => Format::Json,
    };
    emit(&crate::output::record(format, &answer, None)?)
}
