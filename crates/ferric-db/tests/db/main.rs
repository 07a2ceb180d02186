//! The storage test suite. Every test runs twice, once per backend, and is named
//! `<module>::sqlite::<test>` or `<module>::postgres::<test>` so the runner's output shows
//! which backend each ran on. See `harness.rs` for how each test gets a fresh database.

// Tests panic on purpose: a failed `unwrap` is the failure report. Clippy's `allow-unwrap-in-tests`
// only covers `#[test]` functions, not the shared bodies the `backend_tests!` macro calls.
#![allow(clippy::unwrap_used)]

mod harness;

mod aborts;
mod allocations;
mod conductors;
mod fencing;
mod history;
mod import;
mod inspection_rules;
mod introspections;
mod leases;
mod nodes;
mod pg_hosts;
mod ports;
mod schema;
mod templates;
mod volumes;
