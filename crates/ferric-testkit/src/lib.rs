//! Test fixtures with scenario verbs, shared by the API tests, the binary's tests and the QEMU
//! lab suites, so that a test reads like a runbook: enroll a node, run it until a state,
//! start from a layered state, and fail with the node's `last_error` and history.
//!
//! - [`doc`]: the check that a generated document (OpenAPI, configuration, state diagram) is
//!   the checked-in one, rewritten under `FERRIC_UPDATE_DOCS=1` (`cargo xtask docs`).
//! - `api` (feature `api`): an API and its conductor in-process over a fresh database;
//!   `enroll_node`, `run_until_state`, `node_in(state)` through the real API calls.
//! - `lab` (feature `lab`): the QEMU lab harness: lab up/down around a scenario run inside
//!   the lab's namespace, `ferric server` wired to it, a blocking API client with the same
//!   verbs, enrolling a lab machine, the run directory kept with its logs on failure.
//!
//! A dev-dependency only (`publish = false`): it asserts and panics as tests do.
#![allow(
    clippy::unwrap_used,
    reason = "test fixtures: a failed unwrap is a failed test, with its message"
)]

#[cfg(feature = "api")]
pub mod api;
pub mod doc;
#[cfg(feature = "lab")]
pub mod lab;
