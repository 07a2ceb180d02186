//! Conductors: register (and re-register), heartbeat, list alive ones, go offline.

use chrono::{Duration, Utc};
use ferric_db::{ConductorFilter, Error, Kind, Store};

use crate::harness::backend_tests;

backend_tests!(
    register_heartbeat_list_unregister,
    get_by_hostname_online_or_not,
    a_live_name_cannot_be_claimed
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

/// A name is claimed while free, refused while its holder is alive, and free again once the
/// holder went offline or its heartbeat is older than the limit.
async fn a_live_name_cannot_be_claimed(store: Store) {
    let drivers = vec!["fake-hardware".to_owned()];
    let minute_ago = || Utc::now() - Duration::seconds(60);
    let first = store
        .conductor_claim("c1", "", &drivers, minute_ago())
        .await
        .unwrap()
        .expect("a new name is free");
    assert!(first.online);
    let taken = store
        .conductor_claim("c1", "rack2", &drivers, minute_ago())
        .await
        .unwrap();
    assert!(taken.is_none(), "{taken:?}");
    assert_eq!(store.conductor_get("c1").await.unwrap().conductor_group, "");

    // Silent for longer than the limit (here: any heartbeat before now + 1 s): free.
    let again = store
        .conductor_claim("c1", "rack2", &drivers, Utc::now() + Duration::seconds(1))
        .await
        .unwrap()
        .expect("a silent holder's name is free");
    assert_eq!(again.conductor_group, "rack2");
    assert_eq!(again.created_at, first.created_at);

    // A clean shutdown frees it at once.
    store.conductor_unregister("c1").await.unwrap();
    assert!(
        store
            .conductor_claim("c1", "", &drivers, minute_ago())
            .await
            .unwrap()
            .is_some()
    );
}
