//! `ferric server`: opens the database (creating and migrating it if needed), starts the
//! conductor (which first recovers what a previous run left unfinished), serves the API, and
//! stops cleanly on SIGTERM or SIGINT: in-flight requests finish, the conductor leaves the
//! hash ring, running conductor work gets a grace period, then leases are released.
//!
//! `--role api` runs only the API and `--role conductor` only a conductor (docs/scale-out.md);
//! both need PostgreSQL, where the API hands node work to the owning conductor through the
//! database (`ferric_conductor::Handoff`).
//!
//! Beside the API it starts, by settings: the inspection service in-process (`inspector_enabled`;
//! `ferric inspector` runs it alone), the boot file server (`boot_http_listen`: `tower_http`'s
//! `ServeDir` over `boot_http_root`, with range requests; the image cache only by deploy token,
//! `boot_files.rs`), Ferric's own dnsmasq as a child process
//! (`dhcp_interface`), and HTTPS through `tls.rs`. The idle sweep (`sweep_idle_caches`) drops the
//! API's render cache after `api_render_cache_idle` seconds unused and has both allocators give
//! freed memory back (`ferric_alloc::release_free_memory`), so an idle server returns to its
//! baseline.

use std::time::Duration;

use anyhow::Context;
use ferric_api::ApiState;
use ferric_conductor::{Conductor, Handoff, Membership};
use ferric_db::{SchemaPolicy, SqliteSync, Store, StoreOptions};
use tokio::net::TcpListener;

use crate::config::{Role, Settings};

/// How long running conductor work may take to finish at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

pub(crate) fn run(settings: Settings, schema: SchemaPolicy) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(settings, schema))
}

/// Opens the store, upgrading its schema or not as `schema` says.
async fn open_store(settings: &Settings, schema: SchemaPolicy) -> anyhow::Result<Store> {
    let mut options = StoreOptions::default();
    options.schema = schema;
    if settings.sqlite_full_sync {
        options.sqlite_sync = SqliteSync::Full;
    }
    // The store's error already names the (redacted) database and the cause.
    Ok(Store::open_with(&settings.database_url, &options).await?)
}

/// Refuses a split role on SQLite: the API could not reach a conductor in another process.
fn check_role(settings: &Settings) -> anyhow::Result<()> {
    let shared = settings.database_url.starts_with("postgres://")
        || settings.database_url.starts_with("postgresql://");
    anyhow::ensure!(
        settings.role == Role::All || shared,
        "--role {} needs a PostgreSQL database_url (postgres://…): on SQLite one process runs \
         the API and the conductor together, so use --role all (the default)",
        settings.role.as_str()
    );
    Ok(())
}

async fn serve(settings: Settings, schema: SchemaPolicy) -> anyhow::Result<()> {
    check_role(&settings)?;
    let role = settings.role;
    let api_config = settings.api_config()?;
    // A CA file that cannot be used stops the server now, not at the first HTTPS agent.
    let deploy = settings.driver_settings().deploy;
    ferric_drivers::agent_client::AgentClient::with_verify_ca(
        deploy.agent_command_timeout,
        &deploy.agent_verify_ca,
    )
    .map_err(anyhow::Error::msg)?;
    let api_tls = match (&settings.api_tls_cert, &settings.api_tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::server_config(
            cert,
            key,
            &settings.tls_policy()?,
        )?),
        (None, None) => None,
        _ => anyhow::bail!(
            "api_tls_cert and api_tls_key go together: set both for HTTPS, or neither for HTTP"
        ),
    };
    let boot_tls = boot_tls(&settings)?;
    let database = ferric_db::redact(&settings.database_url);
    let store = open_store(&settings, schema).await?;
    tracing::info!(database = %database, backend = store.backend_name(), role = role.as_str(), "database ready");

    let (drivers, conductor_config) = settings.conductor()?;
    tracing::info!(
        handoff_version = ferric_model::action::HANDOFF_VERSION,
        sends = conductor_config.handoff.sends(),
        "conductor hand-off (a rolling upgrade pins newer processes to the oldest version running)"
    );
    let runs_conductor = role != Role::Api;
    let boot_server = match settings.boot_http_listen.filter(|_| runs_conductor) {
        Some(address) => {
            Some(boot_files(&settings, address, boot_tls, drivers.images().peers.clone()).await?)
        }
        None => None,
    };
    let dhcp = match settings.dnsmasq()?.filter(|_| runs_conductor) {
        Some(options) => Some(start_dnsmasq(&options)?),
        None => None,
    };
    let inspector_shutdown = tokio_util::sync::CancellationToken::new();
    let inspector = if settings.inspector_enabled && settings.inspector_in_process && runs_conductor
    {
        Some(start_inspector(&settings, &store, &drivers, inspector_shutdown.clone()).await?)
    } else {
        None
    };
    let conductor = if runs_conductor {
        // The image cache's deploy tokens of a previous life end (image_cache.rs).
        if let Some(cache) = &drivers.images().cache {
            cache
                .remove_stale_tokens()
                .context("cannot remove stale deploy tokens from the image cache")?;
        }
        let conductor = Conductor::new(store.clone(), drivers.clone(), conductor_config.clone());
        if let Some(events) = settings.power_events()? {
            conductor.set_power_events(events);
        }
        conductor
            .start()
            .await
            .context("the conductor could not start")?;
        tracing::info!(hostname = conductor.hostname(), "conductor running");
        Some(conductor)
    } else {
        None
    };
    let membership = match &conductor {
        Some(conductor) => conductor.membership().clone(),
        None => Membership::new(store.clone(), conductor_config.heartbeat_timeout),
    };
    let handoff = Handoff::new(
        store.clone(),
        conductor.clone(),
        membership,
        drivers,
        conductor_config,
    );
    let handoff_shutdown = tokio_util::sync::CancellationToken::new();
    if store.is_shared() {
        handoff
            .start(handoff_shutdown.clone())
            .await
            .context("cannot listen for conductor replies")?;
    }

    let shutdown = shutdown_signal()?;
    if role == Role::Conductor {
        shutdown.await;
    } else {
        serve_api(&settings, &store, handoff, api_config, api_tls, shutdown).await?;
    }
    handoff_shutdown.cancel();
    if let Some(boot_server) = boot_server {
        boot_server.abort();
    }
    inspector_shutdown.cancel();
    if let Some(inspector) = inspector {
        let _ = inspector.await;
    }
    if let Some(mut dhcp) = dhcp {
        let _ = dhcp.kill().await;
    }
    if let Some(conductor) = conductor {
        conductor.shutdown(SHUTDOWN_GRACE).await;
    }
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Serves the Bare Metal API until `shutdown`; in-flight requests finish.
async fn serve_api(
    settings: &Settings,
    store: &Store,
    handoff: Handoff,
    api_config: ferric_api::ApiConfig,
    api_tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
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
    let scheme = if api_tls.is_some() { "https" } else { "http" };
    tracing::info!(%address, scheme, "Bare Metal API listening");
    tracing::info!(url = %format!("{scheme}://{address}/ui/"), "web UI");

    let state = ApiState::new(store.clone(), handoff)
        .with_render_cache_size(settings.api_render_cache_size);
    let sweep = (settings.api_render_cache_idle > 0).then(|| {
        tokio::spawn(sweep_idle_caches(
            state.clone(),
            Duration::from_secs(settings.api_render_cache_idle),
        ))
    });
    // The agents' own listener on the provisioning network (`ramdisk_listen`): the same
    // state, only the ramdisk endpoints and version discovery, stopped with the API.
    let stop = tokio_util::sync::CancellationToken::new();
    let ramdisk = match settings.ramdisk_listen {
        Some(address) => Some(
            serve_ramdisk(
                address,
                state.clone(),
                api_config.clone(),
                api_tls.clone(),
                stop.clone(),
            )
            .await?,
        ),
        None => None,
    };
    let shutdown = {
        let stop = stop.clone();
        async move {
            shutdown.await;
            stop.cancel();
        }
    };
    // The web UI's static files beside the API; its pages call `/v1` like any client.
    let api = ferric_ui::router().merge(ferric_api::router_with(state, api_config));
    let served = match api_tls {
        Some(tls) => crate::tls::serve(listener, tls, api, shutdown).await,
        // Peer addresses reach the handlers: the lookup rate limit and the agent-token
        // warnings name them.
        None => axum::serve(
            listener,
            api.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await
        .context("the API server failed"),
    };
    if let Some(sweep) = sweep {
        sweep.abort();
    }
    stop.cancel();
    if let Some(ramdisk) = ramdisk {
        let _ = ramdisk.await;
    }
    served
}

/// Binds `ramdisk_listen` and serves the agents' endpoints there until `stop`.
async fn serve_ramdisk(
    address: std::net::SocketAddr,
    state: ApiState,
    api_config: ferric_api::ApiConfig,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot listen on {address} (ramdisk_listen)"))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(%address, scheme, "agent endpoints listening (ramdisk_listen)");
    let config = ferric_api::ApiConfig {
        endpoints: ferric_api::listener::Endpoints::RamdiskOnly,
        ..api_config
    };
    let router = ferric_api::router_with(state, config);
    Ok(tokio::spawn(async move {
        let served = match tls {
            Some(tls) => crate::tls::serve(listener, tls, router, stop.cancelled_owned()).await,
            None => axum::serve(
                listener,
                router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
            )
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
            .context("the ramdisk listener failed"),
        };
        if let Err(error) = served {
            tracing::error!(error = %format!("{error:#}"), "the ramdisk listener stopped");
        }
    }))
}

/// Every `idle / 4` (at most 15 s), drops the API's caches that nothing used for `idle`, so
/// an idle server gives their memory back (issue 26: `api_render_cache_idle`). When it drops
/// them it also has the allocators return what they keep freed (`ferric_alloc`): the cache's
/// documents, and what SQLite's connections freed meanwhile, would otherwise stay resident.
async fn sweep_idle_caches(state: ApiState, idle: Duration) {
    let period = (idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(15));
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let dropped = state.drop_idle_caches(idle);
        if dropped > 0 {
            ferric_alloc::release_free_memory();
            tracing::debug!(bytes = dropped, "dropped the unused render cache");
        }
    }
}

/// How often the inspection service re-syncs its PXE filter and expires late introspections.
const INSPECTOR_PERIOD: Duration = Duration::from_secs(15);

/// Starts the inspection service on `inspector_listen`, in this process.
pub(crate) async fn start_inspector(
    settings: &Settings,
    store: &Store,
    drivers: &ferric_drivers::Drivers,
    shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let config = settings.inspector_service()?;
    if config.discovery {
        ferric_inspector::discovery::check_driver(drivers, &config.discovery_driver).with_context(
            || {
                format!(
                    "inspector_discovery_driver {:?} cannot enroll discovered machines",
                    config.discovery_driver
                )
            },
        )?;
    }
    let service = std::sync::Arc::new(ferric_inspector::Service::new(
        store.clone(),
        drivers.clone(),
        config,
    ));
    let address = settings.inspector_listen;
    let listener = TcpListener::bind(address).await.with_context(|| {
        format!("cannot listen on {address} for the inspection service (inspector_listen)")
    })?;
    let address = listener
        .local_addr()
        .context("cannot read the inspection service's bound address")?;
    tracing::info!(%address, "inspection service listening");
    Ok(tokio::spawn(async move {
        if let Err(error) =
            ferric_inspector::serve(service, listener, INSPECTOR_PERIOD, shutdown).await
        {
            tracing::error!(error = %error, "the inspection service failed");
        }
    }))
}

/// `ferric inspector`: the inspection service alone, on the same database.
pub(crate) fn run_inspector(settings: Settings, schema: SchemaPolicy) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let store = open_store(&settings, schema).await?;
        let (drivers, _) = settings.conductor()?;
        let shutdown = tokio_util::sync::CancellationToken::new();
        let signal = shutdown_signal()?;
        let service = start_inspector(&settings, &store, &drivers, shutdown.clone()).await?;
        signal.await;
        shutdown.cancel();
        let _ = service.await;
        store.close().await;
        tracing::info!("stopped");
        Ok(())
    })
}

/// The boot file server's HTTPS listener (`boot_https_listen`) and its TLS configuration,
/// checked at start: both files, and the plain listener it sits beside.
fn boot_tls(
    settings: &Settings,
) -> anyhow::Result<Option<(std::net::SocketAddr, std::sync::Arc<rustls::ServerConfig>)>> {
    let files = (&settings.boot_tls_cert, &settings.boot_tls_key);
    let Some(address) = settings.boot_https_listen else {
        anyhow::ensure!(
            files == (&None, &None),
            "boot_tls_cert and boot_tls_key are the certificate of boot_https_listen: set it \
             too, or unset them"
        );
        return Ok(None);
    };
    let (Some(cert), Some(key)) = files else {
        anyhow::bail!(
            "boot_https_listen serves over TLS only: set boot_tls_cert and boot_tls_key (a PEM \
             certificate chain the BMCs trust, and its key)"
        );
    };
    anyhow::ensure!(
        settings.boot_http_listen.is_some(),
        "boot_https_listen is a second listener of the boot file server: set boot_http_listen too"
    );
    let config = crate::tls::server_config_of(
        cert,
        key,
        &settings.tls_policy()?,
        ["boot_tls_cert", "boot_tls_key"],
    )?;
    Ok(Some((address, config)))
}

/// Starts the boot file server: `boot_http_root` over HTTP with range requests, where
/// machines fetch `boot.ipxe`, their iPXE script, the agent kernel and ramdisk, and images;
/// and the same files over HTTPS when `boot_https_listen` is set (BMCs fetching ISOs).
async fn boot_files(
    settings: &Settings,
    address: std::net::SocketAddr,
    tls: Option<(std::net::SocketAddr, std::sync::Arc<rustls::ServerConfig>)>,
    swarms: Option<ferric_drivers::peers::Swarms>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let root = &settings.boot_http_root;
    ferric_drivers::ipxe::write_boot_script(&settings.driver_settings().boot).with_context(
        || {
            format!(
                "cannot write boot.ipxe into boot_http_root {}",
                root.display()
            )
        },
    )?;
    // Discovery boots unknown machines into the inspection ramdisk, but only behind the PXE
    // filter, which keeps enrolled machines outside a ramdisk phase away from it.
    let discovery_callback = if settings.inspector_enabled && settings.inspector_discovery {
        let callback = settings.inspector_service()?.callback_url;
        if settings.effective_dhcp_hostsdir().is_none() {
            tracing::warn!(
                "inspector_discovery is on without a DHCP hosts directory (dhcp_hostsdir or \
                 dhcp_interface): no PXE filter, so no discovery boot is offered"
            );
            None
        } else {
            callback.map(|url| format!("{}/v1/continue", url.trim_end_matches('/')))
        }
    } else {
        None
    };
    ferric_drivers::ipxe::write_discovery_script(
        &settings.driver_settings().boot,
        discovery_callback.as_deref(),
    )
    .context("cannot prepare the discovery boot (inspector_discovery)")?;
    let listener = TcpListener::bind(address).await.with_context(|| {
        format!("cannot listen on {address} for the boot file server (boot_http_listen)")
    })?;
    // The image cache only through deploy tokens; the peer tracker (boot_files.rs).
    let app = crate::boot_files::router(root, swarms)
        .layer(tower_http::trace::TraceLayer::new_for_http());
    tracing::info!(
        %address,
        root = %root.display(),
        url = settings.boot_http_url().as_deref().unwrap_or("(boot_http_url not set)"),
        "boot file server listening"
    );
    let https = match tls {
        Some((address, config)) => {
            let listener = TcpListener::bind(address).await.with_context(|| {
                format!("cannot listen on {address} for the boot file server (boot_https_listen)")
            })?;
            tracing::info!(
                address = %listener.local_addr().unwrap_or(address),
                url = settings.boot_https_url().as_deref().unwrap_or("(boot_https_url not set)"),
                "boot file server listening over HTTPS"
            );
            Some((listener, config))
        }
        None => None,
    };
    let secure_app = app.clone();
    Ok(tokio::spawn(async move {
        let plain = async {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(error = %error, "the boot file server failed");
            }
        };
        let secure = async {
            if let Some((listener, config)) = https {
                let served =
                    crate::tls::serve(listener, config, secure_app, std::future::pending()).await;
                if let Err(error) = served {
                    tracing::error!(error = %format!("{error:#}"), "the boot file server's HTTPS listener failed");
                }
            }
        };
        tokio::join!(plain, secure);
    }))
}

/// Starts Ferric's own dnsmasq as a child that dies with the server; its log lines join ours.
fn start_dnsmasq(
    options: &ferric_drivers::dhcp::DnsmasqOptions,
) -> anyhow::Result<tokio::process::Child> {
    std::fs::create_dir_all(&options.hosts_dir).with_context(|| {
        format!(
            "cannot create the DHCP hosts directory {}",
            options.hosts_dir.display()
        )
    })?;
    let mut child = tokio::process::Command::new("dnsmasq")
        .args(options.args())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start dnsmasq (install Debian's dnsmasq-base, or unset dhcp_interface)")?;
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "dnsmasq", "{line}");
            }
        });
    }
    tracing::info!(
        interface = %options.interface,
        range = %options.range,
        hosts = %options.hosts_dir.display(),
        "managed dnsmasq started (DHCP only for nodes in a ramdisk phase)"
    );
    Ok(child)
}

/// Installs the SIGINT and SIGTERM handlers now, and returns a future that resolves on the
/// first of them. Installing before the API is announced matters: a signal that arrives
/// between "listening" and the first poll of the server would otherwise kill the process
/// with the default action instead of shutting it down cleanly.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => tracing::info!("SIGINT received, shutting down"),
            _ = terminate.recv() => tracing::info!("SIGTERM received, shutting down"),
        }
    })
}
