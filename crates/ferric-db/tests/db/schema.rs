//! The schema check: an empty database brought up by the migrations must have exactly the
//! schema of the fresh `schema/<backend>.sql`, compared by introspection (tables, columns,
//! indexes, constraints), ignoring sqlx's `_sqlx_migrations` bookkeeping table.
//!
//! So the fresh schema file is always a true picture of the database, and a migration that
//! forgets something (an index, a default) fails here rather than in production.

use std::collections::BTreeSet;

/// Lines in one description of a schema and not the other, ready to print.
fn difference(migrated: &BTreeSet<String>, fresh: &BTreeSet<String>) -> String {
    let mut report = String::new();
    for line in migrated.difference(fresh) {
        report.push_str(&format!("  only after migrations: {line}\n"));
    }
    for line in fresh.difference(migrated) {
        report.push_str(&format!("  only in the fresh schema: {line}\n"));
    }
    report
}

fn assert_same(backend: &str, migrated: BTreeSet<String>, fresh: BTreeSet<String>) {
    assert!(
        !migrated.is_empty(),
        "introspection found nothing on {backend}"
    );
    let report = difference(&migrated, &fresh);
    assert!(
        report.is_empty(),
        "the {backend} migrations and schema/{backend}.sql disagree:\n{report}"
    );
}

mod sqlite {
    use std::collections::BTreeSet;

    use ferric_db::Store;
    use sqlx::sqlite::SqliteConnection;
    use sqlx::{Connection, Row};

    use crate::harness::SqliteFile;

    const FRESH: &str = include_str!("../../schema/sqlite.sql");

    #[tokio::test]
    async fn migrations_match_fresh_schema() {
        let migrated = SqliteFile::new();
        Store::open(&migrated.url()).await.unwrap().close().await;
        let fresh = SqliteFile::new();
        let mut connection = SqliteConnection::connect(&fresh.url()).await.unwrap();
        sqlx::raw_sql(FRESH).execute(&mut connection).await.unwrap();
        connection.close().await.unwrap();

        let migrated = describe(&migrated.url()).await;
        let fresh = describe(&fresh.url()).await;
        super::assert_same("sqlite", migrated, fresh);
    }

    async fn describe(url: &str) -> BTreeSet<String> {
        let mut connection = SqliteConnection::connect(url).await.unwrap();
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT LIKE 'sqlite_%' AND name <> '_sqlx_migrations'",
        )
        .fetch_all(&mut connection)
        .await
        .unwrap();
        let mut lines = BTreeSet::new();
        for table in tables {
            lines.insert(format!("table {table}"));
            let sql = format!(
                "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info('{table}')"
            );
            for row in sqlx::query(&sql).fetch_all(&mut connection).await.unwrap() {
                lines.insert(format!(
                    "column {table}.{} {} notnull={} default={:?} pk={}",
                    row.get::<String, _>(0),
                    row.get::<String, _>(1),
                    row.get::<i64, _>(2),
                    row.get::<Option<String>, _>(3),
                    row.get::<i64, _>(4),
                ));
            }
            let sql = format!(
                "SELECT name, \"unique\", origin, partial FROM pragma_index_list('{table}')"
            );
            for row in sqlx::query(&sql).fetch_all(&mut connection).await.unwrap() {
                let index: String = row.get(0);
                let columns: Vec<String> = sqlx::query_scalar(&format!(
                    "SELECT name FROM pragma_index_info('{index}') ORDER BY seqno"
                ))
                .fetch_all(&mut connection)
                .await
                .unwrap();
                // Automatic indexes (UNIQUE constraints) get numbered names; describe them by
                // what they index instead.
                let name = if index.starts_with("sqlite_autoindex_") {
                    "(auto)"
                } else {
                    &index
                };
                lines.insert(format!(
                    "index {table}.{name} ({}) unique={} origin={} partial={}",
                    columns.join(", "),
                    row.get::<i64, _>(1),
                    row.get::<String, _>(2),
                    row.get::<i64, _>(3),
                ));
            }
            let sql = format!(
                "SELECT \"table\", \"from\", \"to\", on_update, on_delete FROM pragma_foreign_key_list('{table}')"
            );
            for row in sqlx::query(&sql).fetch_all(&mut connection).await.unwrap() {
                lines.insert(format!(
                    "foreign key {table}.{} -> {}.{} on update {} on delete {}",
                    row.get::<String, _>(1),
                    row.get::<String, _>(0),
                    row.get::<Option<String>, _>(2).unwrap_or_default(),
                    row.get::<String, _>(3),
                    row.get::<String, _>(4),
                ));
            }
        }
        connection.close().await.unwrap();
        lines
    }
}

mod postgres {
    use std::collections::BTreeSet;

    use ferric_db::Store;
    use sqlx::postgres::PgConnection;
    use sqlx::{Connection, Row};

    use crate::harness::PgDatabase;

    const FRESH: &str = include_str!("../../schema/postgres.sql");

    #[tokio::test]
    async fn migrations_match_fresh_schema() {
        let migrated = PgDatabase::create().await;
        Store::open(&migrated.url).await.unwrap().close().await;
        let fresh = PgDatabase::create().await;
        let mut connection = PgConnection::connect(&fresh.url).await.unwrap();
        sqlx::raw_sql(FRESH).execute(&mut connection).await.unwrap();
        connection.close().await.unwrap();

        let migrated_schema = describe(&migrated.url).await;
        let fresh_schema = describe(&fresh.url).await;
        super::assert_same("postgres", migrated_schema, fresh_schema);
    }

    async fn describe(url: &str) -> BTreeSet<String> {
        let mut connection = PgConnection::connect(url).await.unwrap();
        let queries = [
            // Columns, without their position: a column added by ALTER TABLE lands last.
            "SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type \
             || ' nullable=' || is_nullable || ' default=' || coalesce(column_default, '-') \
             || ' identity=' || is_identity || coalesce(' ' || identity_generation, '') \
             FROM information_schema.columns \
             WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations'",
            "SELECT 'index ' || tablename || '.' || indexname || ': ' || indexdef \
             FROM pg_indexes WHERE schemaname = 'public' AND tablename <> '_sqlx_migrations'",
            "SELECT 'constraint ' || conrelid::regclass::text || '.' || conname || ': ' \
             || pg_get_constraintdef(oid) \
             FROM pg_constraint WHERE connamespace = 'public'::regnamespace \
             AND conrelid::regclass::text <> '_sqlx_migrations'",
        ];
        let mut lines = BTreeSet::new();
        for sql in queries {
            for row in sqlx::query(sql).fetch_all(&mut connection).await.unwrap() {
                lines.insert(row.get::<String, _>(0));
            }
        }
        connection.close().await.unwrap();
        lines
    }
}
