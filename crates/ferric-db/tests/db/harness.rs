//! The storage suite's test macro; the fresh databases come from `ferric_db::testing`.

pub(crate) use ferric_db::testing::{PgDatabase, SqliteFile, TestDb};

/// Instantiates each listed `async fn name(store: Store)` of the calling module as two tests,
/// `sqlite::name` and `postgres::name`, each on a fresh database of its own.
macro_rules! backend_tests {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = $crate::harness::TestDb::sqlite().await;
                    super::$name(db.store.clone()).await;
                }
            )+
        }

        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = $crate::harness::TestDb::postgres().await;
                    super::$name(db.store.clone()).await;
                }
            )+
        }
    };
}
pub(crate) use backend_tests;
