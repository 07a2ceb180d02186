//! Telling the compute service that a deployed node's power changed (Ironic's
//! `nova.power_update`): after a power action ends and after a power sync records a state the
//! BMC reports, a node that holds an instance (`instance_uuid`) is announced to the
//! [`PowerEvents`] receiver the process installed ([`crate::Conductor::set_power_events`]; the
//! `ferric` binary installs Nova's `power-update` sender when Keystone is configured). The
//! conductor never waits for the answer: a receiver that cannot deliver logs it, as Ironic does.

use std::sync::{Arc, RwLock};

use ferric_model::resources::{Node, PowerState};
use uuid::Uuid;

/// Receives power changes of nodes that hold an instance.
pub trait PowerEvents: Send + Sync + std::fmt::Debug {
    /// `instance` (the node's `instance_uuid`) is now in `state` (`power on` or `power off`);
    /// returns at once, delivery happens in the background.
    fn power_changed(&self, node: Uuid, instance: Uuid, state: PowerState);
}

/// The receiver installed, if any.
#[derive(Debug, Default)]
pub(crate) struct Receiver(RwLock<Option<Arc<dyn PowerEvents>>>);

impl Receiver {
    pub(crate) fn set(&self, events: Arc<dyn PowerEvents>) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(events);
    }

    /// Announces `node`'s power state, if it holds an instance and the state is on or off
    /// (Ironic sends nothing for other states).
    pub(crate) fn announce(&self, node: &Node) {
        let (Some(instance), Some(state)) = (node.instance_uuid, node.power_state) else {
            return;
        };
        if !matches!(state, PowerState::On | PowerState::Off) {
            return;
        }
        let receiver = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(receiver) = receiver {
            receiver.power_changed(node.uuid, instance, state);
        }
    }
}
