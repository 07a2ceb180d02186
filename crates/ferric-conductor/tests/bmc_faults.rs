//! BMC faults at scale: 1,000 `redfish` nodes on the in-process simulator
//! (`ferric_drivers::simulator`), 10% of them with an injected fault (slow past the read
//! timeout, no answer, HTTP 500, or a body that is not JSON). The other 90% finish manage →
//! provide → power on and power sync passes; the faulty ones show their fault (`last_error`
//! naming the BMC and the problem; maintenance with `fault: power failure` after failed power
//! syncs) and recover once their BMC does.

use std::collections::HashMap;
use std::time::Duration;

use ferric_conductor::{Conductor, ConductorConfig, ProvisionArgs};
use ferric_db::testing::TestDb;
use ferric_db::{NodeFilter, Page, Store};
use ferric_drivers::simulator::{Fault, RedfishSimulator};
use ferric_drivers::{BmcSettings, Drivers, PowerAction};
use ferric_model::resources::{Node, PowerState};
use ferric_model::{ProvisionState, Verb};
use uuid::Uuid;

const NODES: usize = 1_000;
const SYSTEMS_PER_BMC: usize = 10;

/// Every tenth node is faulty, the four kinds in turn.
fn fault_of(index: usize) -> Option<Fault> {
    if !index.is_multiple_of(10) {
        return None;
    }
    Some(match (index / 10) % 4 {
        0 => Fault::Delay(Duration::from_secs(6)),
        1 => Fault::Drop,
        2 => Fault::ServerError,
        _ => Fault::Garbage,
    })
}

/// What `last_error` must say about each kind of fault.
fn fault_words(fault: Fault) -> &'static str {
    match fault {
        Fault::Delay(_) | Fault::Drop => "no answer within",
        Fault::ServerError => "HTTP 500",
        Fault::Garbage => "not a JSON document",
    }
}

struct Fleet {
    _db: TestDb,
    store: Store,
    simulator: RedfishSimulator,
    conductor: Conductor,
    /// Node uuid by simulator index.
    nodes: Vec<Uuid>,
}

impl Fleet {
    async fn start() -> Fleet {
        let db = TestDb::sqlite().await;
        let store = db.store.clone();
        let simulator = RedfishSimulator::start(NODES, SYSTEMS_PER_BMC)
            .await
            .expect("start the BMC simulator");
        let mut nodes = Vec::with_capacity(NODES);
        for index in 0..NODES {
            let mut node = Node::new(Uuid::new_v4(), "redfish", ProvisionState::Enroll);
            node.name = Some(format!("node-{index}"));
            node.driver_info = simulator.driver_info(index);
            nodes.push(store.node_create(&node).await.expect("create a node").uuid);
        }
        // Short timeouts and one retry: a faulty BMC costs a few seconds per request. The read
        // timeout leaves room for a loaded machine (1,000 simulated BMCs share the test's
        // runtime): at 300 ms a BMC answering HTTP 500 was once read as not answering.
        let bmc = BmcSettings {
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(2),
            retries: 1,
            retry_backoff: Duration::from_millis(10),
            max_requests_per_bmc: SYSTEMS_PER_BMC,
            power_state_change_timeout: Duration::from_secs(10),
            power_state_poll_interval: Duration::from_millis(20),
            ..BmcSettings::default()
        };
        let config = ConductorConfig {
            hostname: "faults".to_owned(),
            periodic: false,
            automated_clean: false,
            workers: NODES + 10,
            power_sync_max_per_bmc: SYSTEMS_PER_BMC,
            power_sync_timeout: Duration::from_secs(10),
            ..ConductorConfig::default()
        };
        let conductor = Conductor::new(
            store.clone(),
            Drivers::default().with_bmc_settings(bmc),
            config,
        );
        conductor.start().await.expect("start the conductor");
        Fleet {
            _db: db,
            store,
            simulator,
            conductor,
            nodes,
        }
    }

    async fn by_index(&self) -> Vec<Node> {
        let mut all: HashMap<Uuid, Node> = self
            .store
            .node_list(&NodeFilter::default(), &Page::all())
            .await
            .expect("list nodes")
            .into_iter()
            .map(|node| (node.uuid, node))
            .collect();
        self.nodes
            .iter()
            .map(|uuid| all.remove(uuid).expect("every node is listed"))
            .collect()
    }

    async fn provision(&self, indexes: &[usize], verb: Verb) {
        for &index in indexes {
            self.conductor
                .provision(self.nodes[index], verb, ProvisionArgs::default())
                .await
                .unwrap_or_else(|error| panic!("{verb:?} node-{index}: {error}"));
        }
        self.conductor.wait_idle().await;
    }

    async fn power_on(&self, indexes: &[usize]) {
        for &index in indexes {
            self.conductor
                .set_power(self.nodes[index], PowerAction::On, None)
                .await
                .unwrap_or_else(|error| panic!("power on node-{index}: {error}"));
        }
        self.conductor.wait_idle().await;
    }

    async fn power_sync(&self) {
        self.conductor
            .run_reconciler("power_sync")
            .await
            .expect("a power sync pass");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faulty_bmcs_on_ten_percent_of_a_thousand_nodes() {
    let fleet = Fleet::start().await;
    let faulty: Vec<usize> = (0..NODES).filter(|i| fault_of(*i).is_some()).collect();
    let healthy: Vec<usize> = (0..NODES).filter(|i| fault_of(*i).is_none()).collect();
    assert_eq!(faulty.len(), NODES / 10);
    for &index in &faulty {
        fleet.simulator.set_fault(index, fault_of(index));
    }

    // manage: the healthy nodes are verified, the faulty ones go back to enroll saying why.
    let all: Vec<usize> = (0..NODES).collect();
    fleet.provision(&all, Verb::Manage).await;
    let nodes = fleet.by_index().await;
    for &index in &healthy {
        let node = &nodes[index];
        assert_eq!(
            node.provision_state,
            ProvisionState::Manageable,
            "node-{index}"
        );
        assert_eq!(node.power_state, Some(PowerState::Off), "node-{index}");
        assert_eq!(node.last_error, None, "node-{index}");
    }
    for &index in &faulty {
        let node = &nodes[index];
        let fault = fault_of(index).expect("faulty");
        assert_eq!(node.provision_state, ProvisionState::Enroll, "node-{index}");
        let error = node.last_error.as_deref().unwrap_or_default();
        assert!(
            error.contains(&fleet.simulator.address(index)) && error.contains(fault_words(fault)),
            "node-{index} ({fault:?}): last_error {error:?}"
        );
    }

    // The healthy 90% finish their workflow: provide, then power on.
    fleet.provision(&healthy, Verb::Provide).await;
    fleet.power_on(&healthy).await;
    let nodes = fleet.by_index().await;
    for &index in &healthy {
        let node = &nodes[index];
        assert_eq!(
            node.provision_state,
            ProvisionState::Available,
            "node-{index}"
        );
        assert_eq!(node.power_state, Some(PowerState::On), "node-{index}");
        assert!(fleet.simulator.powered_on(index), "node-{index}");
    }

    // The faulty BMCs are repaired: the same workflow now succeeds for their nodes.
    for &index in &faulty {
        fleet.simulator.set_fault(index, None);
    }
    fleet.provision(&faulty, Verb::Manage).await;
    fleet.provision(&faulty, Verb::Provide).await;
    fleet.power_on(&faulty).await;
    let nodes = fleet.by_index().await;
    for (index, node) in nodes.iter().enumerate() {
        assert_eq!(
            node.provision_state,
            ProvisionState::Available,
            "node-{index}"
        );
        assert_eq!(node.power_state, Some(PowerState::On), "node-{index}");
    }

    // Faults again while nodes rest; someone also powers off a few healthy machines by hand.
    for &index in &faulty {
        fleet.simulator.set_fault(index, fault_of(index));
    }
    let switched_off: Vec<usize> = healthy.iter().copied().filter(|i| i % 10 == 5).collect();
    for &index in &switched_off {
        fleet.simulator.set_powered_on(index, false);
    }
    let retries = fleet.conductor.config().power_state_sync_max_retries;
    for _ in 0..retries {
        fleet.power_sync().await;
    }
    let nodes = fleet.by_index().await;
    for &index in &faulty {
        let node = &nodes[index];
        let fault = fault_of(index).expect("faulty");
        assert!(
            node.maintenance,
            "node-{index} ({fault:?}) is in maintenance"
        );
        assert_eq!(node.fault.as_deref(), Some("power failure"), "node-{index}");
        let error = node.last_error.as_deref().unwrap_or_default();
        assert!(
            error.contains(&fleet.simulator.address(index)) && error.contains(fault_words(fault)),
            "node-{index} ({fault:?}): last_error {error:?}"
        );
    }
    for &index in &healthy {
        let node = &nodes[index];
        assert!(!node.maintenance, "node-{index}");
        let expected = if switched_off.contains(&index) {
            PowerState::Off
        } else {
            PowerState::On
        };
        assert_eq!(node.power_state, Some(expected), "node-{index}");
    }

    // The BMCs recover: one pass takes their nodes out of maintenance.
    for &index in &faulty {
        fleet.simulator.set_fault(index, None);
    }
    fleet.power_sync().await;
    let nodes = fleet.by_index().await;
    for &index in &faulty {
        let node = &nodes[index];
        assert!(!node.maintenance, "node-{index} left maintenance");
        assert_eq!(node.fault, None, "node-{index}");
        assert_eq!(node.power_state, Some(PowerState::On), "node-{index}");
    }
    fleet.conductor.shutdown(Duration::from_secs(5)).await;
}
