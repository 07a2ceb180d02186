//! `ferric-agent`: the program that runs in a ramdisk on the machine being provisioned.
//!
//! # Theory of operation
//!
//! The agent speaks the ironic-python-agent (IPA) protocol, so Ferric's conductor and an
//! unmodified Ironic can both drive it:
//!
//! 1. **Lookup** (`client`): the agent asks the Bare Metal API which node it is
//!    (`GET /v1/lookup?addresses=<MACs>`), retrying with jittered exponential backoff until the
//!    node is in a state that allows it. The answer carries the node (root device hints live in
//!    its `properties`), the heartbeat interval and the **agent token** the conductor minted.
//! 2. **Heartbeats** (`client`): `POST /v1/heartbeat/{node}` with the agent's callback URL and
//!    token, every `heartbeat_timeout × U(0.3, 0.6)` seconds, 5–10 s after an error, and once
//!    more (at most every 5 s) when an asynchronous command finishes so the conductor notices
//!    quickly.
//!    With auto-TLS (`tls`, on by default as in IPA) the callback URL is `https://` and the
//!    heartbeat carries the agent's self-signed certificate (`agent_verify_ca`).
//! 3. **Commands** (`api`, `commands`): the conductor calls `POST /v1/commands` on port 9999
//!    with the token. One command runs at a time (409 "Agent is busy" otherwise); synchronous
//!    ones answer with their result, asynchronous ones answer `RUNNING` and are polled. The
//!    command handlers are plain blocking functions run on tokio's blocking pool: they read
//!    sysfs, stream images onto disks and run tools, and are easiest to follow written straight.
//!
//! Every path the agent reads (`/proc`, `/sys`) and every disk it writes can be redirected
//! (`config::AgentConfig`), so the whole agent runs in tests against fixture directories and
//! sparse files.

pub mod agent;
pub mod api;
pub mod client;
pub mod commands;
pub mod config;
pub mod disk;
pub mod erase;
pub mod image;
pub mod inventory;
pub mod lldp;
pub mod logs;
pub mod network_data;
pub mod power;
pub mod raid;
pub mod ramdisk;
pub mod registry;
pub mod rescue;
mod running;
mod secret;
pub mod steps;
pub mod tls;

pub use agent::{AGENT_VERSION, Agent};
pub use config::AgentConfig;
pub use running::RunningAgent;
