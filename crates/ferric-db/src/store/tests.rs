//! Tests of the store's own machinery: the SQLite write turn and local connections.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Waker};

use ferric_model::resources::JsonObject;
use uuid::Uuid;

use super::*;
use crate::sql::JsonArg;
use crate::testing::SqliteFile;

/// Polls `future` `polls` times, yielding to the runtime between polls so the connection's
/// thread gets on with it, then drops it: a caller that went away halfway.
async fn abandon_after<F: Future>(future: F, polls: usize) {
    let mut future = pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    for _ in 0..polls {
        if future.as_mut().poll(&mut context).is_ready() {
            return;
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

fn sqlite_pool(store: &Store) -> &SqlitePool {
    match &store.pool {
        Pool::Sqlite(pool) => pool,
        Pool::Postgres(_) => unreachable!("a SQLite test store"),
    }
}

async fn count(store: &Store, sql: &str, a: i64) -> i64 {
    // Through the pool, not the write connection: a transaction left open on the latter
    // would hide its writes from here.
    sqlx::query_scalar(sql)
        .bind(a)
        .fetch_one(sqlite_pool(store))
        .await
        .expect("count")
}

async fn pairs_store(file: &SqliteFile) -> Store {
    let store = Store::open(&file.url()).await.expect("open");
    store
        .execute("CREATE TABLE pairs (a INTEGER PRIMARY KEY, b INTEGER)", &[])
        .await
        .expect("create");
    store
        .execute("CREATE TABLE marks (a INTEGER UNIQUE)", &[])
        .await
        .expect("create");
    store
}

const MARK: &str = "$1";

/// A write dropped anywhere inside its transaction on the shared write connection leaves
/// no transaction open behind it: later writes commit on their own and other connections
/// see them, and each pair is whole or absent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_transaction_leaves_the_write_connection_clean() {
    let file = SqliteFile::new();
    let store = pairs_store(&file).await;
    for polls in 0..40 {
        let args = [Arg::Int(polls)];
        let write = store.fetch_optional_then(
            (
                "INSERT INTO pairs (a, b) VALUES ($1, 0) RETURNING a",
                &args,
                |row| row.int("a"),
            ),
            InsertRow {
                into: "marks (a)",
                values: MARK,
                args: &args,
            },
        );
        abandon_after(write, polls as usize).await;
        store
            .execute(
                "INSERT INTO pairs (a, b) VALUES ($1, 2)",
                &[Arg::Int(1000 + polls)],
            )
            .await
            .expect("a write after an abandoned one");
        let seen = count(
            &store,
            "SELECT COUNT(*) FROM pairs WHERE a = $1",
            1000 + polls,
        )
        .await;
        assert_eq!(seen, 1, "after abandoning at poll {polls}");
        let pair = count(&store, "SELECT COUNT(*) FROM pairs WHERE a = $1", polls).await;
        let mark = count(&store, "SELECT COUNT(*) FROM marks WHERE a = $1", polls).await;
        assert_eq!(pair, mark, "half a pair after abandoning at poll {polls}");
    }
    store.close().await;
    assert!(matches!(
        store.execute("DELETE FROM pairs", &[]).await,
        Err(sqlx::Error::PoolClosed)
    ));
}

/// The second statement runs only after a first that returned a row, with its own
/// placeholders; when it fails, the first is undone and the connection stays usable.
#[tokio::test]
async fn pair_writes_both_or_neither() {
    let file = SqliteFile::new();
    let store = pairs_store(&file).await;
    let first = "UPDATE pairs SET b = b + 1 WHERE a = $1 RETURNING b";
    let pair = |a: i64| [Arg::Int(a)];
    let written = store
        .fetch_optional_then(
            (
                "INSERT INTO pairs (a, b) VALUES ($1, 0) RETURNING b",
                &pair(1),
                |row| row.int("b"),
            ),
            InsertRow {
                into: "marks (a)",
                values: "$1",
                args: &[Arg::Int(7)],
            },
        )
        .await
        .expect("pair");
    assert_eq!(written, Some(0));
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM marks WHERE a = $1", 7).await,
        1
    );
    // No row from the first: the second is not written.
    let written = store
        .fetch_optional_then(
            (first, &pair(2), |row| row.int("b")),
            InsertRow {
                into: "marks (a)",
                values: "$1",
                args: &[Arg::Int(8)],
            },
        )
        .await
        .expect("pair");
    assert_eq!(written, None);
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM marks WHERE a = $1", 8).await,
        0
    );
    // The second fails (a duplicate mark): the first is rolled back with it.
    let failed = store
        .fetch_optional_then(
            (first, &pair(1), |row| row.int("b")),
            InsertRow {
                into: "marks (a)",
                values: "$1",
                args: &[Arg::Int(7)],
            },
        )
        .await;
    assert!(failed.is_err(), "{failed:?}");
    let b: i64 = sqlx::query_scalar("SELECT b FROM pairs WHERE a = 1")
        .fetch_one(sqlite_pool(&store))
        .await
        .expect("b");
    assert_eq!(b, 0, "the first statement of a failed pair is undone");
    store
        .execute("INSERT INTO pairs (a, b) VALUES (3, 0)", &[])
        .await
        .expect("a write after a failed pair");
    assert_eq!(
        count(&store, "SELECT COUNT(*) FROM pairs WHERE a = $1", 3).await,
        1
    );
}

/// The local connections store every kind of value as sqlx's SQLite driver does, and
/// each reads back what the other wrote: a database written by either is the same file.
#[tokio::test]
async fn local_connections_and_sqlx_store_values_alike() {
    let file = SqliteFile::new();
    let store = Store::open(&file.url()).await.expect("open");
    store
        .execute(
            "CREATE TABLE vals (k INTEGER, i, b, nb, t, u, nu, tm, j)",
            &[],
        )
        .await
        .expect("create");
    let uuid = Uuid::new_v4();
    let time = Utc::now();
    let mut object = JsonObject::new();
    object.insert(
        "ports".into(),
        serde_json::json!([1, "two", {"three": null}]),
    );
    let args = |k: i64| {
        [
            Arg::Int(k),
            Arg::Int(-42),
            Arg::Bool(true),
            Arg::OptBool(None),
            Arg::Text("it's; a \"text\""),
            Arg::Uuid(uuid),
            Arg::OptUuid(None),
            Arg::Time(time),
            Arg::Json(JsonArg::Object(&object)),
        ]
    };
    let insert = "INSERT INTO vals VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";
    store.execute(insert, &args(1)).await.expect("local insert");
    sqlx::query(insert)
        .bind_args(&args(2))
        .execute(sqlite_pool(&store))
        .await
        .expect("sqlx insert");

    let stored: Vec<String> = sqlx::query_scalar(
        "SELECT typeof(i) || typeof(b) || typeof(nb) || typeof(t) || typeof(u) || \
         typeof(nu) || typeof(tm) || typeof(j) || ':' || quote(i) || quote(b) || \
         quote(nb) || quote(t) || quote(u) || quote(nu) || quote(tm) || quote(j) \
         FROM vals ORDER BY k",
    )
    .fetch_all(sqlite_pool(&store))
    .await
    .expect("stored");
    assert_eq!(stored.len(), 2);
    assert_eq!(
        stored[0], stored[1],
        "local (first) and sqlx (second) differ"
    );

    type Decoded = (
        i64,
        bool,
        Option<bool>,
        String,
        Uuid,
        Option<Uuid>,
        DateTime<Utc>,
    );
    fn decode(row: &dyn DbRow) -> Result<(Decoded, JsonObject), sqlx::Error> {
        Ok((
            (
                row.int("i")?,
                row.bool("b")?,
                row.opt_bool("nb")?,
                row.text("t")?,
                row.uuid("u")?,
                row.opt_uuid("nu")?,
                row.time("tm")?,
            ),
            row.json_object("j")?,
        ))
    }
    let expected = (
        (
            -42,
            true,
            None,
            "it's; a \"text\"".to_owned(),
            uuid,
            None,
            db_time(time),
        ),
        object.clone(),
    );
    let select = "SELECT * FROM vals ORDER BY k";
    let local = store.fetch_all(select, &[], decode).await.expect("local");
    let pooled = sqlx::query(select)
        .fetch_all(sqlite_pool(&store))
        .await
        .expect("sqlx");
    for decoded in local
        .into_iter()
        .chain(pooled.iter().map(|row| decode(row).expect("decode")))
    {
        assert_eq!(decoded, expected);
    }
}
