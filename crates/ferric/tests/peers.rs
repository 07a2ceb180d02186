//! Peer-assisted image delivery (issue 45) with the real `ferric server` and real agents: a
//! raw image given by URL goes through the conductor's image cache (`image_download_source =
//! local`, `image_peer_delivery = true`) and the agents deploying it fetch its pieces from each
//! other.
//!
//! Each agent is reached through a small proxy of the test, which is the URL the agent
//! advertises (so the conductor's commands and the other agents' piece requests go through
//! it): an honest proxy counts the piece bytes it passes; a corrupting one flips a byte in
//! every piece it passes; a dying one sends half of a piece and drops the connection. The test
//! deploys, one after the other: an honest machine alone (all from the conductor), a second
//! honest one (all from the first, nothing from the conductor), then — the honest ones gone —
//! the corrupting peer, the dying peer and finally two machines at once whose only peers are
//! those two. Every machine must deploy, and every disk hold the image.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::Server;
use common::deploy::{FakeMachine, Operator, agent_config, boot_agent, fake_machine, free_port};
use serde_json::{Value, json};
use sha2::Digest;

const MIB: usize = 1024 * 1024;
/// Six pieces of the conductor's smallest piece size (4 MiB), the last one short.
const IMAGE_BYTES: usize = 20 * MIB + 4321;
const DISK_BYTES: u64 = 32 * 1024 * 1024;
/// Compared from here on: the agent may rewrite the GPT's first sectors for the disk's size.
const DATA_FROM: usize = MIB;

/// A whole-disk image: a GPT with one partition, then pseudo-random bytes.
fn raw_image() -> Vec<u8> {
    let mut image = std::io::Cursor::new(vec![0u8; IMAGE_BYTES]);
    let mut gpt = gptman::GPT::new_from(&mut image, 512, [9; 16]).unwrap();
    gpt[1] = gptman::GPTPartitionEntry {
        partition_type_guid: [0x11; 16],
        unique_partition_guid: [0x44; 16],
        starting_lba: 2048,
        ending_lba: (IMAGE_BYTES / 512) as u64 - 100,
        attribute_bits: 0,
        partition_name: "root".into(),
    };
    gpt.write_into(&mut image).unwrap();
    let mut image = image.into_inner();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for byte in &mut image[DATA_FROM..] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = state as u8;
    }
    image
}

/// What a proxy does to the pieces it passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Honest,
    Corrupt,
    Dying,
}

/// A proxy in front of one agent: everything passes, pieces as its mode says.
struct Proxy {
    /// Piece bytes passed (honest), pieces corrupted or cut.
    pieces: Arc<AtomicU64>,
}

async fn forward(
    upstream: SocketAddr,
    mode: Mode,
    counter: Arc<AtomicU64>,
    request: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let path = parts
        .uri
        .path_and_query()
        .map(|path| path.as_str().to_owned())
        .unwrap_or_default();
    let client = reqwest::Client::new();
    let mut outgoing = client.request(parts.method.clone(), format!("http://{upstream}{path}"));
    for (name, value) in &parts.headers {
        if name != axum::http::header::HOST {
            outgoing = outgoing.header(name, value);
        }
    }
    let response = match outgoing.body(body).send().await {
        Ok(response) => response,
        Err(error) => {
            return (axum::http::StatusCode::BAD_GATEWAY, error.to_string()).into_response();
        }
    };
    let status = response.status();
    let headers = response.headers().clone();
    let mut bytes = response.bytes().await.unwrap().to_vec();
    let piece = path.contains("/peer/") && status.is_success();
    match (piece, mode) {
        (true, Mode::Honest) => {
            counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
        (true, Mode::Corrupt) => {
            counter.fetch_add(1, Ordering::Relaxed);
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0xff;
        }
        (true, Mode::Dying) => {
            counter.fetch_add(1, Ordering::Relaxed);
            let half = bytes[..bytes.len() / 2].to_vec();
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![
                Ok(half),
                Err(std::io::Error::other("the peer died mid-transfer")),
            ];
            let mut answer = axum::response::Response::new(axum::body::Body::from_stream(
                futures_util::stream::iter(chunks),
            ));
            *answer.status_mut() = status;
            answer.headers_mut().insert(
                axum::http::header::CONTENT_LENGTH,
                headers[reqwest::header::CONTENT_LENGTH].clone(),
            );
            return answer;
        }
        _ => {}
    }
    let mut answer = axum::response::Response::new(axum::body::Body::from(bytes));
    *answer.status_mut() = status;
    if let Some(kind) = headers.get(reqwest::header::CONTENT_TYPE) {
        answer
            .headers_mut()
            .insert(axum::http::header::CONTENT_TYPE, kind.clone());
    }
    answer
}

/// A machine: its agent (listening on 127.0.0.2, advertising the proxy on 127.0.0.1 at the
/// same port), its proxy and its disk.
struct Machine {
    agent: Option<ferric_agent::RunningAgent>,
    proxy: Proxy,
    disk: PathBuf,
}

/// Boots `fixture`'s agent behind a proxy in `mode`.
fn machine(
    runtime: &tokio::runtime::Runtime,
    server: &Server,
    fixture: FakeMachine,
    mode: Mode,
) -> Machine {
    // The proxy's port first (free on 127.0.0.1), the agent on the same port of 127.0.0.2.
    let port = free_port();
    let mut config = agent_config(server, &fixture);
    config.listen = format!("127.0.0.2:{port}").parse().unwrap();
    config.advertise_host = Some("127.0.0.1".to_owned());
    // Plain HTTP, so the proxy can read the pieces it passes.
    config.auto_tls = false;
    let agent = boot_agent(runtime, config);
    let upstream = agent.address;
    let pieces = Arc::new(AtomicU64::new(0));
    let counter = pieces.clone();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
        .unwrap();
    runtime.spawn(async move {
        let app = axum::Router::new()
            .fallback(move |request| forward(upstream, mode, counter.clone(), request));
        axum::serve(listener, app).await.unwrap();
    });
    Machine {
        agent: Some(agent),
        proxy: Proxy { pieces },
        disk: fixture.disk,
    }
}

/// A `direct` fake-hardware node deploying `instance_info` onto `machine`'s disk, cabled to
/// the rack's one switch, and made available.
fn enroll(operator: &Operator<'_>, instance_info: &Value, machine: &FakeMachine) -> String {
    let uuid = operator.create_node(
        json!({
            "driver": "fake-hardware",
            "deploy_interface": "direct",
            "properties": {"root_device": {"name": machine.disk.display().to_string()}},
            "instance_info": instance_info,
        }),
        &machine.mac,
    );
    let port = operator.send(
        reqwest::Method::GET,
        &format!("/v1/ports?node_uuid={uuid}"),
        None,
    );
    let port = port["ports"][0]["uuid"].as_str().unwrap().to_owned();
    operator.send(
        reqwest::Method::PATCH,
        &format!("/v1/ports/{port}"),
        Some(json!([{"op": "add", "path": "/local_link_connection",
                     "value": {"switch_id": "52:54:00:00:45:01", "port_id": "p1"}}])),
    );
    operator.provision(&uuid, "manage", "manageable");
    operator.provision(&uuid, "provide", "available");
    uuid
}

fn assert_disk_holds(machine: &Machine, image: &[u8]) {
    let file = std::fs::File::open(&machine.disk).unwrap();
    let mut written = vec![0u8; image.len() - DATA_FROM];
    file.read_exact_at(&mut written, DATA_FROM as u64).unwrap();
    assert!(
        written == image[DATA_FROM..],
        "{} does not hold the image",
        machine.disk.display()
    );
}

#[test]
fn agents_deploy_one_image_from_each_other_and_survive_bad_peers() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("ferric_agent=info")
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().unwrap();
    let image = raw_image();
    let boot_root = dir.path().join("boot");
    std::fs::create_dir_all(boot_root.join("images")).unwrap();
    std::fs::write(boot_root.join("images/peer.img"), &image).unwrap();
    let sha = format!("{:x}", sha2::Sha256::digest(&image));
    let boot_port = free_port();
    let boot_url = format!("http://127.0.0.1:{boot_port}");
    let env = [
        ("FERRIC_BOOT_HTTP_LISTEN", format!("127.0.0.1:{boot_port}")),
        ("FERRIC_BOOT_HTTP_URL", boot_url.clone()),
        ("FERRIC_BOOT_HTTP_ROOT", boot_root.display().to_string()),
        ("FERRIC_IMAGE_CACHE_SIZE", "64".to_owned()),
        ("FERRIC_IMAGE_DOWNLOAD_SOURCE", "local".to_owned()),
        ("FERRIC_IMAGE_PEER_DELIVERY", "true".to_owned()),
        ("FERRIC_AUTOMATED_CLEAN", "false".to_owned()),
        // The proxies read the pieces: agents over plain HTTP.
        ("FERRIC_AGENT_REQUIRE_TLS", "false".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    let server = Server::start_with_env(dir.path(), &[], &env);
    let operator = Operator::new(&server);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let instance_info = json!({
        "image_source": format!("{boot_url}/images/peer.img"),
        "image_os_hash_algo": "sha256",
        "image_os_hash_value": sha,
    });
    let fixtures: Vec<FakeMachine> = (1..=6)
        .map(|n| {
            let mac = format!("52:54:00:45:00:{n:02x}");
            fake_machine(&dir.path().join(format!("machine-{n}")), &mac, DISK_BYTES)
        })
        .collect();
    let nodes: Vec<String> = fixtures
        .iter()
        .map(|fixture| enroll(&operator, &instance_info, fixture))
        .collect();
    let modes = [
        Mode::Honest,
        Mode::Honest,
        Mode::Corrupt,
        Mode::Dying,
        Mode::Honest,
        Mode::Honest,
    ];
    let mut fixtures: Vec<Option<(FakeMachine, Mode)>> =
        fixtures.into_iter().zip(modes).map(Some).collect();
    let mut machines: Vec<Option<Machine>> = (0..nodes.len()).map(|_| None).collect();
    // Deploys machines `which` at once: their nodes wait for a call-back, their agents boot.
    let mut deploy = |which: &[usize], machines: &mut Vec<Option<Machine>>| {
        for &n in which {
            operator.request(&nodes[n], "active");
        }
        for &n in which {
            operator.wait_for(&nodes[n], "wait call-back");
            let (fixture, mode) = fixtures[n].take().unwrap();
            machines[n] = Some(machine(&runtime, &server, fixture, mode));
        }
        for &n in which {
            operator.wait_for(&nodes[n], "active");
        }
    };

    // The first machine alone: every piece from the conductor. The second: every piece from
    // the first.
    deploy(&[0], &mut machines);
    deploy(&[1], &mut machines);
    let machine = |n: usize| machines[n].as_ref().unwrap();
    assert_disk_holds(machine(0), &image);
    assert_disk_holds(machine(1), &image);
    assert_eq!(
        machine(0).proxy.pieces.load(Ordering::Relaxed),
        image.len() as u64,
        "the second machine took the whole image from the first"
    );
    assert_eq!(
        machine(1).proxy.pieces.load(Ordering::Relaxed),
        0,
        "nobody needed the second"
    );
    let served = |machine: &Machine| {
        machine
            .agent
            .as_ref()
            .and_then(|agent| agent.agent.peer_swarm())
            .map(|held| held.served.load(Ordering::Relaxed))
    };
    assert_eq!(served(machine(0)), Some(image.len() as u64));

    // The honest machines go away (rebooted into their images); the tracker still lists them
    // for a while, so they are peers that died too. Then the corrupting peer, the dying one,
    // and two machines whose only live peers are those.
    for machine in machines[..2].iter_mut().flatten() {
        if let Some(agent) = machine.agent.take() {
            // The machine is gone: its announcer stops with the swarm, its API with the task.
            agent.agent.set_peer_swarm(None);
            drop(agent);
        }
    }
    deploy(&[2], &mut machines);
    deploy(&[3], &mut machines);
    deploy(&[4, 5], &mut machines);
    let machine = |n: usize| machines[n].as_ref().unwrap();
    assert!(
        machine(2).proxy.pieces.load(Ordering::Relaxed) > 0,
        "the corrupting peer was asked for pieces"
    );
    assert!(
        machine(3).proxy.pieces.load(Ordering::Relaxed) > 0,
        "the dying peer was asked for pieces"
    );
    for machine in machines.iter().flatten() {
        assert_disk_holds(machine, &image);
    }
}
