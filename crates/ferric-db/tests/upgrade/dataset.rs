//! The canonical dataset: every kind of record Ferric stores, written through the Store API
//! (`populate`), and everything the Store API can read back as one JSON document (`read_all`).
//!
//! A new migration that adds a table or a column adds to `populate` here (so its fixture holds
//! data there) and to `read_all` (so the check reads it).

use chrono::{Duration, TimeZone, Utc};
use ferric_db::{
    AllocationFilter, ConductorFilter, InspectionRuleFilter, Introspection, IntrospectionRule,
    NodeFilter, Page, PortFilter, PortgroupFilter, RunbookFilter, Store, VolumeFilter,
};
use ferric_model::ProvisionState;
use ferric_model::resources::{
    Allocation, AllocationState, BiosSetting, Chassis, DeployStep, DeployTemplate, InspectionRule,
    JsonObject, Node, NodeHistoryEntry, Port, Portgroup, PowerState, Runbook, RunbookStep,
    VolumeConnector, VolumeTarget,
};
use serde_json::{Value, json};
use uuid::Uuid;

/// Stable UUIDs, so a fixture's records are recognisable: kind in the high bits, a number in
/// the low ones.
fn id(kind: u128, n: u128) -> Uuid {
    Uuid::from_u128((kind << 96) | n)
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

/// Writes the dataset into an empty, fully migrated store.
pub(crate) async fn populate(store: &Store) {
    let mut chassis = Chassis::new(id(1, 1));
    chassis.description = Some("rack 4 — ünïcode".to_owned());
    chassis.extra = object(json!({"row": 4}));
    let chassis = store.chassis_create(&chassis).await.unwrap();

    store
        .conductor_register(
            "conductor-a",
            "rack4",
            &["redfish".to_owned(), "ipmi".to_owned()],
        )
        .await
        .unwrap();
    store
        .conductor_register("conductor-b", "", &["fake-hardware".to_owned()])
        .await
        .unwrap();
    store.conductor_unregister("conductor-b").await.unwrap();

    // One node in every provision state, each with a different mix of fields set.
    let at = |hour| Utc.with_ymd_and_hms(2026, 3, 1, hour, 30, 15).unwrap();
    let mut nodes = Vec::new();
    for (n, state) in ProvisionState::ALL.into_iter().enumerate() {
        let mut node = Node::new(id(2, n as u128), "redfish", state);
        node.name = Some(format!("node-{n:02}"));
        node.driver_info = object(json!({
            "redfish_address": format!("https://10.0.0.{n}"),
            "redfish_password": "s3cret",
        }));
        node.properties = object(json!({"cpus": 8 + n, "memory_mb": 16384, "local_gb": 100}));
        node.power_state = Some([PowerState::On, PowerState::Off, PowerState::Error][n % 3]);
        node.provision_updated_at = Some(at(n as u32 % 24));
        node.resource_class = Some(if n % 2 == 0 { "large" } else { "small" }.to_owned());
        node.traits = vec![format!("CUSTOM_T{}", n % 4)];
        node.conductor_group = if n % 3 == 0 { "rack4" } else { "" }.to_owned();
        if n % 5 == 0 {
            node.chassis_uuid = Some(chassis.uuid);
            node.maintenance = true;
            node.maintenance_reason = Some("fan".to_owned());
            node.last_error = Some(format!("error {n}"));
        }
        if n % 7 == 0 {
            node.instance_uuid = Some(id(3, n as u128));
            node.instance_info = object(json!({"image_source": "http://img/x.qcow2"}));
            node.driver_internal_info = object(json!({"agent_url": "http://10.1.0.9:9999"}));
            node.clean_step = object(json!({"step": "erase_devices", "priority": 10}));
            node.deploy_step = object(json!({"step": "write_image", "interface": "deploy"}));
            node.target_provision_state = Some(ProvisionState::Active);
            node.target_power_state = Some(PowerState::On);
        }
        if n == 1 {
            fill_every_optional_field(&mut node, at(3));
        }
        nodes.push(store.node_create(&node).await.unwrap());
    }
    let node = |n: usize| nodes[n].uuid;

    // Ports and portgroups: a bonded pair on node 1, a plain port on a few others.
    let mut portgroup = Portgroup::new(id(4, 1), node(1));
    portgroup.name = Some("bond0".to_owned());
    portgroup.address = Some("52:54:00:00:01:00".to_owned());
    portgroup.mode = Some("802.3ad".to_owned());
    portgroup.properties = object(json!({"miimon": "100"}));
    portgroup.extra = object(json!({"switch": "sw1"}));
    portgroup.standalone_ports_supported = false;
    portgroup.physical_network = Some("physnet1".to_owned());
    store.portgroup_create(&portgroup).await.unwrap();
    for (n, node_index) in [(1, 1), (2, 1), (3, 2), (4, 3), (5, 10)] {
        let mut port = Port::new(
            id(5, n),
            node(node_index),
            format!("52:54:00:00:00:{n:02x}"),
        );
        if node_index == 1 {
            port.portgroup_uuid = Some(portgroup.uuid);
            port.local_link_connection =
                object(json!({"switch_id": "aa:bb:cc:dd:ee:ff", "port_id": format!("Eth1/{n}")}));
            port.physical_network = Some("physnet1".to_owned());
        }
        port.pxe_enabled = n != 2;
        port.name = Some(format!("port-{n}"));
        port.internal_info = object(json!({"tenant_vif_port_id": format!("vif-{n}")}));
        store.port_create(&port).await.unwrap();
    }

    // A lease held and history entries.
    store
        .node_lease_acquire(
            node(10),
            "conductor-a",
            std::time::Duration::from_secs(3600),
        )
        .await
        .unwrap();
    for n in 0..3i64 {
        store
            .node_history_add(&NodeHistoryEntry {
                uuid: id(6, n as u128),
                node: node(5),
                created_at: at(1) + Duration::seconds(n),
                severity: if n == 1 { "ERROR" } else { "INFO" }.to_owned(),
                event_type: "provisioning".to_owned(),
                event: format!("event {n}"),
                conductor: Some("conductor-a".to_owned()),
                user: (n == 0).then(|| "admin".to_owned()),
            })
            .await
            .unwrap();
    }

    // Migration 0002: allocations, BIOS settings, inventories.
    let mut allocation = Allocation::new(id(7, 1));
    allocation.name = Some("alloc-1".to_owned());
    allocation.node_uuid = Some(node(6));
    allocation.state = AllocationState::Active;
    allocation.resource_class = Some("large".to_owned());
    allocation.traits = vec!["CUSTOM_T2".to_owned()];
    allocation.candidate_nodes = vec![node(6).to_string()];
    allocation.extra = object(json!({"team": "ml"}));
    allocation.owner = Some("project-a".to_owned());
    store.allocation_create(&allocation).await.unwrap();
    let mut failed = Allocation::new(id(7, 2));
    failed.state = AllocationState::Error;
    failed.last_error = Some("no available node matches".to_owned());
    failed.resource_class = Some("gpu".to_owned());
    store.allocation_create(&failed).await.unwrap();
    let settings =
        [("ProcVirtualization", Some("Enabled")), ("BootMode", None)].map(|(name, value)| {
            BiosSetting {
                name: name.to_owned(),
                value: value.map(str::to_owned),
                registry: object(json!({"attribute_type": "Enumeration", "read_only": false})),
                created_at: Utc::now(),
                updated_at: None,
            }
        });
    store.node_bios_set(node(2), &settings, None).await.unwrap();
    store
        .node_inventory_set(
            node(2),
            &object(json!({"cpu": {"count": 8, "architecture": "x86_64"}, "disks": []})),
            &object(json!({"root_disk": {"name": "/dev/sda"}})),
            None,
        )
        .await
        .unwrap();

    // Migration 0003: firmware components (one flashed since it was first seen).
    let versions = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(component, version)| ((*component).to_owned(), (*version).to_owned()))
            .collect()
    };
    store
        .node_firmware_set(
            node(2),
            &versions(&[("bios", "1.0"), ("bmc", "2.1")]),
            &[],
            None,
        )
        .await
        .unwrap();
    store
        .node_firmware_set(
            node(2),
            &versions(&[("bios", "1.2")]),
            &["bios".to_owned()],
            None,
        )
        .await
        .unwrap();

    // Migration 0004: a hand-off request answered, one waiting, and an abort flag.
    // Far in the future: a claim takes only requests whose caller still waits.
    let deadline = Utc.with_ymd_and_hms(2099, 1, 1, 0, 0, 0).unwrap();
    let answered = store
        .conductor_request_create("conductor-a", node(3), r#"{"action":"power"}"#, deadline)
        .await
        .unwrap();
    store
        .conductor_request_claim("conductor-a")
        .await
        .unwrap()
        .unwrap();
    store
        .conductor_request_reply(answered, r#"{"status":202}"#)
        .await
        .unwrap();
    store
        .conductor_request_create("conductor-a", node(4), r#"{"action":"provide"}"#, deadline)
        .await
        .unwrap();
    let aborted = store
        .node_get(&ferric_model::resources::Ident::Uuid(node(12)))
        .await
        .unwrap();
    assert!(
        store
            .node_abort_request_set(aborted.uuid, aborted.version, &[aborted.provision_state])
            .await
            .unwrap()
    );

    // Migration 0005: deploy templates and runbooks.
    let mut template = DeployTemplate::new(id(8, 1));
    template.name = "CUSTOM_HYPERTHREADING_ON".to_owned();
    template.steps = vec![DeployStep {
        interface: "bios".to_owned(),
        step: "apply_configuration".to_owned(),
        args: object(json!({"settings": [{"name": "LogicalProc", "value": "Enabled"}]})),
        priority: 150,
    }];
    template.extra = object(json!({"owner": "infra"}));
    store.deploy_template_create(&template).await.unwrap();
    let mut runbook = Runbook::new(id(9, 1));
    runbook.name = "CUSTOM_WIPE".to_owned();
    runbook.owner = Some("project-a".to_owned());
    runbook.public = true;
    runbook.disable_ramdisk = false;
    // Migration 0008: runbook traits and description (API 1.112).
    runbook.traits = vec!["CUSTOM_WIPE".to_owned(), "CUSTOM_SECURE_ERASE".to_owned()];
    runbook.description = Some("wipe the disks' metadata".to_owned());
    runbook.steps = vec![RunbookStep {
        interface: "deploy".to_owned(),
        step: "erase_devices_metadata".to_owned(),
        args: JsonObject::new(),
        order: 1,
    }];
    store.runbook_create(&runbook).await.unwrap();

    // Migration 0006: volume connectors and targets.
    let mut connector = VolumeConnector::new(id(10, 1), node(1));
    connector.connector_type = "iqn".to_owned();
    connector.connector_id = "iqn.2026-03.org.example:node-01".to_owned();
    connector.extra = object(json!({"note": "boot from volume"}));
    store.volume_connector_create(&connector).await.unwrap();
    let mut target = VolumeTarget::new(id(11, 1), node(1));
    target.volume_type = "iscsi".to_owned();
    target.boot_index = 0;
    target.volume_id = "vol-0001".to_owned();
    target.properties = object(json!({"target_iqn": "iqn.x", "auth_password": "p"}));
    store.volume_target_create(&target).await.unwrap();

    // Migration 0007: the inspection service's state — a finished introspection with its
    // data, one still waiting, and a rule.
    let started = Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap();
    store
        .introspection_upsert(&Introspection {
            node: node(5),
            state: "finished".to_owned(),
            manage_boot: true,
            macs: vec!["52:54:00:00:00:05".to_owned()],
            bmc_addresses: vec!["10.0.0.5".to_owned()],
            error: None,
            started_at: started,
            finished_at: Some(started + Duration::minutes(3)),
        })
        .await
        .unwrap();
    store
        .introspection_data_set(
            node(5),
            &object(json!({"inventory": {"cpu": {"count": 4}}})),
        )
        .await
        .unwrap();
    store
        .introspection_upsert(&Introspection {
            node: node(6),
            state: "waiting".to_owned(),
            manage_boot: false,
            macs: vec![],
            bmc_addresses: vec![],
            error: Some("first try timed out".to_owned()),
            started_at: started + Duration::minutes(10),
            finished_at: None,
        })
        .await
        .unwrap();
    store
        .introspection_rule_create(&IntrospectionRule {
            uuid: id(12, 1),
            description: Some("set the resource class".to_owned()),
            scope: Some("rack-1".to_owned()),
            conditions: vec![object(
                json!({"op": "ge", "field": "memory_mb", "value": 1024}),
            )],
            actions: vec![object(
                json!({"action": "set-attribute", "path": "/resource_class", "value": "big"}),
            )],
            created_at: started,
        })
        .await
        .unwrap();

    // Migration 0011: inspection rules (API 1.96).
    let mut rule = InspectionRule::new(id(13, 1));
    rule.description = Some("Dell BMCs speak Redfish".to_owned());
    rule.priority = 100;
    rule.sensitive = true;
    rule.conditions = vec![object(json!({
        "op": "contains",
        "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)dell"},
    }))];
    rule.actions = vec![object(json!({
        "op": "set-attribute",
        "args": ["{item[path]}", "{item[value]}"],
        "loop": [{"path": "/driver", "value": "redfish"}],
    }))];
    store.inspection_rule_create(&rule).await.unwrap();
}

fn introspection_json(introspection: Option<Introspection>) -> Value {
    introspection.map_or(Value::Null, |introspection| {
        json!({
            "state": introspection.state,
            "manage_boot": introspection.manage_boot,
            "macs": introspection.macs,
            "bmc_addresses": introspection.bmc_addresses,
            "error": introspection.error,
            "started_at": introspection.started_at,
            "finished_at": introspection.finished_at,
        })
    })
}

/// Sets every optional node field, so each column of the node table holds a value somewhere.
fn fill_every_optional_field(node: &mut Node, when: chrono::DateTime<Utc>) {
    node.description = Some("every field set".to_owned());
    node.extra = object(json!({"tags": ["a", "b"], "float": 1.5, "bool": true}));
    node.instance_name = Some("vm-1".to_owned());
    node.parent_node = Some(id(2, 0));
    node.allocation_uuid = Some(id(7, 99));
    node.console_enabled = true;
    node.fault = Some("power failure".to_owned());
    node.health = Some("OK".to_owned());
    node.protected = true;
    node.protected_reason = Some("prod".to_owned());
    node.retired = true;
    node.retired_reason = Some("old".to_owned());
    node.disable_power_off = true;
    node.automated_clean = Some(false);
    node.inspection_started_at = Some(when);
    node.inspection_finished_at = Some(when + Duration::minutes(5));
    node.service_step = object(json!({"step": "x"}));
    node.raid_config = object(json!({"logical_disks": [{"size_gb": 100}]}));
    node.target_raid_config = object(json!({"logical_disks": []}));
    node.network_data = object(json!({"links": [], "networks": [], "services": []}));
    node.boot_mode = Some("uefi".to_owned());
    node.secure_boot = Some(true);
    node.bios_interface = Some("redfish".to_owned());
    node.boot_interface = Some("ipxe".to_owned());
    node.deploy_interface = Some("direct".to_owned());
    node.power_interface = Some("redfish".to_owned());
    node.shard = Some("s1".to_owned());
    node.owner = Some("project-a".to_owned());
    node.lessee = Some("project-b".to_owned());
}

fn to_json<T: serde::Serialize>(records: &[T]) -> Value {
    serde_json::to_value(records).unwrap()
}

/// Everything the Store API reads, by kind, in a stable order.
pub(crate) async fn read_all(store: &Store) -> Value {
    let nodes = store
        .node_list(&NodeFilter::default(), &Page::all())
        .await
        .unwrap();
    let mut per_node = serde_json::Map::new();
    for node in &nodes {
        let uuid = node.uuid;
        let lease = store.node_lease_get(uuid).await.unwrap();
        let history = store.node_history_list(uuid).await.unwrap();
        let bios = store.node_bios_list(uuid).await.unwrap();
        let firmware = store.node_firmware_list(uuid).await.unwrap();
        let inventory = store.node_inventory_get(uuid).await.unwrap();
        let abort = store.node_abort_request_exists(uuid).await.unwrap();
        let introspection = store.introspection_get(uuid).await.unwrap();
        let introspection_data = store.introspection_data_get(uuid).await.unwrap();
        per_node.insert(
            uuid.to_string(),
            json!({
                "lease": lease,
                "history": history,
                "bios": bios,
                "firmware": firmware,
                "inventory": inventory,
                "abort_requested": abort,
                "introspection": introspection_json(introspection),
                "introspection_data": introspection_data,
            }),
        );
    }
    let mut requests = Vec::new();
    // Request ids are the table's sequence: a fixture holds a handful from 1 up.
    for request_id in 1..=32 {
        if let Some(request) = store.conductor_request_get(request_id).await.unwrap() {
            requests.push(json!({
                "id": request.id,
                "conductor": request.conductor,
                "node": request.node,
                "body": request.body,
                "created_at": request.created_at,
                "deadline": request.deadline,
                "claimed_at": request.claimed_at,
                "reply": request.reply,
            }));
        }
    }
    json!({
        "chassis": to_json(&store.chassis_list(&Page::all()).await.unwrap()),
        "conductors": to_json(&store.conductor_list(&ConductorFilter::default()).await.unwrap()),
        "nodes": to_json(&nodes),
        "node_data": per_node,
        "portgroups": to_json(
            &store.portgroup_list(&PortgroupFilter::default(), &Page::all()).await.unwrap()
        ),
        "ports": to_json(&store.port_list(&PortFilter::default(), &Page::all()).await.unwrap()),
        "allocations": to_json(
            &store.allocation_list(&AllocationFilter::default(), &Page::all()).await.unwrap()
        ),
        "conductor_requests": requests,
        "deploy_templates": to_json(&store.deploy_template_list(&Page::all()).await.unwrap()),
        "runbooks": to_json(
            &store.runbook_list(&RunbookFilter::default(), &Page::all()).await.unwrap()
        ),
        "inspection_rules": to_json(
            &store
                .inspection_rule_list(&InspectionRuleFilter::default(), &Page::all())
                .await
                .unwrap()
        ),
        "volume_connectors": to_json(
            &store.volume_connector_list(&VolumeFilter::default(), &Page::all()).await.unwrap()
        ),
        "volume_targets": to_json(
            &store.volume_target_list(&VolumeFilter::default(), &Page::all()).await.unwrap()
        ),
        "introspection_rules": store
            .introspection_rule_list()
            .await
            .unwrap()
            .into_iter()
            .map(|rule| json!({
                "uuid": rule.uuid,
                "description": rule.description,
                "scope": rule.scope,
                "conditions": rule.conditions,
                "actions": rule.actions,
                "created_at": rule.created_at,
            }))
            .collect::<Vec<_>>(),
    })
}
