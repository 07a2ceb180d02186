//! The tracker's grants and refusals, and the manifest of a small cached file.

#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

use super::*;

fn image(dir: &Path, size: usize) -> std::path::PathBuf {
    let path = dir.join("entry");
    let bytes: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, bytes).unwrap();
    path
}

fn joiner<'a>(node: &'a str, switch: Option<&'a str>) -> Joiner<'a> {
    Joiner {
        node,
        agent_url: "http://10.0.0.9:9999/",
        switch_id: switch,
    }
}

#[test]
fn piece_sizes_keep_the_manifest_small() {
    assert_eq!(Manifest::piece_size_for(0), MIN_PIECE_SIZE);
    assert_eq!(Manifest::piece_size_for(2 << 30), MIN_PIECE_SIZE);
    assert_eq!(Manifest::piece_size_for(8 << 30), MIN_PIECE_SIZE);
    assert_eq!(Manifest::piece_size_for((8 << 30) + 1), 2 * MIN_PIECE_SIZE);
    assert_eq!(Manifest::piece_size_for(100 << 30), 16 * MIN_PIECE_SIZE);
}

#[test]
fn a_manifest_hashes_each_piece() {
    let dir = tempfile::tempdir().unwrap();
    let size = MIN_PIECE_SIZE as usize * 2 + 5;
    let path = image(dir.path(), size);
    let manifest = Manifest::compute(&path).unwrap();
    assert_eq!(manifest.size, size as u64);
    assert_eq!(manifest.pieces.len(), 3);
    let bytes = std::fs::read(&path).unwrap();
    let last = &bytes[2 * MIN_PIECE_SIZE as usize..];
    assert_eq!(manifest.pieces[2], hex(&Sha256::digest(last)));
    assert_eq!(
        manifest.pieces[0],
        hex(&Sha256::digest(&bytes[..MIN_PIECE_SIZE as usize]))
    );
}

#[tokio::test]
async fn the_tracker_grants_each_piece_once_and_lists_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(dir.path(), MIN_PIECE_SIZE as usize * 4);
    let swarms = Swarms::default();
    let a = swarms
        .join("k", &path, joiner("a", Some("sw1")), "http://boot:8080/")
        .await
        .unwrap();
    let b = swarms
        .join("k", &path, joiner("b", Some("sw2")), "http://boot:8080")
        .await
        .unwrap();
    assert_eq!(a["swarm"], b["swarm"], "one swarm per cache entry");
    assert_eq!(a["secret"], b["secret"]);
    assert_eq!(a["pieces"].as_array().unwrap().len(), 4);
    let id = a["swarm"].as_str().unwrap();
    assert_eq!(
        a["tracker_url"].as_str().unwrap(),
        format!("http://boot:8080/peers/{id}")
    );
    let secret = a["secret"].as_str().unwrap();
    let ask = |peer: &str, have: Ranges, want_origin: usize| Announce {
        peer: peer.to_owned(),
        have,
        want_origin,
    };
    let first = swarms.announce(id, secret, ask("a", vec![], 2)).unwrap();
    assert_eq!(first.origin, vec![0, 1]);
    assert_eq!(first.peers.len(), 1);
    assert_eq!(first.peers[0].peer, "b");
    assert_eq!(first.peers[0].url, "http://10.0.0.9:9999");
    assert_eq!(first.peers[0].switch_id.as_deref(), Some("sw2"));
    // b is granted what nobody was granted yet; a's pieces, once held, are not granted.
    let second = swarms.announce(id, secret, ask("b", vec![], 8)).unwrap();
    assert_eq!(second.origin, vec![2, 3]);
    swarms
        .announce(id, secret, ask("a", vec![[0, 2]], 0))
        .unwrap();
    let third = swarms.announce(id, secret, ask("b", vec![], 8)).unwrap();
    assert!(third.origin.is_empty(), "{third:?}");
    assert_eq!(third.peers[0].have, vec![[0, 2]]);
}

#[tokio::test]
async fn the_tracker_refuses_strangers() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(dir.path(), 10);
    let swarms = Swarms::default();
    let a = swarms
        .join("k", &path, joiner("a", None), "http://boot")
        .await
        .unwrap();
    let id = a["swarm"].as_str().unwrap();
    let secret = a["secret"].as_str().unwrap();
    let ask = |peer: &str, have: Ranges| Announce {
        peer: peer.to_owned(),
        have,
        want_origin: 1,
    };
    assert_eq!(
        swarms.announce("nope", secret, ask("a", vec![])),
        Err(TrackerError::UnknownSwarm("nope".into()))
    );
    assert_eq!(
        swarms.announce(id, "wrong", ask("a", vec![])),
        Err(TrackerError::Unauthorized)
    );
    assert_eq!(
        swarms.announce(id, secret, ask("z", vec![])),
        Err(TrackerError::UnknownMember("z".into()))
    );
    assert_eq!(
        swarms.announce(id, secret, ask("a", vec![[0, 2]])),
        Err(TrackerError::BadRange([0, 2], 1))
    );
    assert_eq!(
        swarms
            .announce(id, secret, ask("a", vec![]))
            .unwrap()
            .origin,
        vec![0]
    );
}

#[test]
fn a_deploy_may_say_otherwise_than_the_site() {
    let mut node = ferric_model::resources::Node::new(
        uuid::Uuid::nil(),
        "fake-hardware",
        ferric_model::ProvisionState::Available,
    );
    assert!(wanted(&node, true).unwrap());
    assert!(!wanted(&node, false).unwrap());
    node.instance_info
        .insert("image_peer_delivery".into(), serde_json::json!("off"));
    assert!(!wanted(&node, true).unwrap());
    node.instance_info
        .insert("image_peer_delivery".into(), serde_json::json!(true));
    assert!(wanted(&node, false).unwrap());
    node.instance_info
        .insert("image_peer_delivery".into(), serde_json::json!("maybe"));
    let refused = wanted(&node, false).unwrap_err().to_string();
    assert!(refused.contains("image_peer_delivery"), "{refused}");
}

#[tokio::test]
async fn a_grant_moves_only_from_a_member_that_stopped_making_progress() {
    let dir = tempfile::tempdir().unwrap();
    let path = image(dir.path(), MIN_PIECE_SIZE as usize * 4);
    let swarms = Swarms::default();
    let a = swarms
        .join("k", &path, joiner("a", None), "http://boot")
        .await
        .unwrap();
    swarms
        .join("k", &path, joiner("b", None), "http://boot")
        .await
        .unwrap();
    let (id, secret) = (a["swarm"].as_str().unwrap(), a["secret"].as_str().unwrap());
    let ask = |peer: &str, have: Ranges| Announce {
        peer: peer.to_owned(),
        have,
        want_origin: 2,
    };
    assert_eq!(
        swarms
            .announce(id, secret, ask("a", vec![]))
            .unwrap()
            .origin,
        vec![0, 1]
    );
    let mut all = swarms.lock();
    let swarm = all.get_mut(id).unwrap();
    let later = Instant::now() + REGRANT_AFTER + Duration::from_secs(1);
    // a has just reported a new piece: its grants stay its own.
    swarm.members.get_mut("a").unwrap().progress_at = later;
    swarm.members.get_mut("a").unwrap().seen = later;
    assert_eq!(swarm.grant("b", &vec![], 2, later), vec![2, 3]);
    // a stalls: its grants go to b.
    let stalled = later + REGRANT_AFTER + Duration::from_secs(1);
    swarm.members.get_mut("a").unwrap().seen = stalled;
    assert_eq!(swarm.grant("b", &vec![], 4, stalled), vec![0, 1, 2, 3]);
}
