//! The schema version on open: an older schema is upgraded or, when asked, refused; a newer
//! one is always refused with a message saying what to run; and SQLite's online backup
//! copies a populated database whole while the store stays open.

use ferric_db::{Error, SchemaPolicy, Store, StoreOptions};

use crate::rows::{Backend, Conn};
use crate::{Scratch, dataset, migrations_dir, versions};

fn options(schema: SchemaPolicy) -> StoreOptions {
    let mut options = StoreOptions::default();
    options.schema = schema;
    options
}

pub(crate) async fn older_schema_is_upgraded_or_refused(backend: Backend) {
    let all = versions(backend);
    let latest = *all.last().unwrap();
    let old = all[all.len() / 2];
    let database = Scratch::new(backend).await;
    let mut conn = Conn::open(backend, &database.url()).await;
    conn.migrate_to(&migrations_dir(backend), old).await;
    conn.close().await;

    let refused = Store::open_with(&database.url(), &options(SchemaPolicy::RequireCurrent))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            Error::SchemaOutdated { database_version, binary_version, .. }
                if database_version == old && binary_version == latest
        ),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("ferric db upgrade"),
        "{refused}"
    );

    let store = Store::open_with(&database.url(), &options(SchemaPolicy::Unchecked))
        .await
        .unwrap();
    let status = store.schema_status().await.unwrap();
    assert_eq!(status.database_version, old);
    assert_eq!(status.binary_version, latest);
    let pending: Vec<i64> = status.pending.iter().map(|m| m.version).collect();
    assert_eq!(pending, all[all.len() / 2 + 1..]);
    let applied = store.schema_upgrade().await.unwrap();
    assert_eq!(applied, status.pending);
    assert!(store.schema_status().await.unwrap().is_current());
    assert!(store.schema_upgrade().await.unwrap().is_empty());
    store.close().await;

    // Now current, the strict open accepts it.
    Store::open_with(&database.url(), &options(SchemaPolicy::RequireCurrent))
        .await
        .unwrap()
        .close()
        .await;
}

pub(crate) async fn newer_schema_is_refused(backend: Backend) {
    let database = Scratch::new(backend).await;
    Store::open(&database.url()).await.unwrap().close().await;
    // What a later release's migration leaves in sqlx's bookkeeping.
    let checksum = match backend {
        Backend::Sqlite => "X'00'",
        Backend::Postgres => "'\\x00'::bytea",
    };
    let mut conn = Conn::open(backend, &database.url()).await;
    conn.execute_script(&format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
         execution_time) VALUES (9999, 'from the future', TRUE, {checksum}, 0)"
    ))
    .await;
    conn.close().await;

    for policy in [SchemaPolicy::Upgrade, SchemaPolicy::RequireCurrent] {
        let refused = Store::open_with(&database.url(), &options(policy))
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused,
                Error::SchemaTooNew {
                    database_version: 9999,
                    ..
                }
            ),
            "{policy:?}: {refused:?}"
        );
        let message = refused.to_string();
        assert!(
            message.contains("version 9999 (from the future)")
                && message.contains("newer than this ferric"),
            "{message}"
        );
    }
    let store = Store::open_with(&database.url(), &options(SchemaPolicy::Unchecked))
        .await
        .unwrap();
    let status = store.schema_status().await.unwrap();
    assert_eq!(status.unknown.len(), 1);
    assert!(matches!(
        store.schema_upgrade().await.unwrap_err(),
        Error::SchemaTooNew { .. }
    ));
    store.close().await;
}

pub(crate) async fn backup_copies_a_populated_database_while_open(backend: Backend) {
    let database = Scratch::new(backend).await;
    let store = Store::open(&database.url()).await.unwrap();
    dataset::populate(&store).await;
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("backup.db");
    if backend == Backend::Postgres {
        let refused = store.backup_to(&copy).await.unwrap_err();
        assert!(refused.to_string().contains("pg_dump"), "{refused}");
        store.close().await;
        return;
    }
    let original = dataset::read_all(&store).await;
    // The store stays open and in use: the copy is taken beside a live pool.
    store.backup_to(&copy).await.unwrap();
    let refused = store.backup_to(&copy).await;
    assert!(refused.is_err(), "a backup overwrote an existing file");
    store.close().await;

    let backup = Store::open_sqlite_file_read_only(&copy).await.unwrap();
    backup.integrity_check().await.unwrap();
    assert!(backup.schema_status().await.unwrap().is_current());
    assert_eq!(dataset::read_all(&backup).await, original);
    backup.close().await;
}
