//! Server settings: built-in defaults, overridden by a TOML file, then by `FERRIC_*`
//! environment variables, then by command-line flags. Every setting has the same name in all
//! three places (`database_url` ↔ `FERRIC_DATABASE_URL` ↔ `--database-url`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Who may call the API (Ironic's `auth_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub(crate) enum AuthStrategySetting {
    /// Everyone may call every endpoint.
    #[value(name = "noauth")]
    Noauth,
    /// HTTP basic authentication against `http_basic_auth_user_file`.
    #[value(name = "http_basic")]
    HttpBasic,
}

/// Which parts of Ferric a `ferric server` process runs (docs/scale-out.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    /// The API and a conductor (and the inspection service, if enabled): the only role on
    /// SQLite.
    All,
    /// The Bare Metal API only: it hands node work to the conductors (PostgreSQL only).
    Api,
    /// A conductor only: no API port (PostgreSQL only).
    Conductor,
}

impl Role {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Api => "api",
            Self::Conductor => "conductor",
        }
    }
}

/// The effective settings of a `ferric server` process. The doc comments are the operator's
/// reference: `docs/configuration.md` is generated from them (`config_doc.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// Where Ferric keeps its state: a SQLite file path or `sqlite://` URL (created if missing),
    /// or a `postgres://` URL for deployments with several processes.
    pub(crate) database_url: String,
    /// Address the Bare Metal API listens on.
    pub(crate) api_listen: SocketAddr,
    /// Log line format: `text` or `json`.
    pub(crate) log_format: LogFormat,
    /// Log filter in `RUST_LOG` syntax, e.g. `info` or `info,ferric_db=debug`.
    pub(crate) log_level: String,
    /// What this process runs: `all` (default), `api` or `conductor`; `api` and `conductor`
    /// need PostgreSQL.
    pub(crate) role: Role,

    // --- The conductor (reference/ironic.md §6.4 for the defaults mirrored here) ---
    /// This conductor's name in leases, node history and `GET /v1/conductors`; must be
    /// unique among the processes sharing a database. Default: the machine's host name.
    pub(crate) conductor_hostname: String,
    /// The conductor group this conductor serves (nodes' `conductor_group`).
    pub(crate) conductor_group: String,
    /// Hardware types nodes may use (`driver`).
    pub(crate) enabled_hardware_types: Vec<String>,
    /// Tasks the conductor runs at once; requests beyond get 503.
    pub(crate) conductor_workers: usize,
    /// Whether `provide` and undeploy run automated cleaning.
    pub(crate) automated_clean: bool,
    /// Seconds between power-state syncs; 0 disables the sync.
    pub(crate) sync_power_state_interval: u64,
    /// Failed power reads in a row before a node goes into maintenance.
    pub(crate) power_state_sync_max_retries: u32,
    /// Power reads the power sync has in flight at once, across all BMCs (asynchronous
    /// requests, not threads: hundreds cost little). At least 1.
    pub(crate) power_sync_workers: usize,
    /// Power reads the power sync sends one BMC at once (a chassis manager serving many nodes
    /// is one BMC); the others wait their turn without holding a worker. At least 1.
    pub(crate) power_sync_max_per_bmc: usize,
    /// Seconds one power read may take before it counts as failed, so a hung BMC never holds
    /// up the sync. At least 1.
    pub(crate) power_sync_timeout: u64,
    /// Seconds between the callback-timeout and recovery checks.
    pub(crate) check_provision_state_interval: u64,
    /// Seconds a node may wait in `wait call-back` before it fails; 0: forever.
    pub(crate) deploy_callback_timeout: u64,
    /// Seconds a node may wait in `clean wait`; 0: forever.
    pub(crate) clean_callback_timeout: u64,
    /// Seconds a node may wait in `inspect wait`; 0: forever.
    pub(crate) inspect_wait_timeout: u64,
    /// Seconds a node may wait in `rescue wait`; 0: forever.
    pub(crate) rescue_callback_timeout: u64,
    /// Seconds a node may wait in `service wait`; 0: forever.
    pub(crate) service_callback_timeout: u64,
    /// Seconds a power action may take to show in the BMC's power state before it fails
    /// (Ironic's `[conductor]power_state_change_timeout`). At least 1.
    pub(crate) power_state_change_timeout: u64,
    /// Seconds a node lease lasts without renewal: how long a dead conductor's nodes stay
    /// locked before another conductor takes them over.
    pub(crate) node_lease_timeout: u64,
    /// Seconds between a conductor's heartbeats.
    pub(crate) conductor_heartbeat_interval: u64,
    /// Seconds without a heartbeat after which a conductor counts as dead: the hash ring
    /// drops it and its nodes move to the others.
    pub(crate) conductor_heartbeat_timeout: u64,
    /// Seconds an API process waits for the owning conductor to answer a handed-over
    /// request before it answers 503.
    pub(crate) conductor_request_timeout: u64,

    // --- BMCs (Redfish and IPMI) ---
    /// Seconds opening a connection to a BMC may take (TCP and TLS; for IPMI, which has no
    /// connection, unused). At least 1.
    pub(crate) bmc_connect_timeout: u64,
    /// Seconds a BMC may take to answer one request once connected (for IPMI, one datagram
    /// exchange). At least 1.
    pub(crate) bmc_read_timeout: u64,
    /// Retries after a connection failure, a timeout or a 5xx answer (so `bmc_retries + 1`
    /// attempts), waiting 0.5 s, 1 s, 2 s, 4 s … between them; 0: no retries.
    pub(crate) bmc_retries: u32,
    /// Requests one BMC may be serving from this process at once (power, boot, BIOS,
    /// inspection, …); more wait their turn. At least 1.
    pub(crate) bmc_max_requests: usize,
    // --- end of BMC settings ---

    // --- API access: authentication and request limits ---
    /// `noauth` (the default) or `http_basic`.
    pub(crate) auth_strategy: AuthStrategySetting,
    /// For `http_basic`: an Apache-style user file of bcrypt hashes (`htpasswd -B`).
    pub(crate) http_basic_auth_user_file: Option<PathBuf>,
    /// The largest request body the API accepts, in bytes (Ironic's `max_json_body_size`).
    pub(crate) api_max_body_size: usize,
    /// For `http_basic`: a TOML file giving each user roles and a project
    /// (`docs/security.md`); unset: every user is an admin.
    pub(crate) auth_users_file: Option<PathBuf>,
    /// A TOML file overriding authorization rules (`"baremetal:node:get" = [personas]`).
    pub(crate) auth_policy_file: Option<PathBuf>,
    /// A PEM certificate chain for the API listener: with `api_tls_key` it speaks HTTPS only.
    pub(crate) api_tls_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `api_tls_cert`.
    pub(crate) api_tls_key: Option<PathBuf>,
    /// How the conductor checks agents' HTTPS certificates: `true` (system roots), `false`
    /// (not at all), or the path of a CA file (Ironic's `[agent]verify_ca`).
    pub(crate) agent_verify_ca: String,
    // --- end of API access settings ---

    // --- Network boot and the agent ---
    /// The URL agents on the machines reach this API at, put on the ramdisk's kernel command
    /// line (e.g. `http://10.231.0.1:6385`). Required for network boot.
    pub(crate) api_url: Option<String>,
    /// Address the boot file server listens on (agent kernel and ramdisk, iPXE scripts,
    /// images, with range requests); unset: no boot file server.
    pub(crate) boot_http_listen: Option<SocketAddr>,
    /// The URL machines reach the boot file server at; default `http://<boot_http_listen>`.
    pub(crate) boot_http_url: Option<String>,
    /// The directory the boot file server serves; Ferric writes `boot.ipxe` and
    /// `ipxe/<mac>.ipxe` into it, and images placed under `images/` may be named by file name
    /// in `instance_info.image_source`.
    pub(crate) boot_http_root: PathBuf,
    /// The agent kernel: a file name under `boot_http_root` or a URL (a node's
    /// `driver_info.deploy_kernel` wins). `ferric ramdisk build` makes it.
    pub(crate) deploy_kernel: String,
    /// The agent ramdisk: a file name under `boot_http_root` or a URL (a node's
    /// `driver_info.deploy_ramdisk` wins). `ferric ramdisk build` makes it.
    pub(crate) deploy_ramdisk: String,
    /// Extra kernel command-line parameters for the agent ramdisk.
    pub(crate) kernel_append_params: String,
    /// A dnsmasq `--dhcp-hostsdir` Ferric writes per-MAC entries (tag `ferric`) into while a
    /// node is in a ramdisk phase; unset: DHCP is configured by the operator.
    pub(crate) dhcp_hostsdir: Option<PathBuf>,
    /// Start Ferric's own dnsmasq on this interface (DHCP for machines in a ramdisk phase
    /// only, chained to iPXE's `boot.ipxe`); unset: the operator runs DHCP.
    pub(crate) dhcp_interface: Option<String>,
    /// The managed dnsmasq's IPv4 pool: `first,last,netmask[,lease time]`.
    pub(crate) dhcp_range: Option<String>,
    /// Whether the managed dnsmasq sends IPv6 router advertisements (saves iPXE ~13 s; the
    /// interface needs an IPv6 address).
    pub(crate) dhcp_enable_ra: bool,
    /// Priority of the agent's full disk erase in automated cleaning; 0: not run.
    pub(crate) erase_devices_priority: u32,
    /// Priority of the agent's partition-table wipe in automated cleaning; 0: not run.
    pub(crate) erase_devices_metadata_priority: u32,
    /// Fast track: agents may stay up between operations and skip the reboot into the ramdisk.
    pub(crate) fast_track: bool,
    /// Seconds an agent may stay silent; it heartbeats every 30–60 % of this.
    pub(crate) agent_heartbeat_timeout: u64,
    // --- end of network boot settings ---

    // --- In-band inspection (docs/inspection.md) ---
    /// Inspection through the inspection service (`inspector` inspect interface). Off: that
    /// interface fails inspection with an error naming this setting. With
    /// `inspector_in_process`, `ferric server` also runs the service.
    pub(crate) inspector_enabled: bool,
    /// Whether `ferric server` runs the inspection service itself (when enabled); off when it
    /// runs elsewhere (`ferric inspector`).
    pub(crate) inspector_in_process: bool,
    /// Address the inspection service listens on (ironic-inspector's port 5050).
    pub(crate) inspector_listen: SocketAddr,
    /// Where the conductor reaches the service; default `http://<inspector_listen>`.
    pub(crate) inspector_service_url: Option<String>,
    /// Where inspection ramdisks post their data to the service (`<url>/v1/continue`);
    /// default `inspector_service_url`.
    pub(crate) inspector_callback_url: Option<String>,
    /// Which NICs inspection creates ports for: `pxe`, `active`, `all` or `disabled`.
    pub(crate) inspector_add_ports: String,
    /// Whether inspection replaces scheduler properties a node already has.
    pub(crate) inspector_overwrite_existing: bool,
    /// Discovery: unknown machines get the discovery boot (the PXE filter lets them through)
    /// and the inspection service enrolls the ones that post data as new nodes in `enroll`.
    pub(crate) inspector_discovery: bool,
    /// The hardware type of nodes discovery enrolls (Ironic inspector's `enroll_node_driver`).
    pub(crate) inspector_discovery_driver: String,
    /// Seconds an introspection may wait for its data in the service.
    pub(crate) inspector_timeout: u64,
    // --- end of inspection settings ---
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            database_url: "sqlite://ferric.db".to_owned(),
            api_listen: SocketAddr::from(([127, 0, 0, 1], 6385)),
            log_format: LogFormat::Text,
            log_level: "info".to_owned(),
            role: Role::All,
            conductor_hostname: ferric_conductor::default_hostname(),
            conductor_group: String::new(),
            enabled_hardware_types: ferric_drivers::HARDWARE_TYPES
                .iter()
                .map(|hardware_type| hardware_type.name.to_owned())
                .collect(),
            conductor_workers: 300,
            automated_clean: true,
            sync_power_state_interval: 120,
            power_state_sync_max_retries: 3,
            power_sync_workers: 256,
            power_sync_max_per_bmc: 2,
            power_sync_timeout: 60,
            check_provision_state_interval: 60,
            deploy_callback_timeout: 1800,
            clean_callback_timeout: 1800,
            inspect_wait_timeout: 1800,
            rescue_callback_timeout: 1800,
            service_callback_timeout: 1800,
            power_state_change_timeout: 60,
            node_lease_timeout: 30,
            conductor_heartbeat_interval: 10,
            conductor_heartbeat_timeout: 60,
            conductor_request_timeout: 30,
            bmc_connect_timeout: 10,
            bmc_read_timeout: 30,
            bmc_retries: 3,
            bmc_max_requests: 4,
            auth_strategy: AuthStrategySetting::Noauth,
            http_basic_auth_user_file: None,
            api_max_body_size: ferric_api::limits::DEFAULT_MAX_BODY_SIZE,
            auth_users_file: None,
            auth_policy_file: None,
            api_tls_cert: None,
            api_tls_key: None,
            agent_verify_ca: "true".to_owned(),
            api_url: None,
            boot_http_listen: None,
            boot_http_url: None,
            boot_http_root: PathBuf::from("ferric-boot"),
            deploy_kernel: "agent.kernel".to_owned(),
            deploy_ramdisk: "agent.ramdisk".to_owned(),
            kernel_append_params: "console=ttyS0".to_owned(),
            dhcp_hostsdir: None,
            dhcp_interface: None,
            dhcp_range: None,
            dhcp_enable_ra: false,
            erase_devices_priority: 0,
            erase_devices_metadata_priority: 99,
            fast_track: false,
            agent_heartbeat_timeout: 300,
            inspector_enabled: false,
            inspector_in_process: true,
            inspector_listen: SocketAddr::from(([127, 0, 0, 1], 5050)),
            inspector_service_url: None,
            inspector_callback_url: None,
            inspector_add_ports: "pxe".to_owned(),
            inspector_overwrite_existing: false,
            inspector_discovery: false,
            inspector_discovery_driver: ferric_inspector::discovery::DEFAULT_DRIVER.to_owned(),
            inspector_timeout: 3600,
        }
    }
}

/// Command-line flags; each one, when given, wins over the file and the environment.
#[derive(Debug, Default, clap::Args, Serialize)]
pub(crate) struct SettingsOverrides {
    /// Database: a SQLite file path or URL (default `sqlite://ferric.db`), or a postgres:// URL.
    /// [env: FERRIC_DATABASE_URL]
    #[arg(long, value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    database_url: Option<String>,

    /// Address and port for the Bare Metal API (default 127.0.0.1:6385).
    /// [env: FERRIC_API_LISTEN]
    #[arg(long, value_name = "ADDR:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    api_listen: Option<SocketAddr>,

    /// Log format (default text). [env: FERRIC_LOG_FORMAT]
    #[arg(long, value_enum, value_name = "FORMAT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    log_format: Option<LogFormat>,

    /// Log filter, e.g. `debug` or `info,ferric_db=debug` (default info).
    /// [env: FERRIC_LOG_LEVEL]
    #[arg(long, value_name = "FILTER")]
    #[serde(skip_serializing_if = "Option::is_none")]
    log_level: Option<String>,

    /// What this process runs: all (default), api or conductor; api and conductor need
    /// PostgreSQL. [env: FERRIC_ROLE]
    #[arg(long, value_enum, value_name = "ROLE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<Role>,

    // --- API access: authentication and request limits ---
    /// Who may call the API: noauth (default) or http_basic. [env: FERRIC_AUTH_STRATEGY]
    #[arg(long, value_enum, value_name = "STRATEGY")]
    #[serde(skip_serializing_if = "Option::is_none")]
    auth_strategy: Option<AuthStrategySetting>,

    /// User file (bcrypt htpasswd) for http_basic. [env: FERRIC_HTTP_BASIC_AUTH_USER_FILE]
    #[arg(long, value_name = "PATH")]
    #[serde(skip_serializing_if = "Option::is_none")]
    http_basic_auth_user_file: Option<PathBuf>,

    /// Largest accepted request body in bytes (default 1048576).
    /// [env: FERRIC_API_MAX_BODY_SIZE]
    #[arg(long, value_name = "BYTES")]
    #[serde(skip_serializing_if = "Option::is_none")]
    api_max_body_size: Option<usize>,
    // --- end of API access settings ---
    /// URL agents reach this API at, for the ramdisk's kernel command line.
    /// [env: FERRIC_API_URL]
    #[arg(long, value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    api_url: Option<String>,

    /// Address for the boot file server (unset: none). [env: FERRIC_BOOT_HTTP_LISTEN]
    #[arg(long, value_name = "ADDR:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    boot_http_listen: Option<SocketAddr>,

    /// URL machines reach the boot file server at (default http://<boot-http-listen>).
    /// [env: FERRIC_BOOT_HTTP_URL]
    #[arg(long, value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    boot_http_url: Option<String>,

    /// Directory the boot file server serves (default ./ferric-boot).
    /// [env: FERRIC_BOOT_HTTP_ROOT]
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    boot_http_root: Option<PathBuf>,
}

impl Settings {
    /// Every setting's name, as used in the TOML file and (upper-cased, with `FERRIC_`) in
    /// the environment.
    pub(crate) const KEYS: [&'static str; 63] = [
        "database_url",
        "api_listen",
        "log_format",
        "log_level",
        "role",
        "conductor_hostname",
        "conductor_group",
        "enabled_hardware_types",
        "conductor_workers",
        "automated_clean",
        "sync_power_state_interval",
        "power_state_sync_max_retries",
        "power_sync_workers",
        "power_sync_max_per_bmc",
        "power_sync_timeout",
        "check_provision_state_interval",
        "deploy_callback_timeout",
        "clean_callback_timeout",
        "inspect_wait_timeout",
        "rescue_callback_timeout",
        "service_callback_timeout",
        "power_state_change_timeout",
        "node_lease_timeout",
        "conductor_heartbeat_interval",
        "conductor_heartbeat_timeout",
        "conductor_request_timeout",
        // BMCs
        "bmc_connect_timeout",
        "bmc_read_timeout",
        "bmc_retries",
        "bmc_max_requests",
        // API access
        "auth_strategy",
        "http_basic_auth_user_file",
        "api_max_body_size",
        "auth_users_file",
        "auth_policy_file",
        "api_tls_cert",
        "api_tls_key",
        "agent_verify_ca",
        // network boot and the agent
        "api_url",
        "boot_http_listen",
        "boot_http_url",
        "boot_http_root",
        "deploy_kernel",
        "deploy_ramdisk",
        "kernel_append_params",
        "dhcp_hostsdir",
        "dhcp_interface",
        "dhcp_range",
        "dhcp_enable_ra",
        "erase_devices_priority",
        "erase_devices_metadata_priority",
        "fast_track",
        "agent_heartbeat_timeout",
        // in-band inspection
        "inspector_enabled",
        "inspector_in_process",
        "inspector_listen",
        "inspector_service_url",
        "inspector_callback_url",
        "inspector_add_ports",
        "inspector_overwrite_existing",
        "inspector_discovery",
        "inspector_discovery_driver",
        "inspector_timeout",
    ];

    /// The conductor's settings, with the hardware types checked.
    pub(crate) fn conductor(
        &self,
    ) -> anyhow::Result<(ferric_drivers::Drivers, ferric_conductor::ConductorConfig)> {
        let drivers = ferric_drivers::Drivers::new(&self.enabled_hardware_types)
            .map_err(|error| anyhow::anyhow!("invalid enabled_hardware_types: {error}"))?;
        let seconds = std::time::Duration::from_secs;
        let optional = |value: u64| (value > 0).then(|| seconds(value));
        anyhow::ensure!(
            self.conductor_workers > 0,
            "conductor_workers must be at least 1"
        );
        anyhow::ensure!(
            self.node_lease_timeout >= 3,
            "node_lease_timeout must be at least 3 seconds"
        );
        anyhow::ensure!(
            self.conductor_heartbeat_interval >= 1
                && self.conductor_heartbeat_timeout > self.conductor_heartbeat_interval,
            "conductor_heartbeat_timeout ({} s) must be longer than conductor_heartbeat_interval \
             ({} s), which must be at least 1 s: a live conductor would otherwise look dead",
            self.conductor_heartbeat_timeout,
            self.conductor_heartbeat_interval
        );
        anyhow::ensure!(
            self.conductor_request_timeout >= 1,
            "conductor_request_timeout must be at least 1 second"
        );
        for (name, value) in [
            ("power_sync_workers", self.power_sync_workers),
            ("power_sync_max_per_bmc", self.power_sync_max_per_bmc),
        ] {
            anyhow::ensure!(
                value >= 1,
                "{name} must be at least 1 (it is {value}): the power sync could read no \
                 power state; to turn the sync off set sync_power_state_interval = 0"
            );
        }
        anyhow::ensure!(
            self.power_sync_timeout >= 1,
            "power_sync_timeout must be at least 1 second (it is 0): every power read would \
             time out before the BMC could answer"
        );
        let bmc = self.bmc_settings()?;
        let config = ferric_conductor::ConductorConfig {
            hostname: self.conductor_hostname.clone(),
            conductor_group: self.conductor_group.clone(),
            workers: self.conductor_workers,
            lease_ttl: seconds(self.node_lease_timeout),
            heartbeat_interval: seconds(self.conductor_heartbeat_interval),
            heartbeat_timeout: seconds(self.conductor_heartbeat_timeout),
            request_timeout: seconds(self.conductor_request_timeout),
            automated_clean: self.automated_clean,
            sync_power_state_interval: optional(self.sync_power_state_interval),
            power_state_sync_max_retries: self.power_state_sync_max_retries.max(1),
            power_sync_workers: self.power_sync_workers,
            power_sync_max_per_bmc: self.power_sync_max_per_bmc,
            power_sync_timeout: seconds(self.power_sync_timeout),
            check_provision_state_interval: seconds(self.check_provision_state_interval.max(1)),
            deploy_callback_timeout: optional(self.deploy_callback_timeout),
            clean_callback_timeout: optional(self.clean_callback_timeout),
            inspect_wait_timeout: optional(self.inspect_wait_timeout),
            rescue_callback_timeout: optional(self.rescue_callback_timeout),
            service_callback_timeout: optional(self.service_callback_timeout),
            fast_track: self.fast_track,
            agent_heartbeat_timeout: seconds(self.agent_heartbeat_timeout.max(10)),
            inspection: self.processing()?,
            ..ferric_conductor::ConductorConfig::default()
        };
        let drivers = drivers
            .with_bmc_settings(bmc)
            .with_settings(self.driver_settings());
        Ok((drivers, config))
    }

    /// How the drivers talk to BMCs, checked: a zero timeout or request limit would make
    /// every BMC call fail (or never start).
    pub(crate) fn bmc_settings(&self) -> anyhow::Result<ferric_drivers::BmcSettings> {
        for (name, value) in [
            ("bmc_connect_timeout", self.bmc_connect_timeout),
            ("bmc_read_timeout", self.bmc_read_timeout),
            (
                "power_state_change_timeout",
                self.power_state_change_timeout,
            ),
        ] {
            anyhow::ensure!(
                value >= 1,
                "{name} must be at least 1 second (it is 0): no BMC could answer in time"
            );
        }
        anyhow::ensure!(
            self.bmc_max_requests >= 1,
            "bmc_max_requests must be at least 1 (it is 0): no request could ever reach a BMC"
        );
        let seconds = std::time::Duration::from_secs;
        Ok(ferric_drivers::BmcSettings {
            connect_timeout: seconds(self.bmc_connect_timeout),
            read_timeout: seconds(self.bmc_read_timeout),
            retries: self.bmc_retries,
            max_requests_per_bmc: self.bmc_max_requests,
            power_state_change_timeout: seconds(self.power_state_change_timeout),
            ..ferric_drivers::BmcSettings::default()
        })
    }

    /// How inspection data is processed (both inspection paths).
    pub(crate) fn processing(&self) -> anyhow::Result<ferric_inspector::ProcessingConfig> {
        let add_ports = self
            .inspector_add_ports
            .parse()
            .map_err(|error: String| anyhow::anyhow!("invalid inspector_add_ports: {error}"))?;
        Ok(ferric_inspector::ProcessingConfig {
            add_ports,
            overwrite_existing: self.inspector_overwrite_existing,
            ..ferric_inspector::ProcessingConfig::default()
        })
    }

    /// Where the conductor reaches the inspection service.
    pub(crate) fn inspector_service_url(&self) -> String {
        self.inspector_service_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", self.inspector_listen))
            .trim_end_matches('/')
            .to_owned()
    }

    /// The inspection service's settings.
    pub(crate) fn inspector_service(&self) -> anyhow::Result<ferric_inspector::ServiceConfig> {
        Ok(ferric_inspector::ServiceConfig {
            processing: self.processing()?,
            dhcp_hostsdir: self.effective_dhcp_hostsdir(),
            discovery: self.inspector_discovery,
            discovery_driver: self.inspector_discovery_driver.clone(),
            timeout: std::time::Duration::from_secs(self.inspector_timeout.max(1)),
            callback_url: Some(
                self.inspector_callback_url
                    .clone()
                    .unwrap_or_else(|| self.inspector_service_url()),
            ),
            power_off: true,
        })
    }

    /// The URL machines reach the boot file server at, if there is one.
    pub(crate) fn boot_http_url(&self) -> Option<String> {
        self.boot_http_url
            .clone()
            .or_else(|| {
                self.boot_http_listen
                    .filter(|address| !address.ip().is_unspecified())
                    .map(|address| format!("http://{address}"))
            })
            .map(|url| url.trim_end_matches('/').to_owned())
    }

    /// Where per-MAC DHCP entries go: the configured directory, or the managed dnsmasq's.
    pub(crate) fn effective_dhcp_hostsdir(&self) -> Option<PathBuf> {
        self.dhcp_hostsdir.clone().or_else(|| {
            self.dhcp_interface
                .as_ref()
                .map(|_| PathBuf::from("ferric-dhcp").join("hosts"))
        })
    }

    /// The managed dnsmasq's options, when `dhcp_interface` asks for one.
    pub(crate) fn dnsmasq(&self) -> anyhow::Result<Option<ferric_drivers::dhcp::DnsmasqOptions>> {
        let Some(interface) = &self.dhcp_interface else {
            return Ok(None);
        };
        let range = self.dhcp_range.clone().ok_or_else(|| {
            anyhow::anyhow!(
                "dhcp_interface is set but dhcp_range is not; give the pool as \
                 first,last,netmask (e.g. 10.231.0.100,10.231.0.199,255.255.255.0)"
            )
        })?;
        let boot_url = self.boot_http_url().ok_or_else(|| {
            anyhow::anyhow!(
                "dhcp_interface is set but there is no boot file server: set boot_http_listen \
                 (and boot_http_url if machines reach it at another address)"
            )
        })?;
        // dnsmasq resolves paths from `/`, not from our working directory.
        let hosts_dir = std::path::absolute(
            self.effective_dhcp_hostsdir()
                .unwrap_or_else(|| PathBuf::from("ferric-dhcp").join("hosts")),
        )
        .context("cannot resolve the DHCP hosts directory")?;
        let lease_file = hosts_dir
            .parent()
            .unwrap_or(Path::new("."))
            .join("dnsmasq.leases");
        Ok(Some(ferric_drivers::dhcp::DnsmasqOptions {
            interface: interface.clone(),
            range,
            boot_url: format!("{boot_url}/boot.ipxe"),
            hosts_dir,
            lease_file,
            log_file: None,
            pid_file: None,
            known_hosts_only: true,
            router_advertisements: self.dhcp_enable_ra,
        }))
    }

    /// What the drivers need to know about the site.
    pub(crate) fn driver_settings(&self) -> ferric_drivers::DriverSettings {
        ferric_drivers::DriverSettings {
            boot: ferric_drivers::BootSettings {
                http_url: self.boot_http_url(),
                http_root: self.boot_http_root.clone(),
                api_url: self
                    .api_url
                    .clone()
                    .map(|url| url.trim_end_matches('/').to_owned()),
                deploy_kernel: self.deploy_kernel.clone(),
                deploy_ramdisk: self.deploy_ramdisk.clone(),
                kernel_append_params: self.kernel_append_params.clone(),
                dhcp_hostsdir: self.effective_dhcp_hostsdir(),
            },
            deploy: ferric_drivers::DeploySettings {
                erase_devices_priority: self.erase_devices_priority,
                erase_devices_metadata_priority: self.erase_devices_metadata_priority,
                agent_verify_ca: ferric_drivers::AgentVerifyCa::parse(&self.agent_verify_ca),
                ..ferric_drivers::DeploySettings::default()
            },
            inspector: ferric_drivers::InspectorSettings {
                enabled: self.inspector_enabled,
                service_url: Some(self.inspector_service_url()),
                callback_url: self.inspector_callback_url.clone(),
                ..ferric_drivers::InspectorSettings::default()
            },
            fast_track: ferric_drivers::FastTrackSettings {
                enabled: self.fast_track,
                timeout: std::time::Duration::from_secs(self.agent_heartbeat_timeout.max(10)),
            },
        }
    }

    /// Layers defaults, the optional TOML file, `FERRIC_*` variables and the flags.
    pub(crate) fn load(
        config_file: Option<&Path>,
        overrides: &SettingsOverrides,
    ) -> anyhow::Result<Settings> {
        let mut figment = Figment::from(Serialized::defaults(Settings::default()));
        if let Some(path) = config_file {
            if !path.is_file() {
                anyhow::bail!("configuration file {} does not exist", path.display());
            }
            figment = figment.merge(Toml::file(path));
        }
        figment
            // Only the known keys: other FERRIC_* variables (FERRIC_URL for the CLI, test
            // settings, …) belong to other parts of the program.
            .merge(Env::prefixed("FERRIC_").only(&Settings::KEYS))
            .merge(Serialized::defaults(overrides))
            .extract()
            .context("invalid settings")
    }

    /// The API's access settings, checked: `http_basic` needs a readable user file of bcrypt
    /// hashes, and the body limit must leave room for a request.
    pub(crate) fn api_config(&self) -> anyhow::Result<ferric_api::ApiConfig> {
        let auth = match (self.auth_strategy, &self.http_basic_auth_user_file) {
            (AuthStrategySetting::Noauth, _) => ferric_api::AuthStrategy::NoAuth,
            (AuthStrategySetting::HttpBasic, Some(file)) => {
                let mut auth = ferric_api::auth::BasicAuth::from_file(file)?;
                if let Some(users) = &self.auth_users_file {
                    auth = auth.with_roles_file(users)?;
                }
                ferric_api::AuthStrategy::HttpBasic(auth)
            }
            (AuthStrategySetting::HttpBasic, None) => anyhow::bail!(
                "auth_strategy is http_basic but http_basic_auth_user_file is not set; name an \
                 htpasswd file of bcrypt hashes (htpasswd -B)"
            ),
        };
        if self.api_max_body_size < 4096 {
            anyhow::bail!(
                "api_max_body_size is {} bytes; allow at least 4096 (Ironic's minimum is 4 KiB)",
                self.api_max_body_size
            );
        }
        let policy = match &self.auth_policy_file {
            Some(path) => ferric_api::policy::Policy::from_file(path)?,
            None => ferric_api::policy::Policy::default(),
        };
        Ok(ferric_api::ApiConfig {
            auth,
            policy: std::sync::Arc::new(policy),
            lookup_rate: std::sync::Arc::default(),
            body_limits: ferric_api::BodyLimits {
                general: self.api_max_body_size,
                ..ferric_api::BodyLimits::default()
            },
        })
    }
}

#[cfg(test)]
#[allow(
    clippy::result_large_err,
    reason = "figment::Jail's closures return figment's own error"
)]
mod tests {
    use super::*;

    #[test]
    fn layers_apply_in_order() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "ferric.toml",
                "database_url = \"postgres://db/ferric\"\napi_listen = \"0.0.0.0:7000\"\n",
            )?;
            jail.set_env("FERRIC_API_LISTEN", "127.0.0.1:7001");
            let overrides = SettingsOverrides {
                log_format: Some(LogFormat::Json),
                ..SettingsOverrides::default()
            };
            let settings = Settings::load(Some(Path::new("ferric.toml")), &overrides)
                .map_err(|error| error.to_string())?;
            assert_eq!(settings.database_url, "postgres://db/ferric");
            assert_eq!(
                settings.api_listen,
                SocketAddr::from(([127, 0, 0, 1], 7001))
            );
            assert_eq!(settings.log_format, LogFormat::Json);
            assert_eq!(settings.log_level, "info");
            Ok(())
        });
    }

    #[test]
    fn keys_name_every_setting() {
        let serialized = serde_json::to_value(Settings::default()).unwrap();
        let mut keys: Vec<&str> = serialized
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        let mut expected = Settings::KEYS.to_vec();
        expected.sort_unstable();
        assert_eq!(keys, expected);
    }

    #[test]
    fn defaults_without_any_source() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("FERRIC_URL", "http://not-a-server-setting");
            let settings = Settings::load(None, &SettingsOverrides::default())
                .map_err(|error| error.to_string())?;
            assert_eq!(settings, Settings::default());
            Ok(())
        });
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("typo.toml", "databse_url = \"x\"\n")?;
            let error = Settings::load(Some(Path::new("typo.toml")), &SettingsOverrides::default())
                .expect_err("unknown key must fail");
            assert!(format!("{error:#}").contains("databse_url"), "{error:#}");

            jail.set_env("FERRIC_LOG_FORMAT", "xml");
            let error = Settings::load(None, &SettingsOverrides::default())
                .expect_err("bad log format must fail");
            assert!(format!("{error:#}").contains("xml"), "{error:#}");
            Ok(())
        });
    }

    #[test]
    fn bmc_and_power_sync_settings_reach_the_drivers_and_conductor() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "ferric.toml",
                "bmc_connect_timeout = 3\nbmc_read_timeout = 7\nbmc_retries = 0\n\
                 bmc_max_requests = 9\npower_state_change_timeout = 45\n\
                 power_sync_workers = 64\npower_sync_max_per_bmc = 5\n",
            )?;
            jail.set_env("FERRIC_POWER_SYNC_TIMEOUT", "12");
            let settings = Settings::load(
                Some(Path::new("ferric.toml")),
                &SettingsOverrides::default(),
            )
            .map_err(|error| error.to_string())?;
            let (drivers, config) = settings.conductor().map_err(|error| error.to_string())?;
            let bmc = drivers.bmc_settings();
            assert_eq!(bmc.connect_timeout, std::time::Duration::from_secs(3));
            assert_eq!(bmc.read_timeout, std::time::Duration::from_secs(7));
            assert_eq!(bmc.retries, 0);
            assert_eq!(bmc.max_requests_per_bmc, 9);
            assert_eq!(
                bmc.power_state_change_timeout,
                std::time::Duration::from_secs(45)
            );
            assert_eq!(config.power_sync_workers, 64);
            assert_eq!(config.power_sync_max_per_bmc, 5);
            assert_eq!(
                config.power_sync_timeout,
                std::time::Duration::from_secs(12)
            );

            for (key, needle) in [
                (
                    "FERRIC_BMC_READ_TIMEOUT",
                    "bmc_read_timeout must be at least 1 second",
                ),
                (
                    "FERRIC_BMC_CONNECT_TIMEOUT",
                    "bmc_connect_timeout must be at least 1 second",
                ),
                (
                    "FERRIC_BMC_MAX_REQUESTS",
                    "bmc_max_requests must be at least 1",
                ),
                (
                    "FERRIC_POWER_SYNC_WORKERS",
                    "power_sync_workers must be at least 1",
                ),
                (
                    "FERRIC_POWER_SYNC_MAX_PER_BMC",
                    "power_sync_max_per_bmc must be at least 1",
                ),
                (
                    "FERRIC_POWER_SYNC_TIMEOUT",
                    "power_sync_timeout must be at least 1 second",
                ),
                (
                    "FERRIC_POWER_STATE_CHANGE_TIMEOUT",
                    "power_state_change_timeout must be at least 1 second",
                ),
            ] {
                jail.clear_env();
                jail.set_env(key, "0");
                let settings = Settings::load(None, &SettingsOverrides::default())
                    .map_err(|error| error.to_string())?;
                let error = settings.conductor().expect_err(key).to_string();
                assert!(error.contains(needle), "{key}: {error}");
            }
            Ok(())
        });
    }

    #[test]
    fn api_access_settings_are_checked() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("FERRIC_AUTH_STRATEGY", "http_basic");
            jail.set_env("FERRIC_API_MAX_BODY_SIZE", "2048");
            let settings = Settings::load(None, &SettingsOverrides::default())
                .map_err(|error| error.to_string())?;
            assert_eq!(settings.auth_strategy, AuthStrategySetting::HttpBasic);
            assert_eq!(settings.api_max_body_size, 2048);
            let error = settings.api_config().expect_err("no user file");
            assert!(
                error.to_string().contains("http_basic_auth_user_file"),
                "{error}"
            );

            jail.create_file(
                "htpasswd",
                "admin:$2y$05$abcdefghijklmnopqrstuu5E9K6TA2ZmXyWoaPOXA8Gg2TgUbb3Nu\n",
            )?;
            jail.set_env("FERRIC_HTTP_BASIC_AUTH_USER_FILE", "htpasswd");
            jail.set_env("FERRIC_API_MAX_BODY_SIZE", "1048576");
            let settings = Settings::load(None, &SettingsOverrides::default())
                .map_err(|error| error.to_string())?;
            let config = settings.api_config().map_err(|error| error.to_string())?;
            assert!(matches!(
                config.auth,
                ferric_api::AuthStrategy::HttpBasic(_)
            ));
            assert_eq!(config.body_limits.general, 1_048_576);
            Ok(())
        });
    }

    #[test]
    fn missing_config_file_is_an_error() {
        let error = Settings::load(
            Some(Path::new("/nonexistent/ferric.toml")),
            &SettingsOverrides::default(),
        )
        .expect_err("missing file must fail");
        assert!(error.to_string().contains("does not exist"));
    }
}
