//! In-band inspection (issue 8, `reference/ironic.md` §5).
//!
//! - [`process`]: the processing of a ramdisk's data into node properties and ports, shared
//!   by both paths — the conductor's `agent` inspect interface (Ironic's built-in inspection,
//!   `POST /v1/continue_inspection`) and the inspection service below. Pure: callers apply
//!   the result.
//! - [`lldp`]: LLDP TLVs into `plugin_data.parsed_lldp` (Ironic's `parse-lldp` hook).
//! - [`rules`]: introspection rules (ironic-inspector format); [`inspection_rules`]: Ironic's
//!   own inspection rules (API 1.96), which the conductor runs after built-in inspection.
//! - [`pxe_filter`]: dnsmasq hostsdir entries for machines under introspection.
//! - [`service`] and [`api`]: the ironic-inspector compatible inspection service (seed 002),
//!   run in-process by `ferric server` or alone by `ferric inspector`; [`serve`] runs it. Its
//!   state is in the database ([`node_cache`] holds the records), so a restart continues.
//! - [`discovery`]: the `enroll` hook — data from an unknown machine enrolls a new node.

pub mod api;
pub mod inspection_rules;
pub mod lldp;
pub mod mac;
pub mod node_cache;
pub mod process;
pub mod pxe_filter;
pub mod rules;
pub mod service;

pub use service::discovery;

use std::sync::Arc;
use std::time::Duration;

pub use process::{AddPorts, Processed, ProcessingConfig, ProcessingError, process};
pub use service::{Service, ServiceConfig};
use tokio_util::sync::CancellationToken;

/// Serves the inspection service on `listener` until `shutdown`, after recovering what a
/// previous run left half done; syncs the PXE filter and expires late introspections every
/// `period`.
pub async fn serve(
    service: Arc<Service>,
    listener: tokio::net::TcpListener,
    period: Duration,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    if let Err(error) = service.recover().await {
        tracing::warn!(error = %error, "inspection service: could not recover the previous run's introspections");
    }
    service.sync_filter().await;
    let periodic = {
        let service = service.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(period) => {}
                }
                service.periodic(chrono::Utc::now()).await;
            }
        })
    };
    let result = axum::serve(listener, api::router(service))
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
    periodic.abort();
    result
}
