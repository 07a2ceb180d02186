//! Node leases: acquire, contention, expiry and takeover, renew, and release only by the
//! holder. Expiry is exercised with a zero TTL (a lease that lapses at once), not by sleeping.

use std::time::Duration;

use ferric_db::{Error, Fence, Kind, Store};
use ferric_model::resources::Ident;
use uuid::Uuid;

use crate::harness::backend_tests;
use crate::nodes::enrolled;

backend_tests!(
    acquire_contend_release,
    expired_lease_is_taken_over,
    only_the_holder_renews_or_releases,
    concurrent_acquirers_get_one_lease,
);

const MINUTE: Duration = Duration::from_secs(60);

async fn acquire_contend_release(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap().uuid;
    assert!(store.node_lease_get(node).await.unwrap().is_none());

    let lease = store.node_lease_acquire(node, "c1", MINUTE).await.unwrap();
    assert_eq!((lease.node, lease.holder.as_str()), (node, "c1"));
    assert!(lease.expires_at > lease.acquired_at);

    let held = store
        .node_lease_acquire(node, "c2", MINUTE)
        .await
        .unwrap_err();
    assert!(
        matches!(&held, Error::LeaseHeld { holder, expires_at, .. } if holder == "c1" && *expires_at == lease.expires_at),
        "{held:?}"
    );
    assert!(held.is_conflict());

    // Re-acquiring our own lease extends it and keeps when we first took it.
    let again = store
        .node_lease_acquire(node, "c1", MINUTE * 2)
        .await
        .unwrap();
    assert_eq!(again.acquired_at, lease.acquired_at);
    assert!(again.expires_at > lease.expires_at);

    store.node_lease_release(node, "c1").await.unwrap();
    assert!(store.node_lease_get(node).await.unwrap().is_none());
    let taken = store.node_lease_acquire(node, "c2", MINUTE).await.unwrap();
    assert_eq!(taken.holder, "c2");

    let missing = store
        .node_lease_acquire(Uuid::new_v4(), "c1", MINUTE)
        .await
        .unwrap_err();
    assert!(
        matches!(
            missing,
            Error::NotFound {
                kind: Kind::Node,
                ..
            }
        ),
        "{missing:?}"
    );
}

async fn expired_lease_is_taken_over(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap().uuid;
    let other = store.node_create(&enrolled("m")).await.unwrap().uuid;
    let dead = store
        .node_lease_acquire(node, "dead-conductor", Duration::ZERO)
        .await
        .unwrap();
    store
        .node_lease_acquire(other, "live-conductor", MINUTE)
        .await
        .unwrap();

    // An expired lease is no reservation; a live one is.
    let (_, reservation) = store
        .node_get_with_reservation(&Ident::Uuid(node))
        .await
        .unwrap();
    assert_eq!(reservation, None);
    let (shown, reservation) = store
        .node_get_with_reservation(&Ident::Name("m".to_owned()))
        .await
        .unwrap();
    assert_eq!(
        (shown.uuid, reservation.as_deref()),
        (other, Some("live-conductor"))
    );

    let held = store.node_lease_list_held().await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(
        (held[0].node, held[0].holder.as_str()),
        (other, "live-conductor")
    );

    let expired = store.node_lease_list_expired().await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].node, expired[0].holder.as_str()),
        (node, "dead-conductor")
    );

    let taken = store.node_lease_acquire(node, "c2", MINUTE).await.unwrap();
    assert_eq!(taken.holder, "c2");
    assert!(store.node_lease_list_expired().await.unwrap().is_empty());

    // The old holder lost it: it can neither renew nor release.
    let renew = store
        .node_lease_renew(node, Fence::of(&dead), MINUTE)
        .await
        .unwrap_err();
    assert!(matches!(renew, Error::LeaseNotHeld { .. }), "{renew:?}");
    assert_eq!(
        store.node_lease_get(node).await.unwrap().unwrap().holder,
        "c2"
    );
}

async fn only_the_holder_renews_or_releases(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap().uuid;
    let lease = store.node_lease_acquire(node, "c1", MINUTE).await.unwrap();

    let wrong = store.node_lease_release(node, "c2").await.unwrap_err();
    assert!(
        matches!(&wrong, Error::LeaseNotHeld { holder, .. } if holder == "c2"),
        "{wrong:?}"
    );
    assert_eq!(store.node_lease_get(node).await.unwrap().unwrap(), lease);
    let wrong = Fence {
        holder: "c2",
        generation: lease.generation,
    };
    assert!(matches!(
        store.node_lease_renew(node, wrong, MINUTE).await,
        Err(Error::LeaseNotHeld { .. })
    ));

    let renewed = store
        .node_lease_renew(node, Fence::of(&lease), MINUTE * 10)
        .await
        .unwrap();
    assert!(renewed.expires_at > lease.expires_at);
    assert_eq!(renewed.acquired_at, lease.acquired_at);
    assert_eq!(renewed.generation, lease.generation);

    assert_eq!(store.node_lease_release_all("c1").await.unwrap(), 1);
    assert!(matches!(
        store.node_lease_release(node, "c1").await,
        Err(Error::LeaseNotHeld { .. })
    ));
}

async fn concurrent_acquirers_get_one_lease(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap().uuid;
    let racers: Vec<_> = (0..8)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .node_lease_acquire(node, &format!("c{n}"), MINUTE)
                    .await
            })
        })
        .collect();
    let mut winners = Vec::new();
    for racer in racers {
        match racer.await.unwrap() {
            Ok(lease) => winners.push(lease.holder),
            Err(Error::LeaseHeld { .. }) => {}
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(
        store.node_lease_get(node).await.unwrap().unwrap().holder,
        winners[0]
    );
}
