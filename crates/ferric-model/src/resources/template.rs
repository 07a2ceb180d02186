//! Deploy templates (`reference/ironic.md` §2.7, API 1.55) and runbooks (API 1.92): named,
//! stored step lists. A deploy template whose name is one of a node's `instance_info.traits`
//! adds its steps to that node's deployment; a runbook is a manual clean or service step list
//! a node may run when one of its traits is the runbook's name.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::JsonObject;

/// The interfaces whose steps a template or runbook may name (Ironic's
/// `DEPLOYING_INTERFACE_PRIORITY` / `CLEANING_INTERFACE_PRIORITY` keys).
pub const STEP_INTERFACES: [&str; 7] = [
    "bios",
    "deploy",
    "firmware",
    "management",
    "power",
    "raid",
    "vendor",
];

/// One step of a deploy template: it runs at `priority` among the deployment's steps
/// (higher first); priority 0 disables the driver's step of the same name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployStep {
    pub interface: String,
    pub step: String,
    pub args: JsonObject,
    pub priority: u32,
}

/// One step of a runbook: steps run in ascending `order`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunbookStep {
    pub interface: String,
    pub step: String,
    pub args: JsonObject,
    pub order: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeployTemplate {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    /// A trait name (`CUSTOM_…` or a standard trait), unique.
    pub name: String,
    pub steps: Vec<DeployStep>,
    pub extra: JsonObject,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl DeployTemplate {
    pub fn new(uuid: Uuid) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            name: String::new(),
            steps: Vec::new(),
            extra: JsonObject::new(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Runbook {
    pub id: i64,
    pub version: i64,
    pub uuid: Uuid,
    /// Unique. Below API 1.112 it is a trait name, and a node may run the runbook when it has
    /// that trait.
    pub name: String,
    /// From API 1.112: a node may run the runbook when it has one of these traits.
    pub traits: Vec<String>,
    pub description: Option<String>,
    pub steps: Vec<RunbookStep>,
    /// Usable and visible by every project; a public runbook has no owner.
    pub public: bool,
    /// The project that owns the runbook (`None`: the system's).
    pub owner: Option<String>,
    /// Run the steps without booting the ramdisk.
    pub disable_ramdisk: bool,
    pub extra: JsonObject,
    pub created_at: DateTime<Utc>,
    pub updated_at: Option<DateTime<Utc>>,
}

impl Runbook {
    pub fn new(uuid: Uuid) -> Self {
        Self {
            id: 0,
            version: 0,
            uuid,
            name: String::new(),
            traits: Vec::new(),
            description: None,
            steps: Vec::new(),
            public: false,
            owner: None,
            disable_ramdisk: false,
            extra: JsonObject::new(),
            created_at: DateTime::<Utc>::UNIX_EPOCH,
            updated_at: None,
        }
    }

    /// The steps in the order they run (ascending `order`; equal orders keep their place).
    pub fn ordered_steps(&self) -> Vec<RunbookStep> {
        let mut steps = self.steps.clone();
        steps.sort_by_key(|step| step.order);
        steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, order: u32) -> RunbookStep {
        RunbookStep {
            interface: "deploy".into(),
            step: name.into(),
            args: JsonObject::new(),
            order,
        }
    }

    #[test]
    fn runbook_steps_run_in_ascending_order_stably() {
        let mut runbook = Runbook::new(Uuid::new_v4());
        runbook.steps = vec![step("c", 5), step("a", 1), step("b", 5), step("z", 0)];
        let names: Vec<String> = runbook
            .ordered_steps()
            .into_iter()
            .map(|step| step.step)
            .collect();
        assert_eq!(names, ["z", "a", "c", "b"]);
    }
}
