//! Ferric's domain model: the provision state machine as data, API microversions and the
//! resource types (nodes, ports, …) shared by every other crate.
//!
//! Architecture Invariant: this crate does no IO and depends on no database, HTTP or BMC
//! library. Everything in it can be exercised by plain unit tests.

pub mod action;
pub mod state;
pub mod values;

pub use machine::{Event, Verb, check_verb, next_state};
pub use microversion::Microversion;
pub use state::ProvisionState;
pub mod machine;
pub mod microversion;
pub mod resources;
pub mod secrets;
