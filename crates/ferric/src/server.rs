//! `ferric server`: opens the database (creating and migrating it if needed), serves the API,
//! and stops cleanly on SIGTERM or SIGINT (in-flight requests finish first).

use anyhow::Context;
use ferric_api::ApiState;
use ferric_db::Store;
use tokio::net::TcpListener;

use crate::config::Settings;

pub(crate) fn run(settings: Settings) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(settings))
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    let database = ferric_db::redact(&settings.database_url);
    // The store's error already names the (redacted) database and the cause.
    let store = Store::open(&settings.database_url).await?;
    tracing::info!(database = %database, backend = store.backend_name(), "database ready");

    let listener = TcpListener::bind(settings.api_listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (is another ferric running? choose another with --api-listen)",
                settings.api_listen
            )
        })?;
    let address = listener
        .local_addr()
        .context("cannot read the bound address")?;
    tracing::info!(%address, "Bare Metal API listening");

    axum::serve(
        listener,
        ferric_api::router(ApiState {
            store: store.clone(),
        }),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await
    .context("the API server failed")?;
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on the first SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = interrupt => tracing::info!("SIGINT received, shutting down"),
        () = terminate => tracing::info!("SIGTERM received, shutting down"),
    }
}
