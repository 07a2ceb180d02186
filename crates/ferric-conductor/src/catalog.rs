//! What the API asks about a node's driver interfaces that touches no hardware and changes
//! nothing: the vendor methods it offers, and the raid interface's check of a target
//! configuration. They build the node's interfaces, so they run on the conductor (an
//! API-only process builds none); a process pinned to hand-off version 1 during a rolling
//! upgrade, whose conductors would not know these actions, runs them itself ([`run_here`]).

use ferric_db::Store;
use ferric_drivers::{Drivers, VendorMethod};
use ferric_model::action::{Action, ActionReply};
use ferric_model::resources::{Ident, JsonObject, Node};
use serde_json::Value;
use uuid::Uuid;

use crate::{Conductor, ConductorError};

/// The node's vendor methods, as `GET /v1/nodes/{node}/vendor_passthru/methods` lists them.
fn vendor_methods(drivers: &Drivers, node: &Node) -> Result<Value, ConductorError> {
    let interfaces = drivers.load(node)?;
    Ok(VendorMethod::listing(interfaces.vendor.methods(), true))
}

/// The raid interface's check of `target`; 400 with its words when it refuses.
fn validate_raid_target(
    drivers: &Drivers,
    node: &Node,
    target: &JsonObject,
) -> Result<(), ConductorError> {
    drivers
        .load(node)?
        .raid
        .validate_target(node, target)
        .map_err(|error| ConductorError::Invalid(error.to_string()))
}

/// Runs a [`Action::runs_anywhere`] action in this process.
pub(crate) async fn run_here(
    store: &Store,
    drivers: &Drivers,
    node: Uuid,
    action: &Action,
) -> Result<ActionReply, ConductorError> {
    let record = store.node_get(&Ident::Uuid(node)).await?;
    match action {
        Action::VendorMethods => Ok(ActionReply::Methods(vendor_methods(drivers, &record)?)),
        Action::ValidateRaidTarget { target } => {
            validate_raid_target(drivers, &record, target)?;
            Ok(ActionReply::Done)
        }
        other => Err(ConductorError::Remote(format!(
            "the {} request cannot run outside the node's conductor",
            other.name()
        ))),
    }
}

impl Conductor {
    /// The vendor methods of `node`'s vendor interface (no lease: a read of the catalog).
    pub async fn vendor_methods(&self, node: Uuid) -> Result<Value, ConductorError> {
        let record = self.inner.store.node_get(&Ident::Uuid(node)).await?;
        vendor_methods(&self.inner.drivers, &record)
    }

    /// Checks a target RAID configuration against `node`'s raid interface.
    pub async fn validate_raid_target(
        &self,
        node: Uuid,
        target: &JsonObject,
    ) -> Result<(), ConductorError> {
        let record = self.inner.store.node_get(&Ident::Uuid(node)).await?;
        validate_raid_target(&self.inner.drivers, &record, target)
    }
}
