//! Ironic's `[conductor]clean_step_priority_override`: the site gives automated cleaning's
//! steps — the driver's and the agent's alike — other priorities (`interface.step:priority`,
//! 0 takes a step out). Manual cleaning, which names its steps, is not touched.

use ferric_drivers::OfferedStep;
use ferric_model::resources::InterfaceKind;

/// One `interface.step:priority` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityOverride {
    pub interface: InterfaceKind,
    pub step: String,
    pub priority: u32,
}

impl PriorityOverride {
    /// Parses the setting's entries (`deploy.erase_devices:0`, …); the error names the entry
    /// and the form it must have.
    pub fn parse_all<S: AsRef<str>>(entries: &[S]) -> Result<Vec<Self>, String> {
        entries
            .iter()
            .flat_map(|entry| {
                let entry: &str = entry.as_ref();
                entry.split(',')
            })
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(Self::parse)
            .collect()
    }

    fn parse(entry: &str) -> Result<Self, String> {
        let malformed = |why: &str| {
            format!(
                "clean_step_priority_override entry \"{entry}\" {why}; write \
                 interface.step:priority, e.g. deploy.erase_devices_metadata:123"
            )
        };
        let (name, priority) = entry
            .rsplit_once(':')
            .ok_or_else(|| malformed("has no \":priority\""))?;
        let (interface, step) = name
            .split_once('.')
            .ok_or_else(|| malformed("names no \"interface.\""))?;
        let interface = InterfaceKind::from_name(interface.trim())
            .ok_or_else(|| malformed("names an unknown interface"))?;
        let priority = priority
            .trim()
            .parse()
            .map_err(|_| malformed("has a priority that is not a whole number of 0 or more"))?;
        let step = step.trim();
        if step.is_empty() {
            return Err(malformed("names no step"));
        }
        Ok(Self {
            interface,
            step: step.to_owned(),
            priority,
        })
    }
}

/// Gives the `offered` steps the priorities `overrides` name; a step offered by nobody is
/// left alone (the agent may offer it later).
pub(crate) fn apply(offered: &mut [OfferedStep], overrides: &[PriorityOverride]) {
    for step in offered {
        if let Some(found) = overrides
            .iter()
            .find(|o| o.interface == step.interface && o.step == step.step)
        {
            step.priority = found.priority;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(interface: InterfaceKind, step: &str, priority: u32) -> OfferedStep {
        OfferedStep {
            interface,
            step: step.to_owned(),
            priority,
            abortable: true,
            agent: None,
        }
    }

    #[test]
    fn entries_parse_and_override_the_offered_priorities() {
        let overrides = PriorityOverride::parse_all(&[
            "deploy.erase_devices:20, deploy.erase_devices_metadata:0",
            "management.reset_bios_to_default:5",
        ])
        .expect("valid entries");
        assert_eq!(overrides.len(), 3);
        let mut steps = vec![
            offered(InterfaceKind::Deploy, "erase_devices", 10),
            offered(InterfaceKind::Deploy, "erase_devices_metadata", 99),
            offered(InterfaceKind::Raid, "delete_configuration", 0),
        ];
        apply(&mut steps, &overrides);
        let priorities: Vec<u32> = steps.iter().map(|step| step.priority).collect();
        assert_eq!(priorities, [20, 0, 0]);
    }

    #[test]
    fn malformed_entries_are_named() {
        for (entry, why) in [
            ("deploy.erase_devices", "no \":priority\""),
            ("erase_devices:10", "no \"interface.\""),
            ("disk.erase_devices:10", "unknown interface"),
            ("deploy.erase_devices:-1", "not a whole number"),
            ("deploy.:10", "names no step"),
        ] {
            let error = PriorityOverride::parse_all(&[entry]).expect_err(entry);
            assert!(error.contains(entry) && error.contains(why), "{error}");
        }
        assert_eq!(PriorityOverride::parse_all::<&str>(&[]), Ok(Vec::new()));
    }
}
