//! Abort requests (issue 21): a mark is set only on the node as the caller checked it, and a
//! conductor's guarded write never goes over a mark — so of a mark and a move on, exactly
//! one wins, also when they race.

use std::time::Duration;

use ferric_db::{Error, Store};
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, Node};

use crate::harness::backend_tests;
use crate::nodes::enrolled;

backend_tests!(
    a_mark_needs_the_checked_revision_and_state,
    a_guarded_write_never_goes_over_a_mark,
    a_mark_and_a_move_on_racing_never_both_win,
    a_mark_goes_with_the_lease_a_flow_ends_or_a_request_starts_with,
);

const RUNNING: [ProvisionState; 1] = [ProvisionState::Deploying];

async fn deploying(store: &Store, name: &str) -> Node {
    let mut node = enrolled(name);
    node.provision_state = ProvisionState::Deploying;
    store.node_create(&node).await.unwrap()
}

async fn a_mark_needs_the_checked_revision_and_state(store: Store) {
    let node = deploying(&store, "n").await;
    // An older revision: the node moved on since it was checked.
    assert!(
        !store
            .node_abort_request_set(node.uuid, node.version - 1, &RUNNING)
            .await
            .unwrap()
    );
    // Another state.
    assert!(
        !store
            .node_abort_request_set(node.uuid, node.version, &[ProvisionState::Cleaning])
            .await
            .unwrap()
    );
    assert!(!store.node_abort_request_exists(node.uuid).await.unwrap());

    assert!(
        store
            .node_abort_request_set(node.uuid, node.version, &RUNNING)
            .await
            .unwrap()
    );
    assert!(store.node_abort_request_exists(node.uuid).await.unwrap());
    // The mark bumped the node's revision, nothing else.
    let marked = store.node_get(&Ident::Uuid(node.uuid)).await.unwrap();
    assert_eq!(marked.version, node.version + 1);
    assert_eq!(marked.provision_state, ProvisionState::Deploying);

    assert!(store.node_abort_request_clear(node.uuid).await.unwrap());
    assert!(!store.node_abort_request_clear(node.uuid).await.unwrap());
}

async fn a_guarded_write_never_goes_over_a_mark(store: Store) {
    let node = deploying(&store, "n").await;
    // Unmarked: the guarded write is an ordinary revision-guarded write.
    let mut moved = node.clone();
    moved.provision_state = ProvisionState::Active;
    let stale = store
        .node_update_unless_aborted(&moved, node.version - 1)
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::StaleRevision { .. }), "{stale:?}");
    let mut step = node.clone();
    step.extra.insert("step".into(), "next".into());
    let node = store
        .node_update_unless_aborted(&step, node.version)
        .await
        .unwrap()
        .unwrap();

    // Marked: nothing is written, at the new revision (after a re-read) as at the old one.
    assert!(
        store
            .node_abort_request_set(node.uuid, node.version, &RUNNING)
            .await
            .unwrap()
    );
    for version in [node.version, node.version + 1] {
        assert_eq!(
            store
                .node_update_unless_aborted(&moved, version)
                .await
                .unwrap(),
            None
        );
    }
    let stored = store.node_get(&Ident::Uuid(node.uuid)).await.unwrap();
    assert_eq!(stored.provision_state, ProvisionState::Deploying);
    // An unguarded write (the failure that carries the abort out) still goes through.
    let mut failed = stored.clone();
    failed.provision_state = ProvisionState::DeployFailed;
    store.node_update(&failed, stored.version).await.unwrap();
}

async fn a_mark_and_a_move_on_racing_never_both_win(store: Store) {
    for n in 0..20 {
        let node = deploying(&store, &format!("n{n}")).await;
        let mut active = node.clone();
        active.provision_state = ProvisionState::Active;
        let (marker, mover) = (store.clone(), store.clone());
        let uuid = node.uuid;
        let version = node.version;
        let mark = tokio::spawn(async move {
            marker
                .node_abort_request_set(uuid, version, &RUNNING)
                .await
                .unwrap()
        });
        let moved = tokio::spawn(async move {
            mover
                .node_update_unless_aborted(&active, version)
                .await
                .map(|moved| moved.is_some())
        });
        let marked = mark.await.unwrap();
        let moved = matches!(moved.await.unwrap(), Ok(true));
        assert!(
            marked != moved,
            "mark {marked}, move {moved}: exactly one wins"
        );
        let stored = store.node_get(&Ident::Uuid(uuid)).await.unwrap();
        let expected = if moved {
            ProvisionState::Active
        } else {
            ProvisionState::Deploying
        };
        assert_eq!(stored.provision_state, expected);
        assert_eq!(store.node_abort_request_exists(uuid).await.unwrap(), marked);
    }
}

/// The lease calls that take a stale mark with them: releasing at a flow's end, and taking the
/// lease for a new request — but never a mark on a node whose lease someone else holds.
async fn a_mark_goes_with_the_lease_a_flow_ends_or_a_request_starts_with(store: Store) {
    let ttl = Duration::from_secs(60);
    let node = deploying(&store, "n").await;
    let mark = |version| store.node_abort_request_set(node.uuid, version, &RUNNING);
    let exists = || store.node_abort_request_exists(node.uuid);

    store
        .node_lease_acquire(node.uuid, "c1", ttl)
        .await
        .unwrap();
    assert!(mark(node.version).await.unwrap());
    // Another conductor's request is refused and leaves the running flow's mark.
    let refused = store
        .node_lease_acquire_for_request(node.uuid, "c2", ttl)
        .await;
    assert!(
        matches!(refused, Err(Error::LeaseHeld { .. })),
        "{refused:?}"
    );
    assert!(exists().await.unwrap());
    // The flow ends: lease and mark go together.
    store
        .node_lease_release_ending(node.uuid, "c1")
        .await
        .unwrap();
    assert!(!exists().await.unwrap());
    assert!(store.node_lease_get(node.uuid).await.unwrap().is_none());
    // Only the holder releases.
    assert!(matches!(
        store.node_lease_release_ending(node.uuid, "c1").await,
        Err(Error::LeaseNotHeld { .. })
    ));

    // A mark left behind (its conductor died) goes when a new request takes the lease.
    assert!(mark(node.version + 1).await.unwrap());
    let lease = store
        .node_lease_acquire_for_request(node.uuid, "c2", ttl)
        .await
        .unwrap();
    assert_eq!(lease.holder, "c2");
    assert!(!exists().await.unwrap());
}
