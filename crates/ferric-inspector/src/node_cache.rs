//! The node cache's records: one introspection per node, its state (`reference/ironic.md`
//! §5.1) and the lookup attributes incoming data is matched against, as the service shows
//! them and as the store keeps them (`ferric_db::Introspection`).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

/// Introspection states (`reference/ironic.md` §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntrospectionState {
    Starting,
    Waiting,
    Processing,
    Finished,
    Error,
    /// An abort or a timeout is undoing the boot; it ends in `error`.
    Aborting,
}

impl IntrospectionState {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Waiting => "waiting",
            Self::Processing => "processing",
            Self::Finished => "finished",
            Self::Error => "error",
            Self::Aborting => "aborting",
        }
    }

    /// The state a stored name means; `None` for a name this version does not know.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Starting,
            Self::Waiting,
            Self::Processing,
            Self::Finished,
            Self::Error,
            Self::Aborting,
        ]
        .into_iter()
        .find(|state| state.as_str() == name)
    }

    pub const fn is_finished(self) -> bool {
        matches!(self, Self::Finished | Self::Error)
    }
}

/// One node's introspection, as the node cache keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Introspection {
    pub uuid: Uuid,
    pub state: IntrospectionState,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
    pub manage_boot: bool,
    pub macs: BTreeSet<String>,
    pub bmc_addresses: BTreeSet<String>,
}

impl Introspection {
    /// A new introspection of `node` in `state`, started now.
    pub fn new(
        node: Uuid,
        state: IntrospectionState,
        manage_boot: bool,
        macs: BTreeSet<String>,
        bmc_addresses: BTreeSet<String>,
    ) -> Self {
        Self {
            uuid: node,
            state,
            started_at: Utc::now(),
            finished_at: None,
            error: None,
            manage_boot,
            macs,
            bmc_addresses,
        }
    }

    /// The record the store keeps.
    pub fn to_record(&self) -> ferric_db::Introspection {
        ferric_db::Introspection {
            node: self.uuid,
            state: self.state.as_str().to_owned(),
            manage_boot: self.manage_boot,
            macs: self.macs.iter().cloned().collect(),
            bmc_addresses: self.bmc_addresses.iter().cloned().collect(),
            error: self.error.clone(),
            started_at: self.started_at,
            finished_at: self.finished_at,
        }
    }

    /// The stored record. A state name this version does not know (written by a newer one)
    /// reads as `error` when finished and `processing` (hands off) when not.
    pub fn from_record(record: ferric_db::Introspection) -> Self {
        let state =
            IntrospectionState::parse(&record.state).unwrap_or(if record.finished_at.is_some() {
                IntrospectionState::Error
            } else {
                IntrospectionState::Processing
            });
        Self {
            uuid: record.node,
            state,
            started_at: record.started_at,
            finished_at: record.finished_at,
            error: record.error,
            manage_boot: record.manage_boot,
            macs: record.macs.into_iter().collect(),
            bmc_addresses: record.bmc_addresses.into_iter().collect(),
        }
    }

    /// `GET /v1/introspection/{node}`.
    pub fn status_json(&self, base_url: &str) -> Value {
        let time = |at: DateTime<Utc>| at.format("%Y-%m-%dT%H:%M:%S").to_string();
        json!({
            "uuid": self.uuid,
            "finished": self.state.is_finished(),
            "state": self.state.as_str(),
            "started_at": time(self.started_at),
            "finished_at": self.finished_at.map(time),
            "error": self.error,
            "links": [{
                "href": format!("{}/v1/introspection/{}", base_url.trim_end_matches('/'), self.uuid),
                "rel": "self",
            }],
        })
    }
}
