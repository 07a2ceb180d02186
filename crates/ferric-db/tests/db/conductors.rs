//! Conductors: register (and re-register), heartbeat, list alive ones, go offline.

use chrono::{Duration, Utc};
use ferric_db::{ConductorFilter, Error, Kind, Store};

use crate::harness::backend_tests;

backend_tests!(
    register_heartbeat_list_unregister,
    get_by_hostname_online_or_not,
    a_conductor_is_alive_while_it_holds_its_lock
);

async fn register_heartbeat_list_unregister(store: Store) {
    let drivers = vec!["ipmi".to_owned(), "redfish".to_owned()];
    let c1 = store.conductor_register("c1", "", &drivers).await.unwrap();
    assert!(c1.online);
    assert_eq!(c1.drivers, drivers);
    assert_eq!(c1.created_at, c1.updated_at);
    store
        .conductor_register("c2", "rack4", &["fake-hardware".to_owned()])
        .await
        .unwrap();

    let beat = store.conductor_heartbeat("c1").await.unwrap();
    assert!(beat.updated_at >= c1.updated_at);
    assert_eq!(beat.created_at, c1.created_at);

    // Re-registering after a restart updates in place.
    let again = store
        .conductor_register("c1", "rack5", &drivers[..1])
        .await
        .unwrap();
    assert_eq!(
        (again.conductor_group.as_str(), again.drivers.len()),
        ("rack5", 1)
    );
    assert_eq!(again.created_at, c1.created_at);

    let all = store
        .conductor_list(&ConductorFilter::default())
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|c| c.hostname.as_str()).collect::<Vec<_>>(),
        ["c1", "c2"]
    );
    let in_rack = ConductorFilter {
        conductor_group: Some("rack4".into()),
        ..Default::default()
    };
    assert_eq!(store.conductor_list(&in_rack).await.unwrap().len(), 1);

    store.conductor_unregister("c2").await.unwrap();
    let alive = ConductorFilter {
        alive_since: Some(Utc::now() - Duration::seconds(60)),
        ..Default::default()
    };
    let alive = store.conductor_list(&alive).await.unwrap();
    assert_eq!(
        alive
            .iter()
            .map(|c| c.hostname.as_str())
            .collect::<Vec<_>>(),
        ["c1"]
    );
    let future = ConductorFilter {
        alive_since: Some(Utc::now() + Duration::seconds(60)),
        ..Default::default()
    };
    assert!(store.conductor_list(&future).await.unwrap().is_empty());

    let missing = store.conductor_heartbeat("ghost").await.unwrap_err();
    assert!(matches!(
        missing,
        Error::NotFound {
            kind: Kind::Conductor,
            ..
        }
    ));
    assert_eq!(
        store
            .conductor_delete_stale(Utc::now() + Duration::seconds(1))
            .await
            .unwrap(),
        2
    );
}

async fn get_by_hostname_online_or_not(store: Store) {
    let drivers = vec!["redfish".to_owned()];
    let registered = store
        .conductor_register("c1", "rack1", &drivers)
        .await
        .unwrap();
    assert_eq!(store.conductor_get("c1").await.unwrap(), registered);

    // An offline conductor is still shown (the API reports it as not alive).
    store.conductor_unregister("c1").await.unwrap();
    let offline = store.conductor_get("c1").await.unwrap();
    assert!(!offline.online);
    assert_eq!(offline.drivers, drivers);

    let missing = store.conductor_get("ghost").await.unwrap_err();
    assert!(matches!(
        missing,
        Error::NotFound {
            kind: Kind::Conductor,
            ..
        }
    ));
}

/// A conductor name's liveness lock is held by one process at a time; a second attempt is
/// refused at once, naming the holder. A conductor registered under the lock is listed online
/// while the lock is held and offline as soon as it is gone, whatever its last heartbeat says;
/// its name is then free at once.
async fn a_conductor_is_alive_while_it_holds_its_lock(store: Store) {
    let drivers = vec!["fake-hardware".to_owned()];
    let minute = std::time::Duration::from_secs(60);
    let lock = store.conductor_lock("c1", minute).await.unwrap();
    let refused = store.conductor_lock("c1", minute).await.unwrap_err();
    let Error::ConductorLocked { hostname, holder } = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(hostname, "c1");
    assert!(
        holder.contains("PostgreSQL session") || holder.contains(".conductor-c1.lock"),
        "{refused}"
    );
    // Another name is another lock.
    let other = store.conductor_lock("c2", minute).await.unwrap();
    store
        .conductor_register_locked(&lock, "", &drivers)
        .await
        .unwrap();
    store
        .conductor_register_locked(&other, "", &drivers)
        .await
        .unwrap();
    // Registered without a lock (a release before locks): judged by its heartbeat alone.
    store.conductor_register("old", "", &drivers).await.unwrap();
    let alive = ConductorFilter {
        alive_since: Some(store.now() - Duration::seconds(60)),
        ..Default::default()
    };
    let names = |conductors: Vec<ferric_model::resources::Conductor>| {
        conductors
            .into_iter()
            .filter(|c| c.online)
            .map(|c| c.hostname)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(store.conductor_list(&alive).await.unwrap()),
        ["c1", "c2", "old"]
    );

    // The holder goes away (as its process would die): offline at once, name free at once.
    lock.release().await;
    assert_eq!(
        names(store.conductor_list(&alive).await.unwrap()),
        ["c2", "old"]
    );
    let all = store
        .conductor_list(&ConductorFilter::default())
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    assert!(!all[0].online, "{all:?}");
    let again = store.conductor_lock("c1", minute).await.unwrap();
    store
        .conductor_register_locked(&again, "", &drivers)
        .await
        .unwrap();
    assert_eq!(
        names(store.conductor_list(&alive).await.unwrap()),
        ["c1", "c2", "old"]
    );
    again.check(&store).await.unwrap();
    // Dropped rather than released: gone too once the database noticed.
    drop(other);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while names(store.conductor_list(&alive).await.unwrap()).len() != 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the dropped lock is still held"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
