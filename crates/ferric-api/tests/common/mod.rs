//! What the API test files share: the test environment of `ferric-testkit` (a router and its
//! conductor on a real database, `enroll_node`, `run_until_state`, `node_in`), re-exported so
//! each file reads `common::Api`.

pub(crate) use ferric_testkit::api::*;
