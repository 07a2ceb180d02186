//! A multi-host `database_url` (libpq's form) on the real PostgreSQL: a host that does not
//! answer is passed over for the next, and when none answers the error names the URL without
//! its password. (Following a promoted replica is proven by `cargo xtask chaos`, which runs a
//! primary and a streaming replica.)

use ferric_db::Store;

use crate::harness::PgDatabase;
use crate::nodes::enrolled;

/// `url` with `extra` hosts put before its own host (`postgres://user@HOST/db…`).
fn with_hosts_before(url: &str, extra: &str) -> String {
    let (head, rest) = url.split_once('@').expect("the test URL names a user");
    format!("{head}@{extra},{rest}")
}

/// A loopback port nothing listens on: bound, then given back.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_host_that_does_not_answer_is_passed_over() {
    let db = PgDatabase::create().await;
    let dead = format!("127.0.0.1:{}", closed_port());
    let url = format!(
        "{}{}target_session_attrs=read-write",
        with_hosts_before(&db.url, &dead),
        if db.url.contains('?') { "&" } else { "?" }
    );
    let store = Store::open(&url).await.unwrap();
    let node = store.node_create(&enrolled("n1")).await.unwrap();
    assert_eq!(
        store
            .node_get(&ferric_model::resources::Ident::Uuid(node.uuid))
            .await
            .unwrap()
            .uuid,
        node.uuid
    );
    store.close().await;
}

#[tokio::test]
async fn no_host_answering_is_an_error_naming_the_url_without_its_password() {
    let (a, b) = (closed_port(), closed_port());
    let url = format!("postgres://ferric:hunter2@127.0.0.1:{a},127.0.0.1:{b}/ferric");
    let error = Store::open(&url).await.unwrap_err().to_string();
    assert!(!error.contains("hunter2"), "{error}");
    assert!(error.contains(&format!("127.0.0.1:{b}")), "{error}");
}

#[tokio::test]
async fn a_session_attribute_ferric_cannot_use_is_refused_at_open() {
    let error =
        Store::open("postgres://postgres@127.0.0.1:1,127.0.0.1:2/x?target_session_attrs=standby")
            .await
            .unwrap_err()
            .to_string();
    assert!(error.contains("target_session_attrs=standby"), "{error}");
}
