//! Boot files per CPU architecture (Ironic's `deploy_kernel_by_arch`, `deploy_ramdisk_by_arch`
//! and `ipxe_bootfile_name_by_arch`), so one conductor provisions x86_64 and aarch64 machines
//! alike (Metal3 0.13+ provisions aarch64 hosts from an x86_64 control plane this way).
//!
//! The agent kernel and ramdisk of a node come, in order, from its `driver_info`
//! (`deploy_kernel`, `deploy_ramdisk`), from the `*_by_arch` settings under its
//! `properties.cpu_arch`, or from the site's `deploy_kernel`/`deploy_ramdisk`; an architecture
//! listed in only one of the two `*_by_arch` settings is refused as ambiguous, as Ironic does.
//! The first-stage iPXE loader DHCP hands a firmware PXE client is chosen by the architecture
//! the client announces (DHCP option 93), keyed `<arch>-<boot mode>` or `<arch>`
//! ([`loaders`]); a machine Ferric does not know (discovery) chooses its agent in its iPXE
//! script by iPXE's `${buildarch}`.

use std::collections::BTreeMap;

use ferric_model::resources::Node;
use serde_json::Value;

use crate::DriverError;
use crate::dhcp::Loaders;
use crate::settings::BootSettings;

/// An architecture → file map as Ironic's `DictOpt` writes it: `aarch64:a.kernel,x86_64:b`.
pub type ArchMap = BTreeMap<String, String>;

/// Parses `key:value,key:value` (spaces around items ignored; empty: no entries).
pub fn parse_map(setting: &str, text: &str) -> Result<ArchMap, String> {
    let mut map = ArchMap::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let Some((key, value)) = item.split_once(':') else {
            return Err(format!(
                "{setting}: {item:?} is not architecture:file (for example \
                 aarch64:agent-aarch64.kernel,x86_64:agent.kernel)"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() || value.is_empty() {
            return Err(format!(
                "{setting}: {item:?} lacks an architecture or a file"
            ));
        }
        if !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return Err(format!(
                "{setting}: {key:?} is not an architecture name (letters, digits, _ and -)"
            ));
        }
        if map.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(format!("{setting}: architecture {key} is listed twice"));
        }
    }
    Ok(map)
}

/// The node's `properties.cpu_arch`, if set.
fn cpu_arch(node: &Node) -> Option<&str> {
    node.properties
        .get("cpu_arch")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|arch| !arch.is_empty())
}

/// The agent kernel and ramdisk `node` boots: names under the boot file server's root or
/// URLs, not yet checked.
pub fn agent_files<'a>(
    settings: &'a BootSettings,
    node: &'a Node,
) -> Result<(&'a str, &'a str), DriverError> {
    let from_node = |key: &str| {
        node.driver_info
            .get(key)
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
    };
    let (by_arch_kernel, by_arch_ramdisk) = match cpu_arch(node) {
        Some(arch) => (
            settings.deploy_kernel_by_arch.get(arch),
            settings.deploy_ramdisk_by_arch.get(arch),
        ),
        None => (None, None),
    };
    let by_arch = match (by_arch_kernel, by_arch_ramdisk) {
        (Some(kernel), Some(ramdisk)) => Some((kernel.as_str(), ramdisk.as_str())),
        (None, None) => None,
        (kernel, _) => {
            let (solo, missing) = if kernel.is_some() {
                ("deploy_kernel_by_arch", "deploy_ramdisk_by_arch")
            } else {
                ("deploy_ramdisk_by_arch", "deploy_kernel_by_arch")
            };
            // Only a node that relies on the settings is affected.
            if from_node("deploy_kernel").is_none() || from_node("deploy_ramdisk").is_none() {
                return Err(DriverError::invalid(
                    format!("settings.{missing}"),
                    format!(
                        "{solo} has a value for {} servers, but {missing} has none. This \
                         configuration is ambiguous. Node {} cannot boot a ramdisk; list the \
                         architecture in both settings or in neither.",
                        cpu_arch(node).unwrap_or_default(),
                        node.uuid
                    ),
                ));
            }
            None
        }
    };
    let (default_kernel, default_ramdisk) =
        by_arch.unwrap_or((&settings.deploy_kernel, &settings.deploy_ramdisk));
    Ok((
        from_node("deploy_kernel").unwrap_or(default_kernel),
        from_node("deploy_ramdisk").unwrap_or(default_ramdisk),
    ))
}

/// iPXE's `${buildarch}` for a Linux/Ironic architecture name (they differ for ARM).
pub fn ipxe_buildarch(arch: &str) -> &str {
    match arch {
        "aarch64" => "arm64",
        "armv7l" | "armhf" => "arm32",
        other => other,
    }
}

/// The first-stage loaders from `ipxe_bootfile_name_by_arch`: `<arch>-<mode>` first, then
/// `<arch>`, then the built-in x86 loaders. An unknown key is refused (it would never be
/// used).
pub fn loaders(map: &ArchMap) -> Result<Loaders, String> {
    const KNOWN: [&str; 6] = [
        "x86_64",
        "x86_64-uefi",
        "x86_64-bios",
        "aarch64",
        "aarch64-uefi",
        "arm64",
    ];
    if let Some(unknown) = map.keys().find(|key| !KNOWN.contains(&key.as_str())) {
        return Err(format!(
            "ipxe_bootfile_name_by_arch: {unknown:?} is not an architecture DHCP can tell \
             apart; use one of {}",
            KNOWN.join(", ")
        ));
    }
    let pick = |keys: &[&str]| keys.iter().find_map(|key| map.get(*key).cloned());
    let built_in = Loaders::default();
    Ok(Loaders {
        x86_64_uefi: pick(&["x86_64-uefi", "x86_64"]).unwrap_or(built_in.x86_64_uefi),
        x86_64_bios: pick(&["x86_64-bios"]).unwrap_or(built_in.x86_64_bios),
        aarch64_uefi: pick(&["aarch64-uefi", "aarch64", "arm64"]),
    })
}

#[cfg(test)]
mod tests {
    use ferric_model::ProvisionState;
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn settings() -> BootSettings {
        BootSettings {
            deploy_kernel_by_arch: parse_map(
                "deploy_kernel_by_arch",
                "aarch64:agent-aa64.kernel, riscv64:agent-rv.kernel",
            )
            .unwrap(),
            deploy_ramdisk_by_arch: parse_map(
                "deploy_ramdisk_by_arch",
                "aarch64:agent-aa64.initrd",
            )
            .unwrap(),
            ..BootSettings::default()
        }
    }

    fn node(properties: Value, driver_info: Value) -> Node {
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Deploying);
        node.properties = serde_json::from_value(properties).unwrap();
        node.driver_info = serde_json::from_value(driver_info).unwrap();
        node
    }

    #[test]
    fn the_node_then_its_architecture_then_the_site_names_the_agent() {
        let settings = settings();
        let arm = node(json!({"cpu_arch": "aarch64"}), json!({}));
        assert_eq!(
            agent_files(&settings, &arm).unwrap(),
            ("agent-aa64.kernel", "agent-aa64.initrd")
        );
        let x86 = node(json!({"cpu_arch": "x86_64"}), json!({}));
        assert_eq!(
            agent_files(&settings, &x86).unwrap(),
            ("agent.kernel", "agent.ramdisk")
        );
        let unknown = node(json!({}), json!({}));
        assert_eq!(
            agent_files(&settings, &unknown).unwrap(),
            ("agent.kernel", "agent.ramdisk")
        );
        let own = node(
            json!({"cpu_arch": "aarch64"}),
            json!({"deploy_kernel": "mine.kernel"}),
        );
        assert_eq!(
            agent_files(&settings, &own).unwrap(),
            ("mine.kernel", "agent-aa64.initrd")
        );
    }

    #[test]
    fn an_architecture_with_only_a_kernel_is_ambiguous_unless_the_node_names_both() {
        let settings = settings();
        let riscv = node(json!({"cpu_arch": "riscv64"}), json!({}));
        let error = agent_files(&settings, &riscv).unwrap_err().to_string();
        assert!(
            error.contains("deploy_kernel_by_arch has a value for riscv64")
                && error.contains("ambiguous"),
            "{error}"
        );
        let both = node(
            json!({"cpu_arch": "riscv64"}),
            json!({"deploy_kernel": "k", "deploy_ramdisk": "r"}),
        );
        assert_eq!(agent_files(&settings, &both).unwrap(), ("k", "r"));
    }

    #[test]
    fn maps_parse_as_ironic_writes_them_and_refuse_nonsense() {
        let map = parse_map("x", " aarch64:a.efi ,x86_64-uefi:b.efi,").unwrap();
        assert_eq!(map["aarch64"], "a.efi");
        assert_eq!(map["x86_64-uefi"], "b.efi");
        assert!(parse_map("x", "").unwrap().is_empty());
        for bad in ["aarch64", "aarch64:", ":a", "a:1,a:2", "a b:c"] {
            assert!(parse_map("x", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn loaders_fall_back_from_arch_and_mode_to_arch_to_the_built_in_ones() {
        let built_in = loaders(&ArchMap::new()).unwrap();
        assert_eq!(built_in, Loaders::default());
        let map = parse_map("x", "aarch64:snp-arm64.efi,x86_64:ipxe.efi").unwrap();
        let chosen = loaders(&map).unwrap();
        assert_eq!(chosen.x86_64_uefi, "ipxe.efi");
        assert_eq!(chosen.x86_64_bios, crate::dhcp::BIOS_LOADER);
        assert_eq!(chosen.aarch64_uefi.as_deref(), Some("snp-arm64.efi"));
        let error = loaders(&parse_map("x", "ppc64le:x").unwrap()).unwrap_err();
        assert!(error.contains("ppc64le"), "{error}");
        assert_eq!(ipxe_buildarch("aarch64"), "arm64");
        assert_eq!(ipxe_buildarch("x86_64"), "x86_64");
    }
}
