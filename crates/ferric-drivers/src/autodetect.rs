//! The `autodetect` deploy interface (Ironic 2025.2 and later; Metal3's ironic-image makes it
//! the default): it deploys nothing itself but picks, per flow, the concrete deploy interface
//! the node's instance needs, from the site's `autodetect_deploy_interfaces` in order — the
//! first whose rule accepts the node, else the last one listed.
//!
//! The rules are Ironic's `supports_deploy`: `ramdisk` takes a node whose `instance_info`
//! carries `ironic_ramdisk_deploy: true` and either a `boot_iso` or a `kernel` and a
//! `ramdisk`; every other interface (`direct`, `custom-agent`) takes any node. Ferric has no
//! `bootc` interface, so a site that lists it is refused at start-up rather than having bootc
//! images written by `direct`.
//!
//! Architecture invariant: the choice is a pure function of the node and the settings, so
//! [`crate::Drivers::load`] resolves an `autodetect` node to the same concrete interface
//! wherever it is asked. The conductor additionally writes the choice into the node when a
//! flow starts (deploy, clean, service, tear-down, adopt: [`switch`]) and puts `autodetect`
//! back when cleaning or servicing ends ([`restore`]), with the original kept in
//! `driver_internal_info.original_deploy_interface`, exactly as Ironic shows it to clients.

use ferric_model::resources::Node;
use serde_json::Value;

use crate::DriverError;

/// The interface's name.
pub const AUTODETECT: &str = "autodetect";

/// `driver_internal_info` key holding the interface a flow switched away from.
pub const ORIGINAL_KEY: &str = "original_deploy_interface";

/// Ironic's default order, less `bootc` (which Ferric does not have).
pub const DEFAULT_ORDER: [&str; 2] = ["ramdisk", "direct"];

/// Whether deploy interface `name` takes `node`'s instance (Ironic's `supports_deploy`).
pub fn supports(name: &str, node: &Node) -> bool {
    match name {
        "ramdisk" => {
            let info = &node.instance_info;
            let set = |key: &str| {
                info.get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|value| !value.is_empty())
            };
            is_true(info.get("ironic_ramdisk_deploy"))
                && (set("boot_iso") || (set("kernel") && set("ramdisk")))
        }
        _ => true,
    }
}

/// `true`, or a string Ironic's `strutils.bool_from_string` reads as true.
fn is_true(value: Option<&Value>) -> bool {
    match value {
        Some(Value::Bool(value)) => *value,
        Some(Value::String(text)) => matches!(
            text.trim().to_ascii_lowercase().as_str(),
            "true" | "1" | "yes" | "y" | "on" | "t"
        ),
        _ => false,
    }
}

/// The interface `node` deploys with: the first of `candidates` that the node's type may
/// use and whose rule accepts the node, else the last usable one.
pub fn choose<'a>(
    node: &Node,
    candidates: &'a [String],
    usable: impl Fn(&str) -> bool,
) -> Result<&'a str, DriverError> {
    let usable: Vec<&'a str> = candidates
        .iter()
        .map(String::as_str)
        .filter(|name| usable(name))
        .collect();
    let Some(last) = usable.last() else {
        return Err(DriverError::invalid(
            "node.deploy_interface",
            format!(
                "Node {}: deploy interface autodetect found none of autodetect_deploy_interfaces \
                 ({}) usable by hardware type {}; list one the type supports and the site \
                 enables, or set the node's deploy_interface.",
                node.uuid,
                candidates.join(", "),
                node.driver
            ),
        ));
    };
    Ok(usable
        .iter()
        .copied()
        .find(|name| supports(name, node))
        .unwrap_or(last))
}

/// Checks the site's `autodetect_deploy_interfaces` against its enabled deploy interfaces.
pub fn check_order<S: AsRef<str>>(order: &[S], enabled: &[String]) -> Result<(), String> {
    if order.is_empty() {
        return Err(
            "autodetect_deploy_interfaces is empty; list at least one deploy \
                    interface, e.g. ramdisk, direct"
                .to_owned(),
        );
    }
    for name in order {
        let name = name.as_ref();
        if name == "bootc" {
            return Err(
                "autodetect_deploy_interfaces names 'bootc', which Ferric does not have (bootc \
                 images cannot be deployed); remove it (Ferric's default is ramdisk, direct)"
                    .to_owned(),
            );
        }
        if name == AUTODETECT {
            return Err("autodetect_deploy_interfaces cannot name autodetect itself".to_owned());
        }
        if !enabled.iter().any(|enabled| enabled == name) {
            return Err(format!(
                "Deploy interface '{name}' is configured in autodetect_deploy_interfaces but \
                 is not in enabled_deploy_interfaces ({}). Add '{name}' to \
                 enabled_deploy_interfaces or remove it from autodetect_deploy_interfaces.",
                enabled.join(", ")
            ));
        }
    }
    Ok(())
}

/// A flow starts on an `autodetect` node: write the concrete interface into it, keeping
/// `autodetect` in `driver_internal_info` (Ironic's `switch_interface`). Returns whether
/// the node changed (a node on a concrete interface is left alone).
pub fn switch(node: &mut Node, chosen: &str) -> bool {
    if node.deploy_interface.as_deref() != Some(AUTODETECT) {
        return false;
    }
    node.driver_internal_info
        .insert(ORIGINAL_KEY.to_owned(), Value::from(AUTODETECT));
    node.deploy_interface = Some(chosen.to_owned());
    true
}

/// Cleaning or servicing ended: the interface a flow switched away from comes back (Ironic's
/// `restore_interface`). Returns whether anything changed.
pub fn restore(node: &mut Node) -> bool {
    let Some(original) = node.driver_internal_info.remove(ORIGINAL_KEY) else {
        return false;
    };
    if let Some(original) = original.as_str().filter(|name| !name.is_empty()) {
        node.deploy_interface = Some(original.to_owned());
    }
    true
}

#[cfg(test)]
mod tests {
    use ferric_model::ProvisionState;
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn node(instance_info: Value) -> Node {
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Available);
        node.deploy_interface = Some(AUTODETECT.to_owned());
        node.instance_info = serde_json::from_value(instance_info).unwrap();
        node
    }

    fn order() -> Vec<String> {
        DEFAULT_ORDER.map(str::to_owned).to_vec()
    }

    #[test]
    fn ramdisk_needs_the_sentinel_and_an_iso_or_a_kernel_pair() {
        let all = |_: &str| true;
        let iso = node(json!({"boot_iso": "http://x/live.iso", "ironic_ramdisk_deploy": true}));
        assert_eq!(choose(&iso, &order(), all).unwrap(), "ramdisk");
        let pair = node(json!({"kernel": "k", "ramdisk": "r", "ironic_ramdisk_deploy": "True"}));
        assert_eq!(choose(&pair, &order(), all).unwrap(), "ramdisk");
        // Without the sentinel an ISO is an image to write, as in Ironic.
        let no_sentinel = node(json!({"boot_iso": "http://x/live.iso"}));
        assert_eq!(choose(&no_sentinel, &order(), all).unwrap(), "direct");
        let half = node(json!({"kernel": "k", "ironic_ramdisk_deploy": true}));
        assert_eq!(choose(&half, &order(), all).unwrap(), "direct");
        let disk = node(json!({"image_source": "http://x/disk.qcow2"}));
        assert_eq!(choose(&disk, &order(), all).unwrap(), "direct");
    }

    #[test]
    fn the_last_usable_one_is_the_fallback_and_none_usable_is_an_error() {
        let iso = node(json!({"boot_iso": "x", "ironic_ramdisk_deploy": true}));
        let no_ramdisk = |name: &str| name != "ramdisk";
        assert_eq!(choose(&iso, &order(), no_ramdisk).unwrap(), "direct");
        let only_ramdisk = |name: &str| name == "ramdisk";
        let disk = node(json!({"image_source": "http://x/disk.img"}));
        assert_eq!(choose(&disk, &order(), only_ramdisk).unwrap(), "ramdisk");
        let error = choose(&disk, &order(), |_| false).unwrap_err().to_string();
        assert!(
            error.contains("none of autodetect_deploy_interfaces"),
            "{error}"
        );
    }

    #[test]
    fn a_switch_is_undone_by_restore_and_only_autodetect_nodes_switch() {
        let mut switched = node(json!({}));
        assert!(switch(&mut switched, "direct"));
        assert_eq!(switched.deploy_interface.as_deref(), Some("direct"));
        assert_eq!(
            switched.driver_internal_info[ORIGINAL_KEY],
            json!("autodetect")
        );
        assert!(!switch(&mut switched, "ramdisk"), "already concrete");
        assert!(restore(&mut switched));
        assert_eq!(switched.deploy_interface.as_deref(), Some(AUTODETECT));
        assert!(!switched.driver_internal_info.contains_key(ORIGINAL_KEY));
        assert!(!restore(&mut switched));
        let mut direct = node(json!({}));
        direct.deploy_interface = Some("direct".to_owned());
        assert!(!switch(&mut direct, "ramdisk"));
    }

    #[test]
    fn the_order_must_be_enabled_and_cannot_name_bootc_or_itself() {
        let enabled: Vec<String> = ["direct", "ramdisk", "autodetect"]
            .map(str::to_owned)
            .to_vec();
        check_order(&["ramdisk", "direct"], &enabled).unwrap();
        let bootc = check_order(&["ramdisk", "bootc", "direct"], &enabled).unwrap_err();
        assert!(bootc.contains("'bootc'"), "{bootc}");
        assert!(check_order(&["autodetect"], &enabled).is_err());
        let custom = check_order(&["custom-agent"], &enabled).unwrap_err();
        assert!(
            custom.contains("not in enabled_deploy_interfaces"),
            "{custom}"
        );
        assert!(check_order::<&str>(&[], &enabled).is_err());
    }
}
