//! Telling the compute service that a deployed node's power changed (Ironic's
//! `nova.power_update`): when a power action ends and after a power sync records a state the
//! BMC reports, a node that holds an instance (`instance_uuid`) is announced to the
//! [`PowerEvents`] receiver the process installed ([`crate::Conductor::set_power_events`]; the
//! `ferric` binary installs Nova's `power-update` sender when Keystone is configured).
//!
//! A power action's event is delivered *before* its result is saved and the lease released,
//! as Ironic calls Nova inside the power action: Nova ignores an event while an action of its
//! own is under way on the server, and it learns that its action ended only from the saved
//! result, so the event of its own reboot can never reach it after the action and be taken for
//! a change behind its back. (Delivered later, under load, the `POWER_ON` of a reboot once
//! arrived after the next `server stop` had ended, and Nova powered the server on again.) The
//! wait is bounded by [`DELIVERY_BOUND`]; a receiver that cannot deliver logs it, as Ironic does.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ferric_model::resources::{Node, PowerState};
use uuid::Uuid;

/// The longest a power action waits for its event to be delivered; past it the delivery goes
/// on in the background and the action ends.
pub const DELIVERY_BOUND: Duration = Duration::from_secs(10);

/// A delivery under way.
pub type Delivery = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Receives power changes of nodes that hold an instance.
pub trait PowerEvents: Send + Sync + std::fmt::Debug {
    /// `instance` (the node's `instance_uuid`) is now in `state` (`power on` or `power off`);
    /// the returned future ends when the event is delivered or given up (it logs which).
    fn power_changed(&self, node: Uuid, instance: Uuid, state: PowerState) -> Delivery;
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
    /// (Ironic sends nothing for other states), and waits until it is delivered, at most
    /// [`DELIVERY_BOUND`] (then the delivery finishes in the background).
    pub(crate) async fn announce(&self, node: &Node) {
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
            let mut delivery = tokio::spawn(receiver.power_changed(node.uuid, instance, state));
            if tokio::time::timeout(DELIVERY_BOUND, &mut delivery)
                .await
                .is_err()
            {
                tracing::warn!(
                    node = %node.uuid,
                    %instance,
                    "the power event is not delivered after {} s; the action ends, its delivery goes on",
                    DELIVERY_BOUND.as_secs()
                );
            }
        }
    }
}
