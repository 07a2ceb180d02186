//! Fencing: a conductor whose lease on a node lapsed and was taken over by another cannot
//! write over the new owner's work. Its node writes, history entries, renewals and releases
//! all name the grant it held (`Fence`), and all are refused once that grant no longer
//! stands, while the new owner's state stands. Takeover is made with a zero TTL (a lease that
//! lapses at once), not by sleeping.

use std::time::Duration;

use chrono::Utc;
use ferric_db::{Error, Fence, LeaseRelease, Store, WriteGuard};
use ferric_model::ProvisionState;
use ferric_model::resources::{BiosSetting, Ident, JsonObject, NodeHistoryEntry};
use serde_json::json;
use uuid::Uuid;

use crate::harness::backend_tests;
use crate::nodes::enrolled;

backend_tests!(
    a_taken_over_holder_writes_nothing,
    a_new_grant_to_the_same_name_fences_off_the_old_one,
    generations_only_grow,
    a_standing_fence_leaves_other_refusals_as_they_were,
    hardware_records_are_fenced_too,
);

const MINUTE: Duration = Duration::from_secs(60);

fn entry(node: Uuid, holder: &str, event: &str) -> NodeHistoryEntry {
    NodeHistoryEntry {
        uuid: Uuid::new_v4(),
        node,
        created_at: Utc::now(),
        severity: "INFO".to_owned(),
        event_type: "provisioning".to_owned(),
        event: event.to_owned(),
        conductor: Some(holder.to_owned()),
        user: None,
    }
}

fn is_lease_lost(error: &Error, holder: &str) -> bool {
    matches!(error, Error::LeaseLost { holder: h, .. } if h == holder)
}

/// Conductor A holds the node; it is cut off, its lease lapses and B takes the node over and
/// moves it on. A comes back with what it read before: every write it tries is refused, and
/// the node, its history and B's lease are B's.
async fn a_taken_over_holder_writes_nothing(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap();
    let uuid = node.uuid;
    let a = store
        .node_lease_acquire(uuid, "conductor-a", Duration::ZERO)
        .await
        .unwrap();
    // A's write while it still holds the grant lands (a lapsed lease nobody took is still
    // the holder's).
    let mut mine = node.clone();
    mine.provision_state = ProvisionState::Verifying;
    let a_node = store
        .node_save(&mine, &node, Fence::of(&a), WriteGuard::Revision, None)
        .await
        .unwrap()
        .unwrap();

    let b = store
        .node_lease_acquire(uuid, "conductor-b", MINUTE)
        .await
        .unwrap();
    assert!(b.generation > a.generation, "{a:?} then {b:?}");
    let mut theirs = a_node.clone();
    theirs.provision_state = ProvisionState::Manageable;
    theirs.last_error = None;
    let b_node = store
        .node_save(
            &theirs,
            &a_node,
            Fence::of(&b),
            WriteGuard::Revision,
            Some(&entry(uuid, "conductor-b", "B: verifying -> manageable")),
        )
        .await
        .unwrap()
        .unwrap();

    // A, back, writes over the revision it knows, then over the current one: both refused,
    // whatever the revision, with or without a history entry or a release.
    let mut stale = a_node.clone();
    stale.provision_state = ProvisionState::Enroll;
    stale.last_error = Some("A failed the node".to_owned());
    let refused = store
        .node_save(&stale, &a_node, Fence::of(&a), WriteGuard::Revision, None)
        .await
        .unwrap_err();
    assert!(is_lease_lost(&refused, "conductor-a"), "{refused:?}");
    assert!(refused.is_conflict());
    let mut current = b_node.clone();
    current.provision_state = ProvisionState::Enroll;
    let refused = store
        .node_save_releasing(
            &current,
            &b_node,
            WriteGuard::RevisionUnlessAborted,
            Some(&entry(uuid, "conductor-a", "A: fail")),
            LeaseRelease {
                fence: Fence::of(&a),
                forget_abort: true,
            },
        )
        .await
        .unwrap_err();
    assert!(is_lease_lost(&refused, "conductor-a"), "{refused:?}");
    let refused = store
        .node_history_add_fenced(&entry(uuid, "conductor-a", "A: late news"), Fence::of(&a))
        .await
        .unwrap_err();
    assert!(is_lease_lost(&refused, "conductor-a"), "{refused:?}");
    let renew = store
        .node_lease_renew(uuid, Fence::of(&a), MINUTE)
        .await
        .unwrap_err();
    assert!(matches!(renew, Error::LeaseNotHeld { .. }), "{renew:?}");
    let release = store
        .node_lease_give_back(uuid, Fence::of(&a), true)
        .await
        .unwrap_err();
    assert!(matches!(release, Error::LeaseNotHeld { .. }), "{release:?}");

    // B's state, B's history, B's lease.
    let stored = store.node_get(&Ident::Uuid(uuid)).await.unwrap();
    assert_eq!(stored, b_node);
    assert_eq!(stored.provision_state, ProvisionState::Manageable);
    assert_eq!(stored.last_error, None);
    let history = store.node_history_list(uuid).await.unwrap();
    let events: Vec<&str> = history.iter().map(|entry| entry.event.as_str()).collect();
    assert_eq!(events, ["B: verifying -> manageable"]);
    assert_eq!(store.node_lease_get(uuid).await.unwrap(), Some(b.clone()));

    // B's own writes and release go on as before.
    store
        .node_lease_renew(uuid, Fence::of(&b), MINUTE)
        .await
        .unwrap();
    store
        .node_history_add_fenced(&entry(uuid, "conductor-b", "B: note"), Fence::of(&b))
        .await
        .unwrap();
    store
        .node_lease_give_back(uuid, Fence::of(&b), false)
        .await
        .unwrap();
    assert!(store.node_lease_get(uuid).await.unwrap().is_none());

    // A lease released and then gone entirely still refuses A.
    let refused = store
        .node_save(&stale, &b_node, Fence::of(&a), WriteGuard::Revision, None)
        .await
        .unwrap_err();
    assert!(is_lease_lost(&refused, "conductor-a"), "{refused:?}");
    assert_eq!(store.node_get(&Ident::Uuid(uuid)).await.unwrap(), b_node);
}

/// Another process under the same conductor name (a restart while the old one was cut off)
/// takes the node again: the old process's grant is fenced off as well as another name's.
async fn a_new_grant_to_the_same_name_fences_off_the_old_one(store: Store) {
    let node = store.node_create(&enrolled("n")).await.unwrap();
    let old = store
        .node_lease_acquire(node.uuid, "conductor-a", MINUTE)
        .await
        .unwrap();
    let new = store
        .node_lease_acquire(node.uuid, "conductor-a", MINUTE)
        .await
        .unwrap();
    assert!(new.generation > old.generation);
    assert_eq!(new.acquired_at, old.acquired_at);
    let mut changed = node.clone();
    changed.provision_state = ProvisionState::Verifying;
    let refused = store
        .node_save(&changed, &node, Fence::of(&old), WriteGuard::Revision, None)
        .await
        .unwrap_err();
    assert!(is_lease_lost(&refused, "conductor-a"), "{refused:?}");
    // The old grant's release leaves the new one in place.
    assert!(matches!(
        store
            .node_lease_give_back(node.uuid, Fence::of(&old), false)
            .await,
        Err(Error::LeaseNotHeld { .. })
    ));
    assert_eq!(
        store.node_lease_get(node.uuid).await.unwrap(),
        Some(new.clone())
    );
    let saved = store
        .node_save(&changed, &node, Fence::of(&new), WriteGuard::Revision, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(saved.provision_state, ProvisionState::Verifying);
}

/// Every grant's generation is larger than every earlier one's, across nodes, releases and a
/// node's deletion.
async fn generations_only_grow(store: Store) {
    let mut last = 0;
    for round in 0..3 {
        let node = store
            .node_create(&enrolled(&format!("n{round}")))
            .await
            .unwrap()
            .uuid;
        for holder in ["c1", "c2", "c1"] {
            let lease = store
                .node_lease_acquire(node, holder, MINUTE)
                .await
                .unwrap();
            assert!(lease.generation > last, "{lease:?} after {last}");
            last = lease.generation;
            store
                .node_lease_give_back(node, Fence::of(&lease), false)
                .await
                .unwrap();
        }
        store.node_delete(node).await.unwrap();
    }
}

/// A fenced write refused for another reason while its fence stands is refused for that
/// reason: an abort mark (`Ok(None)`, nothing written) or a revision moved on (a stale
/// revision, which the conductor re-reads and retries), never as a lost lease.
async fn a_standing_fence_leaves_other_refusals_as_they_were(store: Store) {
    let mut node = store.node_create(&enrolled("n")).await.unwrap();
    node.provision_state = ProvisionState::Deploying;
    let node = store.node_update(&node, node.version).await.unwrap();
    let lease = store
        .node_lease_acquire(node.uuid, "conductor-a", MINUTE)
        .await
        .unwrap();

    let mut api_edit = node.clone();
    api_edit.extra.insert("by".into(), "api".into());
    let moved_on = store.node_update(&api_edit, node.version).await.unwrap();
    let mut mine = node.clone();
    mine.provision_state = ProvisionState::Active;
    let stale = store
        .node_save(&mine, &node, Fence::of(&lease), WriteGuard::Revision, None)
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::StaleRevision { .. }), "{stale:?}");

    assert!(
        store
            .node_abort_request_set(node.uuid, moved_on.version, &[ProvisionState::Deploying])
            .await
            .unwrap()
    );
    let marked = store.node_get(&Ident::Uuid(node.uuid)).await.unwrap();
    let mut mine = marked.clone();
    mine.provision_state = ProvisionState::Active;
    let refused = store
        .node_save(
            &mine,
            &marked,
            Fence::of(&lease),
            WriteGuard::RevisionUnlessAborted,
            Some(&entry(node.uuid, "conductor-a", "deploying -> active")),
        )
        .await
        .unwrap();
    assert_eq!(refused, None);
    assert_eq!(
        store.node_get(&Ident::Uuid(node.uuid)).await.unwrap(),
        marked
    );
    assert!(store.node_history_list(node.uuid).await.unwrap().is_empty());
}

fn bios(name: &str, value: &str) -> BiosSetting {
    BiosSetting {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        registry: JsonObject::new(),
        created_at: Utc::now(),
        updated_at: None,
    }
}

fn inventory(cpus: u64) -> JsonObject {
    match json!({"cpu": {"count": cpus}}) {
        serde_json::Value::Object(map) => map,
        _ => unreachable!(),
    }
}

/// The BIOS settings, firmware versions and inventory a conductor reads from the hardware
/// are written under its lease too: after a takeover, the old holder's late writes (and
/// deletions) are refused with `LeaseLost` and the new owner's records stand.
async fn hardware_records_are_fenced_too(store: Store) {
    let uuid = store.node_create(&enrolled("n")).await.unwrap().uuid;
    let a = store
        .node_lease_acquire(uuid, "conductor-a", Duration::ZERO)
        .await
        .unwrap();
    let a_fence = Fence::of(&a);
    store
        .node_bios_set(
            uuid,
            &[bios("BootMode", "Bios"), bios("Old", "1")],
            Some(a_fence),
        )
        .await
        .unwrap();
    let versions = [("bmc".to_owned(), "1.0".to_owned())];
    store
        .node_firmware_set(uuid, &versions, &[], Some(a_fence))
        .await
        .unwrap();
    store
        .node_inventory_set(uuid, &inventory(2), &JsonObject::new(), Some(a_fence))
        .await
        .unwrap();

    let b = store
        .node_lease_acquire(uuid, "conductor-b", MINUTE)
        .await
        .unwrap();
    let b_fence = Fence::of(&b);
    store
        .node_bios_set(
            uuid,
            &[bios("BootMode", "Uefi"), bios("Old", "1")],
            Some(b_fence),
        )
        .await
        .unwrap();
    store
        .node_inventory_set(uuid, &inventory(8), &JsonObject::new(), Some(b_fence))
        .await
        .unwrap();

    // A comes back: an upsert, a deletion (it no longer sees "Old"), firmware, inventory.
    let error = store
        .node_bios_set(uuid, &[bios("BootMode", "Bios")], Some(a_fence))
        .await
        .unwrap_err();
    assert!(is_lease_lost(&error, "conductor-a"), "{error:?}");
    let error = store
        .node_bios_set(uuid, &[], Some(a_fence))
        .await
        .unwrap_err();
    assert!(is_lease_lost(&error, "conductor-a"), "{error:?}");
    let stale = [("bmc".to_owned(), "0.9".to_owned())];
    let error = store
        .node_firmware_set(uuid, &stale, &[], Some(a_fence))
        .await
        .unwrap_err();
    assert!(is_lease_lost(&error, "conductor-a"), "{error:?}");
    let error = store
        .node_inventory_set(uuid, &inventory(1), &JsonObject::new(), Some(a_fence))
        .await
        .unwrap_err();
    assert!(is_lease_lost(&error, "conductor-a"), "{error:?}");

    let settings = store.node_bios_list(uuid).await.unwrap();
    let shown: Vec<(&str, Option<&str>)> = settings
        .iter()
        .map(|setting| (setting.name.as_str(), setting.value.as_deref()))
        .collect();
    assert_eq!(shown, [("BootMode", Some("Uefi")), ("Old", Some("1"))]);
    let firmware = store.node_firmware_list(uuid).await.unwrap();
    assert_eq!(firmware[0].current_version, "1.0");
    let stored = store.node_inventory_get(uuid).await.unwrap().unwrap();
    assert_eq!(stored.inventory["cpu"]["count"], 8);
}
