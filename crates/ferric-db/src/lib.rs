//! Ferric's storage layer: one interface over SQLite and PostgreSQL.
//!
//! Open a [`Store`] from a URL and call its resource-first methods: `node_create`,
//! `node_list`, `port_get`, `node_lease_acquire`, `conductor_heartbeat`, … Records are the plain
//! types of [`ferric_model::resources`]; errors are [`Error`].
//!
//! Architecture Invariants: every method is one SQL statement (or a read followed by one write
//! that is guarded against races; [`Store::import`] writes a whole import in one transaction,
//! SQL only), so no transaction is ever held open across anything but SQL;
//! both backends run the same SQL text (see `store.rs` and `sql.rs` for how); the schema is
//! versioned migrations per backend, checked against a fresh schema file by the test suite.

#[macro_use]
mod paging;

mod allocations;
mod chassis;
mod clock;
mod conductors;
mod error;
mod import;
mod inspection_rules;
mod introspections;
mod leases;
mod liveness;
mod local;
mod node_listing;
mod nodes;
mod pg_hosts;
mod portgroups;
mod ports;
mod requests;
mod schema;
mod sql;
mod store;
mod templates;
pub mod testing;
mod volumes;

pub use allocations::{AllocationFilter, AllocationSortKey};
pub use chassis::ChassisSortKey;
pub use conductors::ConductorFilter;
pub use error::{Error, Kind, redact};
pub use import::{ImportMode, ImportSet};
pub use inspection_rules::{InspectionRuleFilter, InspectionRuleSortKey};
pub use introspections::{Introspection, IntrospectionRule};
pub use leases::Fence;
pub use liveness::ConductorLock;
pub use local::SqliteSync;
pub use node_listing::{NODE_COLUMNS, NodeHead};
pub use nodes::history::{LeaseRelease, WriteGuard};
pub use nodes::{NodeFilter, NodeSortKey};
pub use paging::{Page, SortDir, SortKey, UnknownSortDir, UnknownSortKey};
pub use portgroups::{PortgroupFilter, PortgroupSortKey};
pub use ports::{PortFilter, PortSortKey};
pub use requests::{ConductorRequest, MEMBERSHIP_CHANNEL, REPLIES_CHANNEL, REQUESTS_CHANNEL};
pub use schema::{SchemaMigration, SchemaStatus};
pub use store::{Listener, SchemaPolicy, Store, StoreOptions};
pub use templates::{DeployTemplateSortKey, RunbookFilter, RunbookSortKey};
pub use volumes::{VolumeConnectorSortKey, VolumeFilter, VolumeTargetSortKey};
