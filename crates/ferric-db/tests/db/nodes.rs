//! Nodes: create, lookup by UUID and name, every field round-tripping, listing with paging,
//! sorting and filters, guarded updates, duplicates and cascading delete.

use std::time::Duration;

use chrono::{DateTime, FixedOffset, TimeZone, Utc};
use ferric_db::{
    Error, Kind, NODE_COLUMNS, NodeFilter, NodeHead, NodeSortKey, Page, SortDir, Store,
};
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, JsonObject, Node, NodeHistoryEntry, Port, PowerState};
use serde_json::json;
use uuid::Uuid;

use crate::harness::backend_tests;

backend_tests!(
    create_then_get_by_uuid_and_name,
    every_field_round_trips,
    listing_pages_through_every_node_once,
    listing_sorts_nullable_keys_with_nulls_last,
    listing_filters,
    guarded_update_lets_exactly_one_writer_win,
    duplicate_uuid_name_and_instance_are_refused,
    deleting_a_node_removes_its_ports_lease_and_history,
    unknown_marker_and_missing_node_are_reported,
    narrow_listings_match_the_whole_rows,
    state_counts_group_by_provision_and_power_state,
);

pub(crate) fn enrolled(name: &str) -> Node {
    let mut node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Enroll);
    node.name = Some(name.to_owned());
    node
}

fn object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

/// A time with a non-UTC offset and microseconds, as a client might send it.
fn at(hour: u32) -> DateTime<Utc> {
    let offset = FixedOffset::east_opt(5 * 3600 + 30 * 60).unwrap();
    let local = offset.with_ymd_and_hms(2025, 3, 14, hour, 15, 9).unwrap();
    (local + chrono::Duration::microseconds(123_456)).with_timezone(&Utc)
}

async fn create_then_get_by_uuid_and_name(store: Store) {
    let created = store.node_create(&enrolled("node-0")).await.unwrap();
    assert!(created.id > 0);
    assert_eq!(created.version, 1);
    assert!(created.updated_at.is_none());
    assert!(Utc::now() - created.created_at < chrono::Duration::minutes(1));

    let by_uuid = store.node_get(&Ident::Uuid(created.uuid)).await.unwrap();
    let by_name = store.node_get(&Ident::parse("node-0")).await.unwrap();
    assert_eq!(by_uuid, created);
    assert_eq!(by_name, created);
}

async fn every_field_round_trips(store: Store) {
    let chassis = store
        .chassis_create(&ferric_model::resources::Chassis::new(Uuid::new_v4()))
        .await
        .unwrap();
    let mut node = enrolled("full");
    node.description = Some("rack 4, slot 2 — ünïcode".to_owned());
    node.driver_info =
        object(json!({"redfish_address": "https://10.0.0.5", "redfish_password": "p"}));
    node.driver_internal_info = object(json!({"agent_url": "http://10.1.0.9:9999", "n": 3}));
    node.properties =
        object(json!({"cpus": 8, "memory_mb": 16384, "capabilities": "boot_mode:uefi"}));
    node.instance_info =
        object(json!({"image_source": "http://img/x.qcow2", "nested": {"a": [1, 2, null]}}));
    node.extra = object(json!({"tags": ["a", "b"], "float": 1.5, "bool": true}));
    node.instance_uuid = Some(Uuid::new_v4());
    node.instance_name = Some("vm-1".to_owned());
    node.chassis_uuid = Some(chassis.uuid);
    node.parent_node = Some(Uuid::new_v4());
    node.allocation_uuid = Some(Uuid::new_v4());
    node.provision_state = ProvisionState::WaitCallBack;
    node.target_provision_state = Some(ProvisionState::Active);
    node.provision_updated_at = Some(at(10));
    node.power_state = Some(PowerState::Off);
    node.target_power_state = Some(PowerState::On);
    node.last_error = Some("BMC said no".to_owned());
    node.console_enabled = true;
    node.fault = Some("power failure".to_owned());
    node.health = Some("OK".to_owned());
    node.maintenance = true;
    node.maintenance_reason = Some("fan".to_owned());
    node.protected = true;
    node.protected_reason = Some("prod".to_owned());
    node.retired = true;
    node.retired_reason = Some("old".to_owned());
    node.disable_power_off = true;
    node.automated_clean = Some(false);
    node.inspection_started_at = Some(at(8));
    node.inspection_finished_at = Some(at(9));
    node.clean_step = object(json!({"step": "erase_devices", "priority": 10}));
    node.deploy_step = object(json!({"step": "write_image", "interface": "deploy"}));
    node.service_step = object(json!({"step": "x"}));
    node.raid_config = object(json!({"logical_disks": [{"size_gb": 100}]}));
    node.target_raid_config = object(json!({"logical_disks": []}));
    node.network_data = object(json!({"links": [], "networks": [], "services": []}));
    node.boot_mode = Some("uefi".to_owned());
    node.secure_boot = Some(true);
    for (n, field) in [
        &mut node.bios_interface,
        &mut node.boot_interface,
        &mut node.console_interface,
        &mut node.deploy_interface,
        &mut node.firmware_interface,
        &mut node.inspect_interface,
        &mut node.management_interface,
        &mut node.network_interface,
        &mut node.power_interface,
        &mut node.raid_interface,
        &mut node.rescue_interface,
        &mut node.storage_interface,
        &mut node.vendor_interface,
    ]
    .into_iter()
    .enumerate()
    {
        *field = Some(format!("iface-{n}"));
    }
    node.resource_class = Some("baremetal.large".to_owned());
    node.conductor_group = "rack4".to_owned();
    node.shard = Some("s1".to_owned());
    node.owner = Some("project-a".to_owned());
    node.lessee = Some("project-b".to_owned());
    node.traits = vec!["CUSTOM_GPU".to_owned(), "HW_CPU_X86_VMX".to_owned()];

    let created = store.node_create(&node).await.unwrap();
    let stored = store.node_get(&Ident::Uuid(node.uuid)).await.unwrap();
    assert_eq!(stored, created);
    // Everything the caller set comes back; only the store's bookkeeping differs.
    let expected = Node {
        id: stored.id,
        version: 1,
        created_at: stored.created_at,
        ..node
    };
    assert_eq!(stored, expected);
    assert_eq!(stored.provision_updated_at, Some(at(10)));
    assert_eq!(
        stored
            .provision_updated_at
            .unwrap()
            .timestamp_subsec_micros(),
        123_456
    );
}

async fn create_named(store: &Store, count: usize) -> Vec<Node> {
    let mut nodes = Vec::new();
    for n in 0..count {
        nodes.push(
            store
                .node_create(&enrolled(&format!("n{n:03}")))
                .await
                .unwrap(),
        );
    }
    nodes
}

async fn all_pages(store: &Store, page: Page<NodeSortKey>) -> Vec<Node> {
    let mut listed: Vec<Node> = Vec::new();
    let mut page = page;
    loop {
        let batch = store
            .node_list(&NodeFilter::default(), &page)
            .await
            .unwrap();
        let full = batch.len() == page.limit.unwrap() as usize;
        listed.extend(batch);
        if !full {
            return listed;
        }
        page = page.after(listed.last().unwrap().uuid);
    }
}

async fn listing_pages_through_every_node_once(store: Store) {
    let nodes = create_named(&store, 23).await;
    let ids = |nodes: &[Node]| nodes.iter().map(|node| node.id).collect::<Vec<_>>();

    let forward = all_pages(&store, Page::first(5)).await;
    assert_eq!(ids(&forward), ids(&nodes));

    let backward = all_pages(
        &store,
        Page {
            sort_dir: SortDir::Desc,
            ..Page::first(4)
        },
    )
    .await;
    assert_eq!(
        ids(&backward),
        ids(&nodes).into_iter().rev().collect::<Vec<_>>()
    );

    // A non-id key with ties (every node shares a provision state): id breaks them.
    let by_state = Page {
        sort_key: NodeSortKey::ProvisionState,
        ..Page::first(6)
    };
    assert_eq!(ids(&all_pages(&store, by_state).await), ids(&nodes));

    let by_name = Page {
        sort_key: "name".parse().unwrap(),
        sort_dir: SortDir::Desc,
        ..Page::first(7)
    };
    let names: Vec<_> = all_pages(&store, by_name)
        .await
        .into_iter()
        .map(|n| n.name.unwrap())
        .collect();
    let mut expected: Vec<_> = nodes.iter().map(|n| n.name.clone().unwrap()).collect();
    expected.reverse();
    assert_eq!(names, expected);

    let everything = store
        .node_list(&NodeFilter::default(), &Page::all())
        .await
        .unwrap();
    assert_eq!(everything.len(), 23);
    assert!("properties".parse::<NodeSortKey>().is_err());
}

async fn listing_sorts_nullable_keys_with_nulls_last(store: Store) {
    // Owners: some set, some NULL, with ties, so every branch of the keyset condition runs.
    let owners = [
        None,
        Some("b"),
        Some("a"),
        None,
        Some("b"),
        Some("c"),
        None,
        Some("a"),
    ];
    let mut nodes = Vec::new();
    for (n, owner) in owners.iter().enumerate() {
        let mut node = enrolled(&format!("o{n}"));
        node.owner = owner.map(str::to_owned);
        nodes.push(store.node_create(&node).await.unwrap());
    }
    let mut expected: Vec<_> = nodes
        .iter()
        .map(|n| (n.owner.is_none(), n.owner.clone(), n.id))
        .collect();
    expected.sort();
    let expected_ids: Vec<_> = expected.iter().map(|(_, _, id)| *id).collect();

    for limit in [1, 2, 3, 8] {
        let asc = all_pages(
            &store,
            Page {
                sort_key: NodeSortKey::Owner,
                ..Page::first(limit)
            },
        )
        .await;
        assert_eq!(
            asc.iter().map(|n| n.id).collect::<Vec<_>>(),
            expected_ids,
            "asc, limit {limit}"
        );
        let desc = Page {
            sort_key: NodeSortKey::Owner,
            sort_dir: SortDir::Desc,
            ..Page::first(limit)
        };
        let desc = all_pages(&store, desc).await;
        let reversed: Vec<_> = expected_ids.iter().rev().copied().collect();
        assert_eq!(
            desc.iter().map(|n| n.id).collect::<Vec<_>>(),
            reversed,
            "desc, limit {limit}"
        );
    }
}

async fn listing_filters(store: Store) {
    let chassis = store
        .chassis_create(&ferric_model::resources::Chassis::new(Uuid::new_v4()))
        .await
        .unwrap();
    let mut a = enrolled("a");
    a.provision_state = ProvisionState::Available;
    a.provision_updated_at = Some(at(1));
    a.driver = "ipmi".to_owned();
    a.maintenance = true;
    a.owner = Some("p1".to_owned());
    a.conductor_group = "g1".to_owned();
    a.resource_class = Some("large".to_owned());
    a.fault = Some("power failure".to_owned());
    a.description = Some("Rack 7 100%_Done".to_owned());
    a.shard = Some("s1".to_owned());
    a.chassis_uuid = Some(chassis.uuid);
    let mut b = enrolled("b");
    b.provision_state = ProvisionState::Active;
    b.provision_updated_at = Some(at(5));
    b.instance_uuid = Some(Uuid::new_v4());
    b.lessee = Some("p1".to_owned());
    b.retired = true;
    b.shard = Some("s2".to_owned());
    b.parent_node = Some(a.uuid);
    let mut c = enrolled("c");
    c.owner = Some("p2".to_owned());
    c.description = Some("rack 8".to_owned());
    for node in [&a, &b, &c] {
        store.node_create(node).await.unwrap();
    }

    let names = async |filter: NodeFilter| {
        let nodes = store.node_list(&filter, &Page::all()).await.unwrap();
        nodes
            .into_iter()
            .map(|node| node.name.unwrap())
            .collect::<Vec<_>>()
    };
    let none = NodeFilter::default;
    assert_eq!(names(none()).await, ["a", "b", "c"]);
    assert_eq!(
        names(NodeFilter {
            provision_state: Some(ProvisionState::Active),
            ..none()
        })
        .await,
        ["b"]
    );
    assert_eq!(
        names(NodeFilter {
            provision_updated_before: Some(at(3)),
            ..none()
        })
        .await,
        ["a"]
    );
    assert_eq!(
        names(NodeFilter {
            maintenance: Some(true),
            ..none()
        })
        .await,
        ["a"]
    );
    assert_eq!(
        names(NodeFilter {
            maintenance: Some(false),
            ..none()
        })
        .await,
        ["b", "c"]
    );
    assert_eq!(
        names(NodeFilter {
            driver: Some("ipmi".into()),
            ..none()
        })
        .await,
        ["a"]
    );
    assert_eq!(
        names(NodeFilter {
            associated: Some(true),
            ..none()
        })
        .await,
        ["b"]
    );
    assert_eq!(
        names(NodeFilter {
            associated: Some(false),
            ..none()
        })
        .await,
        ["a", "c"]
    );
    assert_eq!(
        names(NodeFilter {
            instance_uuid: b.instance_uuid,
            ..none()
        })
        .await,
        ["b"]
    );
    assert_eq!(
        names(NodeFilter {
            owner: Some("p1".into()),
            ..none()
        })
        .await,
        ["a"]
    );
    assert_eq!(
        names(NodeFilter {
            lessee: Some("p1".into()),
            ..none()
        })
        .await,
        ["b"]
    );
    assert_eq!(
        names(NodeFilter {
            project: Some("p1".into()),
            ..none()
        })
        .await,
        ["a", "b"]
    );
    assert_eq!(
        names(NodeFilter {
            conductor_group: Some("g1".into()),
            ..none()
        })
        .await,
        ["a"]
    );
    assert_eq!(
        names(NodeFilter {
            conductor_group: Some(String::new()),
            ..none()
        })
        .await,
        ["b", "c"]
    );
    assert_eq!(
        names(NodeFilter {
            resource_class: Some("large".into()),
            ..none()
        })
        .await,
        ["a"]
    );
    assert_eq!(
        names(NodeFilter {
            fault: Some("power failure".into()),
            ..none()
        })
        .await,
        ["a"]
    );
    assert_eq!(
        names(NodeFilter {
            chassis_uuid: Some(chassis.uuid),
            ..none()
        })
        .await,
        ["a"]
    );
    assert_eq!(
        names(NodeFilter {
            retired: Some(true),
            ..none()
        })
        .await,
        ["b"]
    );
    assert_eq!(
        names(NodeFilter {
            description_contains: Some("RACK".into()),
            ..none()
        })
        .await,
        ["a", "c"]
    );
    assert_eq!(
        names(NodeFilter {
            description_contains: Some("0%_d".into()),
            ..none()
        })
        .await,
        ["a"]
    );
    assert!(
        names(NodeFilter {
            description_contains: Some("7_1".into()),
            ..none()
        })
        .await
        .is_empty()
    );
    let shards = Some(vec!["s1".to_owned(), "s2".to_owned()]);
    assert_eq!(
        names(NodeFilter {
            shard: shards,
            ..none()
        })
        .await,
        ["a", "b"]
    );
    assert_eq!(
        names(NodeFilter {
            shard: Some(vec![]),
            ..none()
        })
        .await,
        Vec::<String>::new()
    );
    assert_eq!(
        names(NodeFilter {
            sharded: Some(false),
            ..none()
        })
        .await,
        ["c"]
    );
    assert_eq!(
        names(NodeFilter {
            parent_node: Some(a.uuid),
            ..none()
        })
        .await,
        ["b"]
    );
    let combined = NodeFilter {
        project: Some("p1".into()),
        retired: Some(false),
        ..none()
    };
    assert_eq!(names(combined).await, ["a"]);
}

async fn guarded_update_lets_exactly_one_writer_win(store: Store) {
    let created = store.node_create(&enrolled("contested")).await.unwrap();

    // Two writers read the same revision.
    let mut first = created.clone();
    let mut second = created.clone();
    first.maintenance = true;
    second.extra.insert("who".into(), json!("second"));

    let updated = store.node_update(&first, created.version).await.unwrap();
    assert_eq!(updated.version, created.version + 1);
    assert!(updated.maintenance);
    assert!(updated.updated_at.is_some());

    let lost = store
        .node_update(&second, created.version)
        .await
        .unwrap_err();
    assert!(
        matches!(
            lost,
            Error::StaleRevision {
                kind: Kind::Node,
                expected: 1,
                actual: 2,
                ..
            }
        ),
        "{lost:?}"
    );
    assert!(lost.is_conflict());
    // The winner's write stands; the loser's did not leak in.
    let stored = store.node_get(&Ident::Uuid(created.uuid)).await.unwrap();
    assert!(stored.maintenance && stored.extra.is_empty());

    // Concurrent writers: of many racing on one revision, exactly one wins.
    let racers = (0..8).map(|n| {
        let store = store.clone();
        let mut node = stored.clone();
        node.last_error = Some(format!("writer {n}"));
        tokio::spawn(async move { store.node_update(&node, node.version).await })
    });
    let mut wins = 0;
    for racer in racers.collect::<Vec<_>>() {
        match racer.await.unwrap() {
            Ok(_) => wins += 1,
            Err(Error::StaleRevision { .. }) => {}
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    }
    assert_eq!(wins, 1);

    let gone = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Enroll);
    assert!(matches!(
        store.node_update(&gone, 1).await,
        Err(Error::NotFound {
            kind: Kind::Node,
            ..
        })
    ));
}

async fn duplicate_uuid_name_and_instance_are_refused(store: Store) {
    let mut first = enrolled("twin");
    first.instance_uuid = Some(Uuid::new_v4());
    store.node_create(&first).await.unwrap();

    let same_name = enrolled("twin");
    let error = store.node_create(&same_name).await.unwrap_err();
    assert!(
        matches!(&error, Error::Duplicate { kind: Kind::Node, field: "name", value } if value == "twin"),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "a node with name 'twin' already exists");

    let mut same_uuid = enrolled("other");
    same_uuid.uuid = first.uuid;
    let error = store.node_create(&same_uuid).await.unwrap_err();
    assert!(
        matches!(error, Error::Duplicate { field: "uuid", .. }),
        "{error:?}"
    );

    let mut same_instance = enrolled("third");
    same_instance.instance_uuid = first.instance_uuid;
    let error = store.node_create(&same_instance).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::Duplicate {
                field: "instance_uuid",
                ..
            }
        ),
        "{error:?}"
    );

    let mut bad_chassis = enrolled("fourth");
    bad_chassis.chassis_uuid = Some(Uuid::new_v4());
    let error = store.node_create(&bad_chassis).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotFound {
                kind: Kind::Chassis,
                ..
            }
        ),
        "{error:?}"
    );
}

async fn deleting_a_node_removes_its_ports_lease_and_history(store: Store) {
    let node = store.node_create(&enrolled("doomed")).await.unwrap();
    let keeper = store.node_create(&enrolled("keeper")).await.unwrap();
    let portgroup = ferric_model::resources::Portgroup::new(Uuid::new_v4(), node.uuid);
    let portgroup = store.portgroup_create(&portgroup).await.unwrap();
    let mut port = Port::new(Uuid::new_v4(), node.uuid, "52:54:00:00:00:01");
    port.portgroup_uuid = Some(portgroup.uuid);
    store.port_create(&port).await.unwrap();
    store
        .port_create(&Port::new(Uuid::new_v4(), keeper.uuid, "52:54:00:00:00:02"))
        .await
        .unwrap();
    store
        .node_lease_acquire(node.uuid, "conductor-1", Duration::from_secs(60))
        .await
        .unwrap();
    let entry = NodeHistoryEntry {
        uuid: Uuid::new_v4(),
        node: node.uuid,
        created_at: Utc::now(),
        severity: "INFO".into(),
        event_type: "provisioning".into(),
        event: "enrolled".into(),
        conductor: None,
        user: None,
    };
    store.node_history_add(&entry).await.unwrap();

    store.node_delete(node.uuid).await.unwrap();

    assert!(matches!(
        store.node_get(&Ident::Uuid(node.uuid)).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.port_get(&Ident::Uuid(port.uuid)).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.portgroup_get(&Ident::Uuid(portgroup.uuid)).await,
        Err(Error::NotFound { .. })
    ));
    assert!(store.node_lease_get(node.uuid).await.unwrap().is_none());
    assert!(store.node_history_list(node.uuid).await.unwrap().is_empty());
    // The other node keeps its port.
    let ports = store
        .port_list(&Default::default(), &Page::all())
        .await
        .unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].node_uuid, keeper.uuid);

    let again = store.node_delete(node.uuid).await.unwrap_err();
    assert!(matches!(
        again,
        Error::NotFound {
            kind: Kind::Node,
            ..
        }
    ));
}

async fn unknown_marker_and_missing_node_are_reported(store: Store) {
    let marker = Uuid::new_v4();
    let error = store
        .node_list(&NodeFilter::default(), &Page::first(10).after(marker))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::MarkerNotFound { kind: Kind::Node, marker: m } if m == marker));
    let error = store.node_get(&Ident::parse("nobody")).await.unwrap_err();
    assert_eq!(error.to_string(), "node nobody was not found");
}

async fn narrow_listings_match_the_whole_rows(store: Store) {
    for name in ["a", "b", "c"] {
        let mut node = enrolled(name);
        node.description = Some(format!("node {name}"));
        node.extra = object(json!({"rack": name}));
        node.conductor_group = "hall".to_owned();
        store.node_create(&node).await.unwrap();
    }
    let page = Page::<NodeSortKey>::first(10);
    let plain = store
        .node_list(&NodeFilter::default(), &page)
        .await
        .unwrap();

    // Heads: the same nodes in the same order, with what routing needs.
    let heads = store
        .node_list_heads(&NodeFilter::default(), &page)
        .await
        .unwrap();
    let expected: Vec<NodeHead> = plain
        .iter()
        .map(|node| NodeHead {
            id: node.id,
            version: node.version,
            uuid: node.uuid,
            driver: node.driver.clone(),
            conductor_group: node.conductor_group.clone(),
        })
        .collect();
    assert_eq!(heads, expected);
    let after_first = store
        .node_list_heads(&NodeFilter::default(), &page.clone().after(plain[0].uuid))
        .await
        .unwrap();
    assert_eq!(after_first, expected[1..]);

    // Whole rows by id: a write shows at its new revision, a deleted node is left out.
    let mut changed = plain[1].clone();
    changed.description = Some("moved".to_owned());
    let changed = store.node_update(&changed, changed.version).await.unwrap();
    store.node_delete(plain[2].uuid).await.unwrap();
    let ids: Vec<i64> = plain.iter().map(|node| node.id).collect();
    let by_id = store.node_list_by_id(&ids).await.unwrap();
    assert_eq!(by_id.len(), 2);
    assert_eq!(by_id[&plain[0].id], plain[0]);
    assert_eq!(by_id[&plain[1].id], changed);

    // Every column named: the whole record. Some: those, the rest empty.
    let whole = store
        .node_list_columns(&NodeFilter::default(), &page, NODE_COLUMNS)
        .await
        .unwrap();
    assert_eq!(whole, vec![plain[0].clone(), changed.clone()]);
    let narrow = store
        .node_list_columns(&NodeFilter::default(), &page, &["name", "links", "no such"])
        .await
        .unwrap();
    assert_eq!(narrow.len(), 2);
    assert_eq!(narrow[1].name, changed.name);
    assert_eq!(narrow[1].uuid, changed.uuid);
    assert_eq!(narrow[1].version, changed.version);
    assert_eq!(narrow[1].conductor_group, "hall");
    assert_eq!(narrow[1].provision_state, changed.provision_state);
    assert_eq!(
        narrow[1].description, None,
        "a column not asked for is not read"
    );
    assert!(narrow[1].extra.is_empty());
}

async fn state_counts_group_by_provision_and_power_state(store: Store) {
    assert!(store.node_state_counts().await.unwrap().is_empty());
    for (name, state, power) in [
        ("a", ProvisionState::Available, Some(PowerState::Off)),
        ("b", ProvisionState::Available, Some(PowerState::Off)),
        ("c", ProvisionState::Available, Some(PowerState::On)),
        ("d", ProvisionState::Enroll, None),
    ] {
        let mut node = enrolled(name);
        node.provision_state = state;
        node.power_state = power;
        store.node_create(&node).await.unwrap();
    }
    let mut counts = store.node_state_counts().await.unwrap();
    counts.sort_by_key(|(state, power, _)| (state.as_str(), power.map(PowerState::as_str)));
    assert_eq!(
        counts,
        vec![
            (ProvisionState::Available, Some(PowerState::Off), 2),
            (ProvisionState::Available, Some(PowerState::On), 1),
            (ProvisionState::Enroll, None, 1),
        ]
    );
}
