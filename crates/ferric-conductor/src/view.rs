//! How the conductor sees a node: its record, its ports, and the driver interfaces built from
//! both. Every flow (through [`crate::task::Task`]) and `GET /v1/nodes/{node}/validate` read a
//! node through here, and a flow's start checks the interfaces [`checks_for`] names for it,
//! which validate reports on too: so validate cannot judge a node differently from the work
//! that follows (issue #27: validate once built the interfaces without the ports and called
//! every `ipxe` node's boot interface invalid).

use ferric_drivers::Interfaces;
use ferric_model::Event;
use ferric_model::resources::{Ident, InterfaceKind, Node, Port};
use uuid::Uuid;

use crate::{ConductorError, Inner};

/// The node's record and ports as stored now.
pub(crate) async fn read(inner: &Inner, node: Uuid) -> Result<(Node, Vec<Port>), ConductorError> {
    let record = inner.store.node_get(&Ident::Uuid(node)).await?;
    let ports = ports(inner, node).await?;
    Ok((record, ports))
}

/// The node's ports (network boot needs their MACs, the agent their list).
pub(crate) async fn ports(inner: &Inner, node: Uuid) -> Result<Vec<Port>, ConductorError> {
    Ok(inner
        .store
        .port_list(
            &ferric_db::PortFilter {
                node_uuid: Some(node),
                ..ferric_db::PortFilter::default()
            },
            &ferric_db::Page::all(),
        )
        .await?)
}

/// The interfaces `node` uses, knowing its `ports`, with the site's settings.
pub(crate) fn interfaces(
    inner: &Inner,
    node: &Node,
    ports: &[Port],
) -> Result<Interfaces, ConductorError> {
    Ok(inner.drivers.load_with_ports(node, ports)?)
}

/// The interfaces a request's start validates before anything is powered (validate reports
/// on each of them; a node valid there starts).
pub(crate) fn checks_for(event: Event) -> &'static [InterfaceKind] {
    match event {
        Event::Deploy | Event::Rebuild => &[
            InterfaceKind::Power,
            InterfaceKind::Deploy,
            InterfaceKind::Boot,
            InterfaceKind::Network,
        ],
        Event::Delete => &[InterfaceKind::Power],
        Event::Inspect => &[InterfaceKind::Inspect, InterfaceKind::Power],
        Event::Rescue | Event::Unrescue => &[InterfaceKind::Rescue],
        _ => &[],
    }
}
