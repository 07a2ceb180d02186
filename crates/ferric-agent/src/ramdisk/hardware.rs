//! Loading only the drivers whose hardware is present (issue #23: loading every packed driver
//! was the largest stage of a boot that Ferric controls).
//!
//! `ferric ramdisk build` writes `/etc/modules.hardware`, a shell fragment the ramdisk's
//! `/init` sources: `hardware_modules MODALIAS` adds to `$wanted` the packed modules (each with
//! its dependencies) whose patterns in the kernel's `modules.alias` match a device's
//! `modalias`, and `$always` names the modules no device asks for (file systems, software
//! RAID, `sd_mod`, the IPMI device interface), which load on every machine. The patterns are
//! the kernel's own globs, matched by the shell's `case` as `modprobe` matches them with
//! fnmatch. Only the buses `/init` scans are kept: PCI, virtio (the devices `virtio_pci`
//! creates), ACPI (the power button, an ACPI-described BMC) and platform (`ipmi_si` on a
//! server whose SMBIOS describes its BMC). `ferric.modules=all` on the kernel command line
//! loads every packed module instead, for a machine whose device was not matched.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::RamdiskError;
use super::modules::{ModuleTree, module_name};

/// Where the fragment goes inside the initramfs.
pub(super) const HARDWARE_FILE: &str = "etc/modules.hardware";

/// The buses whose devices' `modalias` `/init` matches, in the order it scans them.
pub const BUSES: &[&str] = &["pci", "virtio", "acpi", "platform"];

/// A packed module that loads when a device on `bus` matches one of its patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub bus: &'static str,
    pub module: String,
    pub patterns: Vec<String>,
    /// The module with its dependencies, in load order.
    pub load: Vec<String>,
}

/// Which requested modules load by device and which always.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HardwareModules {
    pub matched: Vec<Matched>,
    /// Modules (with dependencies, in load order) that load whatever the hardware.
    pub always: Vec<String>,
}

impl HardwareModules {
    /// Sorts the requested modules (`wanted`) by the aliases of `modules_alias` (the text of
    /// the kernel's `modules.alias`; empty when it is missing, and then every module loads
    /// always, as before this existed).
    pub fn new(
        tree: &ModuleTree,
        modules_alias: &str,
        wanted: &[&str],
    ) -> Result<Self, RamdiskError> {
        let wanted_names: BTreeSet<String> = wanted.iter().map(|name| module_name(name)).collect();
        // (bus, module) → patterns, in the file's order.
        let mut patterns: Vec<(&'static str, String, Vec<String>)> = Vec::new();
        for line in modules_alias.lines() {
            let mut fields = line.split_whitespace();
            let (Some("alias"), Some(pattern), Some(module), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let module = module_name(module);
            if !wanted_names.contains(&module) {
                continue;
            }
            let prefix = pattern
                .split(':')
                .next()
                .unwrap_or("")
                .trim_end_matches('*');
            let Some(bus) = BUSES.iter().find(|bus| **bus == prefix) else {
                continue;
            };
            match patterns
                .iter_mut()
                .find(|(b, m, _)| b == bus && *m == module)
            {
                Some((_, _, list)) => list.push(pattern.to_owned()),
                None => patterns.push((bus, module, vec![pattern.to_owned()])),
            }
        }
        let mut hardware = Self::default();
        let mut always_seen = BTreeSet::new();
        for name in wanted {
            let name = module_name(name);
            let load: Vec<String> = tree
                .resolve(&[name.as_str()])?
                .into_iter()
                .map(|(module, _)| module)
                .collect();
            if load.is_empty() {
                // Built into the kernel: nothing to load.
                continue;
            }
            let mut by_device = false;
            for (bus, _, list) in patterns.iter().filter(|(_, module, _)| *module == name) {
                by_device = true;
                if !hardware
                    .matched
                    .iter()
                    .any(|m| m.module == name && m.bus == *bus)
                {
                    hardware.matched.push(Matched {
                        bus,
                        module: name.clone(),
                        patterns: list.clone(),
                        load: load.clone(),
                    });
                }
            }
            if !by_device {
                for module in load {
                    if always_seen.insert(module.clone()) {
                        hardware.always.push(module);
                    }
                }
            }
        }
        hardware
            .matched
            .sort_by_key(|m| BUSES.iter().position(|bus| *bus == m.bus));
        Ok(hardware)
    }

    /// The modules that load only when their device is there.
    pub fn by_device(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for matched in &self.matched {
            if !names.contains(&matched.module) {
                names.push(matched.module.clone());
            }
        }
        names
    }

    /// The shell fragment `/init` sources.
    pub fn script(&self) -> String {
        let mut script = String::from(
            "# /etc/modules.hardware of the Ferric agent ramdisk, written by `ferric ramdisk build`\n\
             # from the kernel's modules.alias: `hardware_modules MODALIAS` adds the modules a\n\
             # device asks for (with their dependencies) to $wanted; $always load on every machine.\n",
        );
        let _ = writeln!(script, "always=\"{}\"", self.always.join(" "));
        script.push_str("hardware_modules() {\n  case \"$1\" in\n");
        for bus in BUSES {
            let on_bus: Vec<&Matched> = self.matched.iter().filter(|m| m.bus == *bus).collect();
            if on_bus.is_empty() {
                continue;
            }
            let _ = writeln!(script, "  {bus}:*)");
            for matched in on_bus {
                let globs: Vec<String> = matched.patterns.iter().map(|p| shell_glob(p)).collect();
                let _ = writeln!(
                    script,
                    "    case \"$1\" in {}) wanted=\"$wanted {}\" ;; esac",
                    globs.join("|"),
                    matched.load.join(" ")
                );
            }
            script.push_str("    ;;\n");
        }
        script.push_str("  esac\n}\n");
        script
    }
}

/// A `modules.alias` pattern as a shell `case` pattern: `*`, `?` and bracket expressions
/// stay globs, everything else is quoted.
fn shell_glob(pattern: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut in_brackets = false;
    for c in pattern.chars() {
        match c {
            '[' => in_brackets = true,
            ']' => in_brackets = false,
            _ => {}
        }
        // A bracket expression's members stay as they are (kernel aliases hold letters and
        // digits there).
        let glob = in_brackets || matches!(c, '*' | '?' | ']');
        if glob && quoted {
            out.push('\'');
            quoted = false;
        } else if !glob && !quoted {
            out.push('\'');
            quoted = true;
        }
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    if quoted {
        out.push('\'');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_keep_their_globs_and_quote_the_rest() {
        assert_eq!(
            shell_glob("pci:v00008086d000010D3sv*sd*bc*sc*i*"),
            "'pci:v00008086d000010D3sv'*'sd'*'bc'*'sc'*'i'*"
        );
        assert_eq!(shell_glob("acpi*:PNP0C0C:*"), "'acpi'*':PNP0C0C:'*");
        assert_eq!(
            shell_glob("dmi*:svn[Dd]ell's*"),
            "'dmi'*':svn'[Dd]'ell'\\''s'*"
        );
    }
}
