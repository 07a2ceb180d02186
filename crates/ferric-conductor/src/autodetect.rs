//! The conductor's side of the `autodetect` deploy interface ([`ferric_drivers::autodetect`]):
//! on the transitions that start a flow which may act through the deploy interface (deploy,
//! rebuild, tear-down, cleaning, servicing, adoption) an `autodetect` node is switched to the
//! interface picked for it, and on the transitions that end cleaning or servicing (done,
//! failed, aborted) it gets `autodetect` back — Ironic's `switch_interface` and
//! `restore_interface`, at the same points, so clients see the same `deploy_interface`. A
//! failed deployment keeps the concrete interface (a retry or a tear-down uses the one that
//! ran), as in Ironic.

use ferric_drivers::Drivers;
use ferric_drivers::autodetect::{restore, switch};
use ferric_model::ProvisionState;
use ferric_model::resources::Node;

/// Applies the switch or the restore that the transition `from` → `to` calls for. Returns a
/// line for the node's history when the deploy interface changed.
pub(crate) fn follow(
    drivers: &Drivers,
    node: &mut Node,
    from: ProvisionState,
    to: ProvisionState,
) -> Option<String> {
    use ProvisionState as S;
    let starts = matches!(
        to,
        S::Deploying | S::Deleting | S::Cleaning | S::Servicing | S::Adopting
    ) && !matches!(
        from,
        S::Deploying | S::Deleting | S::Cleaning | S::Servicing
    );
    if starts {
        // An error here (no usable interface) is the validation's to report: the drivers
        // resolve the same choice when the flow loads the node's interfaces.
        let chosen = drivers.autodetected(node).ok().flatten()?.to_owned();
        return switch(node, &chosen)
            .then(|| format!("Deploy interface autodetect switched to {chosen}"));
    }
    let ends = matches!(
        to,
        S::Available | S::Manageable | S::CleanFailed | S::ServiceFailed | S::AdoptFailed
    ) || (to == S::Active
        && matches!(from, S::Servicing | S::ServiceWait | S::ServiceHold));
    (ends && restore(node)).then(|| "Deploy interface restored to autodetect".to_owned())
}

#[cfg(test)]
mod tests {
    use ferric_drivers::InterfaceSettings;
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn drivers() -> Drivers {
        Drivers::default()
            .with_interfaces(InterfaceSettings::default())
            .unwrap()
    }

    #[test]
    fn a_deploy_switches_and_only_the_end_of_cleaning_restores() {
        use ProvisionState as S;
        let drivers = drivers();
        let mut node = Node::new(Uuid::nil(), "redfish", S::Available);
        node.deploy_interface = Some("autodetect".to_owned());
        node.instance_info = serde_json::from_value(json!({
            "boot_iso": "http://x/live.iso", "ironic_ramdisk_deploy": true
        }))
        .unwrap();
        let line = follow(&drivers, &mut node, S::Available, S::Deploying).unwrap();
        assert_eq!(line, "Deploy interface autodetect switched to ramdisk");
        assert_eq!(node.deploy_interface.as_deref(), Some("ramdisk"));
        // Waiting and finishing the deployment keep the concrete interface, as does a
        // failed one.
        assert_eq!(
            follow(&drivers, &mut node, S::Deploying, S::WaitCallBack),
            None
        );
        assert_eq!(
            follow(&drivers, &mut node, S::WaitCallBack, S::Active),
            None
        );
        assert_eq!(
            follow(&drivers, &mut node, S::Deploying, S::DeployFailed),
            None
        );
        assert_eq!(node.deploy_interface.as_deref(), Some("ramdisk"));
        // Tear-down and cleaning go on with it; the end of cleaning restores autodetect.
        assert_eq!(follow(&drivers, &mut node, S::Active, S::Deleting), None);
        assert_eq!(follow(&drivers, &mut node, S::Deleting, S::Cleaning), None);
        assert!(follow(&drivers, &mut node, S::CleanWait, S::Available).is_some());
        assert_eq!(node.deploy_interface.as_deref(), Some("autodetect"));
        // A disk image deploys with direct.
        node.instance_info =
            serde_json::from_value(json!({"image_source": "http://x/d.img"})).unwrap();
        follow(&drivers, &mut node, S::Available, S::Deploying).unwrap();
        assert_eq!(node.deploy_interface.as_deref(), Some("direct"));
    }

    #[test]
    fn servicing_restores_on_its_way_back_to_active_and_concrete_nodes_stay_put() {
        use ProvisionState as S;
        let drivers = drivers();
        let mut node = Node::new(Uuid::nil(), "redfish", S::Active);
        node.deploy_interface = Some("autodetect".to_owned());
        follow(&drivers, &mut node, S::Active, S::Servicing).unwrap();
        assert_eq!(node.deploy_interface.as_deref(), Some("direct"));
        assert!(follow(&drivers, &mut node, S::ServiceWait, S::Active).is_some());
        assert_eq!(node.deploy_interface.as_deref(), Some("autodetect"));
        let mut direct = Node::new(Uuid::nil(), "redfish", S::Available);
        direct.deploy_interface = Some("direct".to_owned());
        assert_eq!(
            follow(&drivers, &mut direct, S::Available, S::Deploying),
            None
        );
        assert_eq!(
            follow(&drivers, &mut direct, S::Cleaning, S::Available),
            None
        );
        assert_eq!(direct.deploy_interface.as_deref(), Some("direct"));
    }
}
