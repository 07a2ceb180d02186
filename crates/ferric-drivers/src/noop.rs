//! The no-op interfaces (`no-inspect`, `no-rescue`, `no-bios`, `no-firmware`, `no-vendor`,
//! `noop`, …): they accept nothing, so a request that needs them fails with Ironic's
//! UnsupportedDriverExtension, and `/validate` reports them as unsupported.

use async_trait::async_trait;
use ferric_model::resources::{InterfaceKind, JsonObject, Node};

use crate::DriverError;
use crate::interfaces::{
    BiosChange, BiosInterface, BiosValue, FirmwareInterface, FirmwareUpdate, InspectInterface,
    Inspection, Outcome, RaidInterface, RescueInterface, StepCall, StepDef, StepKind, Validate,
    VendorInterface, VendorMethod,
};

/// A no-op interface of `kind`.
#[derive(Debug, Clone, Copy)]
pub struct Noop {
    pub kind: InterfaceKind,
}

impl Noop {
    fn unsupported(&self, node: &Node) -> DriverError {
        DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: self.kind,
        }
    }
}

#[async_trait]
impl Validate for Noop {
    async fn validate(&self, node: &Node) -> Result<(), DriverError> {
        Err(self.unsupported(node))
    }
}

#[async_trait]
impl InspectInterface for Noop {
    async fn inspect(&self, node: &mut Node) -> Result<Inspection, DriverError> {
        Err(self.unsupported(node))
    }

    async fn abort(&self, node: &mut Node) -> Result<(), DriverError> {
        Err(self.unsupported(node))
    }
}

#[async_trait]
impl RescueInterface for Noop {
    async fn rescue(&self, node: &mut Node) -> Result<Outcome, DriverError> {
        Err(self.unsupported(node))
    }

    async fn unrescue(&self, node: &mut Node) -> Result<(), DriverError> {
        Err(self.unsupported(node))
    }

    async fn clean_up(&self, _node: &mut Node) -> Result<(), DriverError> {
        Ok(())
    }
}

/// An interface that exists only so the node can name it (`flat` network, `noop` storage):
/// it needs no settings and so always validates.
#[derive(Debug, Clone, Copy)]
pub struct Passive;

#[async_trait]
impl Validate for Passive {
    async fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[async_trait]
impl BiosInterface for Noop {
    fn steps(&self, _kind: StepKind) -> Vec<StepDef> {
        Vec::new()
    }

    async fn cache_settings(&self, node: &Node) -> Result<Vec<BiosValue>, DriverError> {
        Err(self.unsupported(node))
    }

    async fn apply_configuration(
        &self,
        node: &mut Node,
        _changes: &[BiosChange],
    ) -> Result<(), DriverError> {
        Err(self.unsupported(node))
    }

    async fn factory_reset(&self, node: &mut Node) -> Result<(), DriverError> {
        Err(self.unsupported(node))
    }
}

#[async_trait]
impl FirmwareInterface for Noop {
    fn steps(&self, _kind: StepKind) -> Vec<StepDef> {
        Vec::new()
    }

    async fn cache_components(&self, node: &Node) -> Result<Vec<(String, String)>, DriverError> {
        Err(self.unsupported(node))
    }

    async fn update(
        &self,
        node: &mut Node,
        _updates: &[FirmwareUpdate],
    ) -> Result<Outcome, DriverError> {
        Err(self.unsupported(node))
    }
}

#[async_trait]
impl RaidInterface for Noop {
    fn steps(&self, _kind: StepKind) -> Vec<StepDef> {
        Vec::new()
    }

    fn validate_target(&self, node: &Node, _target: &JsonObject) -> Result<(), DriverError> {
        Err(DriverError::invalid(
            "node.raid_interface",
            format!(
                "Node {} has raid_interface no-raid, which cannot build RAID: set raid_interface \
             to agent (Linux software RAID built by the agent ramdisk) first.",
                node.uuid
            ),
        ))
    }

    async fn execute_step(
        &self,
        node: &mut Node,
        _kind: StepKind,
        _step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        Err(self.unsupported(node))
    }
}

/// `no-vendor`: no methods, so every call is UnsupportedDriverExtension (400).
#[async_trait]
impl VendorInterface for Noop {
    fn methods(&self) -> &'static [VendorMethod] {
        &[]
    }

    async fn check_call(
        &self,
        node: &Node,
        _method: &VendorMethod,
        _args: &JsonObject,
    ) -> Result<(), DriverError> {
        Err(self.unsupported(node))
    }

    async fn call(
        &self,
        node: &mut Node,
        _method: &VendorMethod,
        _http_method: &str,
        _args: &JsonObject,
    ) -> Result<serde_json::Value, DriverError> {
        Err(self.unsupported(node))
    }
}
