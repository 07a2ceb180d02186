//! Partition images for the `direct` deploy interface (Ironic's `is_whole_disk_image`,
//! `parse_instance_info` and the `PARTITION_IMAGE_LABELS` of its agent deploy): whether a
//! node's `instance_info` asks for one, the checks on its layout (→ 400), and the fields the
//! agent's `image_info` gets for it (`root_mb`, `swap_mb`, `ephemeral_mb`,
//! `deploy_boot_mode`, `boot_option`, `disk_label`, …).
//!
//! Ironic deploys partition images with local boot only (the default since its netboot
//! removal), so `kernel` and `ramdisk` are optional: when `image_type` is not set, their
//! presence is what marks an image given by URL as a partition image.

use ferric_model::resources::{JsonObject, Node};
use serde_json::Value;

use crate::DriverError;
use crate::boot_mode::{self, capability};
use crate::interfaces::BootMode;

/// `instance_info` keys Ironic hands to the agent for a partition image.
const PASSED_ON: &[&str] = &["kernel", "ramdisk", "root_gb", "ephemeral_format"];

fn text<'a>(info: &'a JsonObject, key: &str) -> Option<&'a str> {
    info.get(key)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
}

/// Whether `instance_info` asks for a partition image: `image_type` says so, or, without it,
/// a `kernel` or `ramdisk` is given (Ironic's inference for images given by URL).
pub fn is_partition(node: &Node) -> Result<bool, DriverError> {
    let info = &node.instance_info;
    match info.get("image_type") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind.is_empty() => {}
        Some(Value::String(kind)) if kind == "whole-disk" => return Ok(false),
        Some(Value::String(kind)) if kind == "partition" => return Ok(true),
        Some(other) => {
            return Err(DriverError::invalid(
                "instance_info.image_type",
                format!(
                    "Node {}: instance_info image_type {other} is not one of whole-disk, \
                 partition; set it to partition for a root filesystem image, or remove it for \
                 a whole-disk image.",
                    node.uuid
                ),
            ));
        }
    }
    Ok(text(info, "kernel").is_some() || text(info, "ramdisk").is_some())
}

/// A whole number from `instance_info` (a JSON number or its text, as Ironic's `int()`).
fn whole(node: &Node, key: &str, unit: &str) -> Result<Option<u64>, DriverError> {
    let invalid = |shown: String| {
        DriverError::invalid(
            format!("instance_info.{key}"),
            format!(
                "Node {}: instance_info {key} {shown} is not a whole number of {unit}.",
                node.uuid
            ),
        )
    };
    match node.instance_info.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(number)) => number
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(number.to_string())),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(Value::String(text)) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| invalid(format!("\"{text}\""))),
        Some(other) => Err(invalid(other.to_string())),
    }
}

fn truthy(value: Option<&Value>) -> Option<bool> {
    match value? {
        Value::Bool(flag) => Some(*flag),
        Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
            "1" | "t" | "true" | "on" | "y" | "yes" => Some(true),
            "0" | "f" | "false" | "off" | "n" | "no" | "" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The fields a partition image adds to the agent's `image_info`, after checking the layout.
pub fn image_info_fields(node: &Node) -> Result<JsonObject, DriverError> {
    let root_gb = whole(node, "root_gb", "GiB")?.ok_or_else(|| {
        DriverError::missing(
            "instance_info.root_gb",
            format!(
                "Node {} deploys a partition image and needs instance_info root_gb, the size of \
             its root partition in GiB.",
                node.uuid
            ),
        )
    })?;
    if root_gb == 0 {
        return Err(DriverError::invalid(
            "instance_info.root_gb",
            format!(
                "Node {}: instance_info root_gb must be at least 1 for a partition image.",
                node.uuid
            ),
        ));
    }
    let swap_mb = whole(node, "swap_mb", "MiB")?.unwrap_or(0);
    let ephemeral_gb = whole(node, "ephemeral_gb", "GiB")?.unwrap_or(0);
    if ephemeral_gb > 0 {
        // TODO-compat: ephemeral partitions (ferric-agent has no mkfs for ephemeral_format).
        return Err(DriverError::invalid(
            "instance_info.ephemeral_gb",
            format!(
                "Node {}: Ferric does not create ephemeral partitions yet; set instance_info \
             ephemeral_gb to 0 or remove it.",
                node.uuid
            ),
        ));
    }
    let preserve = node.instance_info.get("preserve_ephemeral");
    let preserve_ephemeral = truthy(preserve).ok_or_else(|| {
        DriverError::invalid(
            "instance_info.preserve_ephemeral",
            format!(
                "Node {}: instance_info preserve_ephemeral {} is not a boolean.",
                node.uuid,
                preserve.map(Value::to_string).unwrap_or_default()
            ),
        )
    });
    let preserve_ephemeral = match preserve {
        None | Some(Value::Null) => false,
        Some(_) => preserve_ephemeral?,
    };
    if preserve_ephemeral {
        return Err(DriverError::invalid(
            "instance_info.preserve_ephemeral",
            format!(
                "Node {}: instance_info preserve_ephemeral is true, but Ferric makes no ephemeral \
             partition to preserve; set it to false.",
                node.uuid
            ),
        ));
    }
    let (mode, _) = boot_mode::boot_mode(node)?;
    let disk_label = match node
        .instance_info
        .get("capabilities")
        .and_then(|caps| capability(caps, "disk_label"))
    {
        Some(label) if label == "gpt" || label == "msdos" => Some(label),
        Some(label) => {
            return Err(DriverError::invalid(
                "instance_info.capabilities.disk_label",
                format!(
                    "Node {}: the disk_label capability \"{label}\" in instance_info capabilities \
                 is not gpt or msdos.",
                    node.uuid
                ),
            ));
        }
        // Ironic's get_disk_label: GPT for UEFI unless asked otherwise.
        None if mode == BootMode::Uefi => Some("gpt".to_owned()),
        None => None,
    };
    let mut fields = JsonObject::new();
    for key in PASSED_ON {
        if let Some(value) = node.instance_info.get(*key) {
            fields.insert((*key).into(), value.clone());
        }
    }
    fields.insert("image_type".into(), "partition".into());
    fields.insert("root_mb".into(), (root_gb * 1024).into());
    fields.insert("swap_mb".into(), swap_mb.into());
    fields.insert("ephemeral_mb".into(), 0.into());
    fields.insert("preserve_ephemeral".into(), false.into());
    fields.insert("deploy_boot_mode".into(), mode.as_str().into());
    fields.insert("boot_option".into(), "local".into());
    if let Some(label) = disk_label {
        fields.insert("disk_label".into(), label.into());
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use serde_json::json;
    use uuid::Uuid;

    fn node(info: Value) -> Node {
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Available);
        node.instance_info = info.as_object().cloned().unwrap_or_default();
        node
    }

    #[test]
    fn image_type_or_a_kernel_marks_a_partition_image() {
        for (info, partition) in [
            (json!({"image_source": "http://x/img"}), false),
            (json!({"image_type": "whole-disk", "kernel": "k"}), false),
            (json!({"image_type": "partition"}), true),
            (json!({"kernel": "http://x/vmlinuz"}), true),
            (json!({"ramdisk": "http://x/initrd"}), true),
            (json!({"image_type": "", "kernel": ""}), false),
        ] {
            assert_eq!(
                is_partition(&node(info.clone())).unwrap(),
                partition,
                "{info}"
            );
        }
        let error = is_partition(&node(json!({"image_type": "disk"}))).unwrap_err();
        assert!(error.is_caller_error());
        assert!(
            error.to_string().contains("whole-disk, partition"),
            "{error}"
        );
    }

    #[test]
    fn the_agent_gets_ironics_partition_fields() {
        let fields = image_info_fields(&node(json!({
            "image_type": "partition", "root_gb": "10", "swap_mb": 512,
            "kernel": "http://x/k", "capabilities": {"boot_mode": "uefi"},
        })))
        .unwrap();
        assert_eq!(fields["root_mb"], 10240);
        assert_eq!(fields["swap_mb"], 512);
        assert_eq!(fields["ephemeral_mb"], 0);
        assert_eq!(fields["deploy_boot_mode"], "uefi");
        assert_eq!(fields["disk_label"], "gpt");
        assert_eq!(fields["boot_option"], "local");
        assert_eq!(fields["kernel"], "http://x/k");
        let bios = image_info_fields(&node(json!({
            "root_gb": 4, "capabilities": "boot_mode:bios,disk_label:gpt",
        })))
        .unwrap();
        assert_eq!(bios["deploy_boot_mode"], "bios");
        assert_eq!(bios["disk_label"], "gpt");
        let mbr = image_info_fields(&node(
            json!({"root_gb": 4, "capabilities": "boot_mode:bios"}),
        ))
        .unwrap();
        assert!(!mbr.contains_key("disk_label"));
    }

    #[test]
    fn a_bad_layout_is_a_400_that_says_what_to_set() {
        for (info, says) in [
            (json!({}), "needs instance_info root_gb"),
            (json!({"root_gb": 0}), "at least 1"),
            (json!({"root_gb": "ten"}), "not a whole number of GiB"),
            (
                json!({"root_gb": 1, "swap_mb": -5}),
                "not a whole number of MiB",
            ),
            (
                json!({"root_gb": 1, "ephemeral_gb": 2}),
                "ephemeral_gb to 0",
            ),
            (
                json!({"root_gb": 1, "preserve_ephemeral": "maybe"}),
                "not a boolean",
            ),
            (
                json!({"root_gb": 1, "preserve_ephemeral": true}),
                "no ephemeral",
            ),
            (
                json!({"root_gb": 1, "capabilities": {"disk_label": "sun"}}),
                "not gpt or msdos",
            ),
        ] {
            let error = image_info_fields(&node(info.clone())).unwrap_err();
            assert!(error.is_caller_error(), "{info}");
            assert!(error.to_string().contains(says), "{info}: {error}");
        }
    }
}
