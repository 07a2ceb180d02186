//! The listing filters Ironic has that need more than one column: nodes by the conductor that
//! serves them (1.49) and child nodes (`include_children`, `parent_node`, 1.83); ports and
//! portgroups by their node's shard (1.82 / 1.106) and conductor group (1.99); and a node's
//! `/children` (1.83). And the rule
//! behind them: every filter the OpenAPI document lists (built from the handlers' filter
//! tables) answers at the newest version, none is "not supported".
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Answer, faultstring};
use ferric_api::version::MAX_VERSION;
use serde_json::{Value, json};

const MAX: u16 = MAX_VERSION.minor();

fn uuids(answer: &Answer, collection: &str) -> Vec<String> {
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let mut uuids: Vec<String> = answer.body[collection]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["uuid"].as_str().unwrap().to_owned())
        .collect();
    uuids.sort();
    uuids
}

fn sorted(mut uuids: Vec<&str>) -> Vec<String> {
    uuids.sort_unstable();
    uuids.into_iter().map(str::to_owned).collect()
}

async fn create(api: &common::Api, path: &str, body: Value) -> String {
    let created = api.send_at(MAX, Method::POST, path, Some(body)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    created.body["uuid"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn child_nodes_are_listed_only_when_asked_for() {
    let api = common::Api::new().await;
    let parent = create(&api, "/v1/nodes", json!({"driver": "fake-hardware"})).await;
    let child = create(
        &api,
        "/v1/nodes",
        json!({"driver": "fake-hardware", "parent_node": parent}),
    )
    .await;
    let other = create(&api, "/v1/nodes", json!({"driver": "fake-hardware"})).await;

    // As Ironic: children are hidden from plain listings, at every version.
    let plain = api.send_at(MAX, Method::GET, "/v1/nodes", None).await;
    assert_eq!(uuids(&plain, "nodes"), sorted(vec![&parent, &other]));
    let old = api.send(Method::GET, "/v1/nodes/detail", None).await;
    assert_eq!(uuids(&old, "nodes"), sorted(vec![&parent, &other]));

    let all = api
        .send_at(83, Method::GET, "/v1/nodes?include_children=true", None)
        .await;
    assert_eq!(uuids(&all, "nodes"), sorted(vec![&parent, &child, &other]));
    let not_all = api
        .send_at(MAX, Method::GET, "/v1/nodes?include_children=False", None)
        .await;
    assert_eq!(uuids(&not_all, "nodes"), sorted(vec![&parent, &other]));
    let children = api
        .send_at(
            83,
            Method::GET,
            &format!("/v1/nodes?parent_node={parent}"),
            None,
        )
        .await;
    assert_eq!(uuids(&children, "nodes"), vec![child.clone()]);

    let listed = api
        .send_at(
            83,
            Method::GET,
            &format!("/v1/nodes/{parent}/children"),
            None,
        )
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.body["children"], json!([child]));
    assert_eq!(
        listed.body["links"]["href"],
        format!("http://ferric.test/v1/nodes?parent_node={parent}")
    );
    let none = api
        .send_at(
            MAX,
            Method::GET,
            &format!("/v1/nodes/{other}/children"),
            None,
        )
        .await;
    assert_eq!(none.body["children"], json!([]));
    let hidden = api
        .send_at(
            82,
            Method::GET,
            &format!("/v1/nodes/{parent}/children"),
            None,
        )
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);

    let too_old = api
        .send_at(82, Method::GET, "/v1/nodes?include_children=true", None)
        .await;
    assert_eq!(
        too_old.status,
        StatusCode::NOT_ACCEPTABLE,
        "{}",
        too_old.body
    );
    let not_boolean = api
        .send_at(MAX, Method::GET, "/v1/nodes?include_children=maybe", None)
        .await;
    assert_eq!(not_boolean.status, StatusCode::BAD_REQUEST);
    assert!(
        faultstring(&not_boolean.body).contains("include_children"),
        "{}",
        not_boolean.body
    );
}

#[tokio::test]
async fn nodes_are_filtered_by_the_conductor_serving_them() {
    let api = common::Api::new().await;
    let mut nodes = Vec::new();
    for _ in 0..3 {
        nodes.push(create(&api, "/v1/nodes", json!({"driver": "fake-hardware"})).await);
    }
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();

    // The test API's only conductor serves every node.
    let served = api
        .send_at(49, Method::GET, "/v1/nodes?conductor=test-conductor", None)
        .await;
    assert_eq!(uuids(&served, "nodes"), sorted(nodes.clone()));
    let elsewhere = api
        .send_at(
            MAX,
            Method::GET,
            "/v1/nodes/detail?conductor=other-host",
            None,
        )
        .await;
    assert_eq!(uuids(&elsewhere, "nodes"), Vec::<String>::new());
    let too_old = api
        .send_at(48, Method::GET, "/v1/nodes?conductor=test-conductor", None)
        .await;
    assert_eq!(
        too_old.status,
        StatusCode::NOT_ACCEPTABLE,
        "{}",
        too_old.body
    );

    // Pages are cut after the conductor's nodes are picked: full pages and a `next` link.
    let first = api
        .send_at(
            MAX,
            Method::GET,
            "/v1/nodes?conductor=test-conductor&limit=2",
            None,
        )
        .await;
    assert_eq!(uuids(&first, "nodes").len(), 2, "{}", first.body);
    let next = first.body["next"].as_str().unwrap();
    assert!(next.contains("conductor=test-conductor"), "{next}");
    let rest = next.split_once("/v1/").unwrap().1;
    let second = api
        .send_at(MAX, Method::GET, &format!("/v1/{rest}"), None)
        .await;
    let mut seen = uuids(&first, "nodes");
    seen.extend(uuids(&second, "nodes"));
    seen.sort();
    assert_eq!(seen, sorted(nodes));
}

/// Two nodes in different shards and conductor groups, each with a port and a portgroup.
struct Fixture {
    api: common::Api,
    ports: [String; 2],
    portgroups: [String; 2],
}

async fn fixture() -> Fixture {
    let api = common::Api::new().await;
    let mut ports = Vec::new();
    let mut portgroups = Vec::new();
    for (n, (shard, group)) in [("rack-1", "Group-A"), ("rack-2", "group-b")]
        .into_iter()
        .enumerate()
    {
        let node = create(
            &api,
            "/v1/nodes",
            json!({"driver": "fake-hardware", "shard": shard, "conductor_group": group}),
        )
        .await;
        let portgroup = create(
            &api,
            "/v1/portgroups",
            json!({"node_uuid": node, "address": format!("52:54:00:00:01:0{n}")}),
        )
        .await;
        let port = create(
            &api,
            "/v1/ports",
            json!({"node_uuid": node, "address": format!("52:54:00:00:00:0{n}")}),
        )
        .await;
        ports.push(port);
        portgroups.push(portgroup);
    }
    Fixture {
        api,
        ports: ports.try_into().unwrap(),
        portgroups: portgroups.try_into().unwrap(),
    }
}

#[tokio::test]
async fn ports_are_filtered_by_their_nodes_shard_and_conductor_group() {
    let Fixture { api, ports, .. } = fixture().await;
    let list = |minor: u16, query: &str| {
        let path = format!("/v1/ports?{query}");
        let api = &api;
        async move { api.send_at(minor, Method::GET, &path, None).await }
    };

    assert_eq!(
        uuids(&list(82, "shard=rack-1").await, "ports"),
        vec![ports[0].clone()]
    );
    assert_eq!(
        uuids(&list(MAX, "shard=rack-1,rack-2").await, "ports"),
        sorted(vec![&ports[0], &ports[1]])
    );
    assert_eq!(
        uuids(&list(MAX, "shard=rack-9").await, "ports"),
        Vec::<String>::new()
    );
    assert_eq!(
        uuids(&list(99, "conductor_groups=group-a").await, "ports"),
        vec![ports[0].clone()]
    );
    assert_eq!(
        uuids(
            &list(MAX, "conductor_groups=GROUP-B,nowhere").await,
            "ports"
        ),
        vec![ports[1].clone()]
    );

    for (minor, query) in [(81, "shard=rack-1")] {
        let refused = list(minor, query).await;
        assert_eq!(
            refused.status,
            StatusCode::NOT_ACCEPTABLE,
            "{query}: {}",
            refused.body
        );
    }
    // Ironic's combinations: one of node, portgroup and shard; conductor groups alone.
    let node = api
        .send_at(MAX, Method::GET, &format!("/v1/ports/{}", ports[0]), None)
        .await
        .body["node_uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    for query in [
        format!("shard=rack-1&node={node}"),
        format!("conductor_groups=group-a&node={node}"),
        "conductor_groups=group-a&address=52:54:00:00:00:00".to_owned(),
    ] {
        let refused = list(MAX, &query).await;
        assert_eq!(
            refused.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            refused.body
        );
    }
}

#[tokio::test]
async fn portgroups_are_filtered_by_their_nodes_shard_and_conductor_group() {
    let Fixture {
        api, portgroups, ..
    } = fixture().await;
    let list = |minor: u16, query: &str| {
        let path = format!("/v1/portgroups?{query}");
        let api = &api;
        async move { api.send_at(minor, Method::GET, &path, None).await }
    };
    assert_eq!(
        uuids(&list(106, "shard=rack-2").await, "portgroups"),
        vec![portgroups[1].clone()]
    );
    assert_eq!(
        uuids(
            &list(99, "conductor_groups=group-a,group-b").await,
            "portgroups"
        ),
        sorted(vec![&portgroups[0], &portgroups[1]])
    );
    for (minor, query) in [(105, "shard=rack-2")] {
        let refused = list(minor, query).await;
        assert_eq!(
            refused.status,
            StatusCode::NOT_ACCEPTABLE,
            "{query}: {}",
            refused.body
        );
    }
    let both = list(MAX, "shard=rack-1&conductor_groups=group-a").await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST, "{}", both.body);
    assert!(
        faultstring(&both.body).contains("one of them"),
        "{}",
        both.body
    );
}

/// A value each documented filter accepts, from the records of the fixture.
fn filter_value<'a>(name: &str, node: &'a str, portgroup: &'a str) -> &'a str {
    match name {
        "associated" | "maintenance" | "retired" | "sharded" | "include_children" => "false",
        "node" | "node_uuid" | "parent_node" => node,
        "portgroup" => portgroup,
        "instance_uuid" | "chassis_uuid" => "d4f1a0e2-6b2c-4c1e-9a43-5a3e1f2b7c01",
        "address" => "52:54:00:00:00:00",
        "provision_state" => "available",
        "fault" => "power%20failure",
        "conductor" => "test-conductor",
        _ => "x",
    }
}

#[tokio::test]
async fn every_documented_filter_answers_at_the_newest_version() {
    let Fixture {
        api,
        ports,
        portgroups,
    } = fixture().await;
    let port = api
        .send_at(MAX, Method::GET, &format!("/v1/ports/{}", ports[0]), None)
        .await;
    let node = port.body["node_uuid"].as_str().unwrap().to_owned();
    let document = ferric_api::openapi::document();
    let mut checked = 0;
    for path in [
        "/v1/nodes",
        "/v1/nodes/detail",
        "/v1/ports",
        "/v1/ports/detail",
        "/v1/portgroups",
        "/v1/portgroups/detail",
    ] {
        let parameters = document["paths"][path]["get"]["parameters"]
            .as_array()
            .unwrap_or_else(|| panic!("{path} is documented"));
        for parameter in parameters.iter().filter(|p| p["in"] == "query") {
            let name = parameter["name"].as_str().unwrap();
            if [
                "limit", "marker", "sort_key", "sort_dir", "fields", "detail",
            ]
            .contains(&name)
            {
                continue;
            }
            let value = filter_value(name, &node, &portgroups[0]);
            let answer = api
                .send_at(MAX, Method::GET, &format!("{path}?{name}={value}"), None)
                .await;
            assert_eq!(
                answer.status,
                StatusCode::OK,
                "{path}?{name}={value}: {}",
                answer.body
            );
            checked += 1;
        }
    }
    // Nodes have 20 filters, ports 7, portgroups 4; each listing twice.
    assert_eq!(checked, 2 * (20 + 7 + 4));
}
