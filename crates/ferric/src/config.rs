//! Server settings: built-in defaults, overridden by a TOML file, then by `FERRIC_*`
//! environment variables, then by command-line flags. Every setting has the same name in all
//! three places (`database_url` ↔ `FERRIC_DATABASE_URL` ↔ `--database-url`).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::Context;
use ferric_model::resources::InterfaceKind;
use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde::{Deserialize, Deserializer, Serialize};

mod env;
mod overrides;
mod parts;

pub(crate) use overrides::SettingsOverrides;

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
    /// OpenStack Keystone tokens (`X-Auth-Token`), validated with the `keystone_*` settings.
    #[value(name = "keystone")]
    Keystone,
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
    /// SQLite only: sync the write-ahead log to the disk at every commit (`synchronous =
    /// FULL`). Off (`NORMAL`), nothing acknowledged is lost when the process dies, but the
    /// last commits before a power loss or kernel crash may roll back (ARCHITECTURE.md,
    /// "Durability on SQLite"); on, every commit waits for an `fsync`.
    pub(crate) sqlite_full_sync: bool,
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
    /// Seconds a node lease lasts without renewal: how long the nodes of a conductor that
    /// stopped renewing stay locked. A conductor whose process died frees its leases at once
    /// on PostgreSQL (its liveness lock is gone: docs/scale-out.md).
    pub(crate) node_lease_timeout: u64,
    /// Seconds between a conductor's heartbeats.
    pub(crate) conductor_heartbeat_interval: u64,
    /// Seconds without a heartbeat after which a conductor counts as dead: the hash ring
    /// drops it and its nodes move to the others. A conductor whose process died counts as
    /// dead at once (its liveness lock is gone); this catches one that hangs.
    pub(crate) conductor_heartbeat_timeout: u64,
    /// Seconds an API process waits for the owning conductor to answer a handed-over
    /// request before it answers 503.
    pub(crate) conductor_request_timeout: u64,
    /// During a rolling upgrade: the hand-off version this process sends to conductors of the
    /// oldest release still running (Ironic's `pin_release_version`), so an older conductor
    /// understands every request (the server logs each build's version at start). 0: not pinned
    /// (this build's own version). Remove it once every process runs the new release.
    pub(crate) pin_handoff_version: u32,
    /// Bytes of each node's serial console output kept, so a viewer who attaches later sees
    /// what happened (`docs/console.md`). At least 1024.
    pub(crate) console_tail_size: usize,
    /// The address the consoles' TCP relays listen on, and the host their `console_info`
    /// URLs name. Anyone who reaches a relay may type on the console (as on Ironic's socat
    /// port): keep it on loopback or a management network.
    pub(crate) console_bind_address: IpAddr,
    /// The ports the consoles' TCP relays may use, `LOW:HIGH` inclusive (Ironic's
    /// `[console]port_range`); one per enabled console.
    pub(crate) console_port_range: String,

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
    /// `noauth` (the default), `http_basic` or `keystone` (docs/keystone.md).
    pub(crate) auth_strategy: AuthStrategySetting,
    /// For `http_basic`: an Apache-style user file of bcrypt hashes (`htpasswd -B`).
    pub(crate) http_basic_auth_user_file: Option<PathBuf>,
    /// The largest request body the API accepts, in bytes (Ironic's `max_json_body_size`).
    pub(crate) api_max_body_size: usize,
    /// How many bytes of rendered node documents the API keeps for detail listings
    /// (compressed, one per node and microversion; 0: none). A detail page of nodes it holds
    /// costs no row reads; at ~0.5 KiB per node the default covers ~130,000 nodes.
    pub(crate) api_render_cache_size: usize,
    /// Seconds without a detail listing after which the rendered documents are dropped, so an
    /// idle server gives their memory back (the next walk renders them again; 0: never).
    pub(crate) api_render_cache_idle: u64,
    /// For `http_basic`: a TOML file giving each user roles and a project
    /// (`docs/security.md`); unset: every user is an admin.
    pub(crate) auth_users_file: Option<PathBuf>,
    /// A TOML file overriding authorization rules (`"baremetal:node:get" = [personas]`).
    pub(crate) auth_policy_file: Option<PathBuf>,
    /// For `keystone`: Keystone's identity v3 URL, where Ferric's service user logs in and,
    /// unless the catalog names another identity endpoint, validates tokens (e.g.
    /// `http://keystone:5000/v3`).
    pub(crate) keystone_auth_url: Option<String>,
    /// For `keystone`: Ferric's service user, which needs the `service` role (or a reader
    /// role on the system) to validate tokens.
    pub(crate) keystone_username: String,
    /// For `keystone`: the service user's password. Prefer `keystone_password_file` or the
    /// environment (`FERRIC_KEYSTONE_PASSWORD`) to writing it in the configuration file.
    pub(crate) keystone_password: Option<String>,
    /// For `keystone`: a file holding the service user's password (its first line), read at
    /// start; wins over `keystone_password`.
    pub(crate) keystone_password_file: Option<PathBuf>,
    /// For `keystone`: the project the service user's token is scoped to.
    pub(crate) keystone_project_name: String,
    /// For `keystone`: the domain of the service user.
    pub(crate) keystone_user_domain_name: String,
    /// For `keystone`: the domain of `keystone_project_name`.
    pub(crate) keystone_project_domain_name: String,
    /// For `keystone`: the region of the identity endpoint to use (unset: any).
    pub(crate) keystone_region_name: Option<String>,
    /// For `keystone`: the catalog interface (`public`, `internal` or `admin`) of the identity
    /// endpoint tokens are validated at; `keystone_auth_url` when the catalog has none.
    pub(crate) keystone_interface: String,
    /// For `keystone`: PEM CA certificates to trust for Keystone's HTTPS, besides the
    /// system's.
    pub(crate) keystone_cafile: Option<PathBuf>,
    /// For `keystone`: seconds one request to Keystone may take (connecting included); past
    /// it the API answers 503 naming Keystone. At least 1.
    pub(crate) keystone_timeout: u64,
    /// For `keystone`: how many validated tokens are remembered (a least-recently-used
    /// cache). At least 1.
    pub(crate) keystone_token_cache_size: usize,
    /// For `keystone`: seconds a token validation is remembered, never past the token's expiry
    /// (keystonemiddleware's `token_cache_time`); a revoked token works for up to this long.
    pub(crate) keystone_token_cache_time: u64,
    /// With `keystone`: tell Nova when a node holding an instance is powered on or off other
    /// than by Nova (its `power-update` event, as Ironic's `[nova] send_power_notifications`),
    /// so the server's power state follows the machine (docs/openstack.md).
    pub(crate) send_power_notifications: bool,
    /// The catalog interface (`public`, `internal` or `admin`) of Nova's `compute` endpoint.
    pub(crate) nova_interface: String,
    /// The region of Nova's `compute` endpoint (unset: `keystone_region_name`, else any).
    pub(crate) nova_region_name: Option<String>,
    /// A PEM certificate chain for the API listener: with `api_tls_key` it speaks HTTPS only.
    pub(crate) api_tls_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `api_tls_cert`.
    pub(crate) api_tls_key: Option<PathBuf>,
    /// The oldest TLS version Ferric's HTTPS listeners accept and its agents are told to
    /// accept: `1.3` (the default, as Ironic 2026.2) or `1.2` (Ironic's `[api]tls_min_version`).
    pub(crate) tls_min_version: String,
    /// The TLS 1.2/1.3 cipher suites allowed, by IANA name (e.g.
    /// `TLS13_AES_256_GCM_SHA384`); empty: every suite of the TLS library's safe defaults.
    /// Applied to the HTTPS listeners and sent to agents at lookup.
    pub(crate) tls_cipher_suites: Vec<String>,
    /// Serve the agent's unauthenticated endpoints (lookup, heartbeat, continue_inspection) on
    /// `api_listen` (Ironic's `[api]enable_ramdisk_endpoints`); off, they answer 403 there and
    /// agents use `ramdisk_listen`.
    pub(crate) enable_ramdisk_endpoints: bool,
    /// A second listener, on the provisioning network, serving only the agent's endpoints and
    /// version discovery (with the API's TLS settings); point `api_url` at it.
    pub(crate) ramdisk_listen: Option<SocketAddr>,
    /// How the conductor checks agents' HTTPS certificates: `true` (system roots), `false`
    /// (not at all), or the path of a CA file (Ironic's `[agent]verify_ca`).
    #[serde(deserialize_with = "bool_or_string")]
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
    /// Address of the boot file server's HTTPS listener (the same files as `boot_http_listen`,
    /// over TLS with `boot_tls_cert` and `boot_tls_key`): where BMCs fetch the agent's ISO for
    /// the `redfish-https` boot interface (UEFI HTTP boot); unset: no HTTPS listener.
    pub(crate) boot_https_listen: Option<SocketAddr>,
    /// The URL BMCs reach the HTTPS listener at; default `https://<boot_https_listen>`. Its
    /// host must match a name in `boot_tls_cert`, which the BMC must trust.
    pub(crate) boot_https_url: Option<String>,
    /// The PEM certificate chain of the HTTPS listener (its own, not the API's).
    pub(crate) boot_tls_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `boot_tls_cert`.
    pub(crate) boot_tls_key: Option<PathBuf>,
    /// The agent kernel: a file name under `boot_http_root` or a URL (a node's
    /// `driver_info.deploy_kernel` wins). `ferric ramdisk build` makes it.
    pub(crate) deploy_kernel: String,
    /// The agent ramdisk: a file name under `boot_http_root` or a URL (a node's
    /// `driver_info.deploy_ramdisk` wins). `ferric ramdisk build` makes it.
    pub(crate) deploy_ramdisk: String,
    /// The agent kernel per CPU architecture, as `arch:file` pairs separated by commas
    /// (Ironic's `deploy_kernel_by_arch`, e.g. `aarch64:agent-aarch64.kernel`): a node whose
    /// `properties.cpu_arch` is listed boots it unless its `driver_info` names its own. List
    /// each architecture in `deploy_ramdisk_by_arch` too. Machines Ferric does not know
    /// (discovery) are matched by iPXE's `${buildarch}` (`arm64` for `aarch64`).
    pub(crate) deploy_kernel_by_arch: String,
    /// The agent ramdisk per CPU architecture (`arch:file,…`, Ironic's
    /// `deploy_ramdisk_by_arch`); see `deploy_kernel_by_arch`.
    pub(crate) deploy_ramdisk_by_arch: String,
    /// The iPXE loader the managed dnsmasq hands firmware PXE clients, per the architecture
    /// they announce in DHCP option 93 (Ironic's `ipxe_bootfile_name_by_arch`): keys
    /// `x86_64-uefi` (or `x86_64`), `x86_64-bios`, `aarch64-uefi` (or `aarch64`); files
    /// under `ipxe_dir`. Unset keys keep `snponly.efi` and `undionly.kpxe`; ARM64 clients
    /// get nothing unless `aarch64` is listed.
    pub(crate) ipxe_bootfile_name_by_arch: String,
    /// Extra kernel command-line parameters for the agent ramdisk.
    pub(crate) kernel_append_params: String,
    /// A dnsmasq `--dhcp-hostsdir` Ferric writes per-MAC entries (tag `ferric`) into while a
    /// node is in a ramdisk phase; unset: DHCP is configured by the operator.
    pub(crate) dhcp_hostsdir: Option<PathBuf>,
    /// The directory of the iPXE loaders handed to firmware network boot: `snponly.efi`
    /// (UEFI PXE over TFTP, and UEFI HTTP boot, copied into `boot_http_root` at start) and
    /// `undionly.kpxe` (BIOS PXE). Default: Debian's `ipxe` package; a site can point it at
    /// its own iPXE build (e.g. one without the 2 s "Press Ctrl-B" wait, `BANNER_TIMEOUT` 0).
    pub(crate) ipxe_dir: PathBuf,
    /// How a deploy or rescue ISO a node brings in `driver_info.deploy_iso` /
    /// `rescue_iso` (an http(s) URL) reaches its BMC: `local` (the default, as in Ironic)
    /// downloads it into `boot_http_root/vmedia/` and gives the BMC Ferric's own URL, reusing
    /// the copy while the origin answers `304 Not Modified`; `http` gives the BMC the URL
    /// itself.
    pub(crate) ramdisk_image_download_source: String,
    /// How an instance image given as an http(s) URL (`instance_info.image_source`) reaches
    /// the agent: `http` (the default) gives the agent the URL; `local` downloads it once into
    /// the conductor's image cache and gives the agent the boot file server's URL. Glance
    /// images always go through the cache.
    pub(crate) image_download_source: String,
    /// The bound of the conductor's image cache (`boot_http_root/image-cache/`) in MiB: the
    /// least recently used images go to make room, and a larger image is refused; images that
    /// nodes are deploying from are never evicted, and a new image that only their eviction
    /// would make room for is refused. 0: no cache (then Glance images cannot be deployed).
    pub(crate) image_cache_size: u64,
    /// The catalog interfaces of Glance's endpoint, tried in order (Ironic's `[glance]
    /// valid_interfaces`), comma-separated.
    pub(crate) glance_valid_interfaces: String,
    /// The catalog region of Glance's endpoint; unset: `keystone_region_name`, else any.
    pub(crate) glance_region_name: Option<String>,
    /// How an `oci://` image reaches the agent: `local` (the default) through the conductor's
    /// image cache; `http` gives the agent the registry's blob URL and that registry's
    /// `Authorization` header.
    pub(crate) oci_image_download_source: String,
    /// Peer-assisted delivery (docs/peers.md): agents deploying the same raw image from the
    /// conductor's image cache fetch its pieces from each other as well as from the conductor,
    /// each piece checked against the conductor's SHA-256 manifest, so a rack of machines
    /// costs the conductor's link about one copy of the image. A deploy may say otherwise in
    /// `instance_info.image_peer_delivery`. Off: every agent gets its own copy from the
    /// conductor, as in Ironic.
    pub(crate) image_peer_delivery: bool,
    /// A Docker `config.json` (`{"auths": {"<registry>": {"auth": "<secret>"}}}`) with the
    /// site's pull secrets, used when a node has no `image_pull_secret`; read at every use.
    pub(crate) oci_authentication_config: Option<PathBuf>,
    /// A PEM CA bundle trusted for OCI registries besides the system's CAs.
    pub(crate) oci_verify_ca: Option<PathBuf>,
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
    /// When a disk's NVMe or ATA secure erase fails, overwrite it instead of failing the clean
    /// step (Ironic's `[deploy]continue_if_disk_secure_erase_fails`; sent to the agent).
    pub(crate) continue_if_disk_secure_erase_fails: bool,
    /// Let the agent's `erase_devices` use ATA security erase (Ironic's
    /// `[deploy]enable_ata_secure_erase`); false: overwrite instead.
    pub(crate) enable_ata_secure_erase: bool,
    /// Let the agent's `erase_devices` format NVMe disks (Ironic's
    /// `[deploy]enable_nvme_secure_erase`); false: overwrite instead.
    pub(crate) enable_nvme_secure_erase: bool,
    /// How many disks the agent may erase at once (Ironic's `[deploy]disk_erasure_concurrency`;
    /// IPA honours it, ferric-agent erases one disk after the other).
    pub(crate) disk_erasure_concurrency: u32,
    /// Other priorities for automated cleaning's steps, the driver's and the agent's alike:
    /// `interface.step:priority` entries (Ironic's `[conductor]clean_step_priority_override`),
    /// e.g. `["deploy.erase_devices:20", "deploy.erase_devices_metadata:0"]`; 0 skips a step.
    pub(crate) clean_step_priority_override: Vec<String>,
    /// Fast track: agents may stay up between operations and skip the reboot into the ramdisk.
    pub(crate) fast_track: bool,
    /// Seconds an agent may stay silent; it heartbeats every 30–60 % of this.
    pub(crate) agent_heartbeat_timeout: u64,
    /// Refuse heartbeats whose callback URL is not `https://` (Ironic's `[agent]require_tls`,
    /// on by default as in Ironic 39), so agent tokens never travel in clear text; agents with
    /// auto-TLS (ferric-agent, ironic-python-agent) send their certificate, which the conductor
    /// trusts for that node. Turn it off only for agents that cannot serve HTTPS.
    pub(crate) agent_require_tls: bool,
    /// Let the agent install a BIOS bootloader for a partition image by running the deployed
    /// image's own `grub-install` as root in a chroot (Ironic's
    /// `[agent]enable_bios_bootloader_install`, off by default since CVE-2026-43003): only for
    /// images you trust. Off: BIOS nodes deploy whole-disk images; UEFI is unaffected.
    pub(crate) agent_enable_bios_bootloader_install: bool,
    /// When the agent ramdisk's logs are collected: `always` (also after each deployment),
    /// `on_failure` (a deployment, cleaning or servicing that fails) or `never` (Ironic's
    /// `[agent]deploy_logs_collect`).
    pub(crate) deploy_logs_collect: String,
    /// Where collected ramdisk logs are stored: `local` is the only backend (Ironic's
    /// `[agent]deploy_logs_storage_backend`; Ferric has no object store).
    pub(crate) deploy_logs_storage_backend: String,
    /// The directory ramdisk logs are stored in, as
    /// `<node>[_<instance>][_<label>]_<YYYY-MM-DD-hh-mm-ss>.tar.gz` (Ironic's names).
    pub(crate) deploy_logs_local_path: PathBuf,
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

    // --- Switch networking (docs/networking.md) ---
    /// The switch file: the site's switches (address, user, key or password file, device
    /// type), the VLAN of each of Ferric's networks and the tenant networks a VIF may name.
    /// Needed by the `ironic-networking` network interface; unset: that interface refuses to
    /// validate.
    pub(crate) switch_config_file: Option<PathBuf>,
    /// Seconds between two drift checks of the switch ports Ferric manages; 0: never.
    pub(crate) switch_drift_check_interval: u64,
    /// Put a switch port found on another VLAN back where Ferric left it (else the node goes
    /// into maintenance with `fault: switch port drift`).
    pub(crate) switch_drift_repair: bool,
    // --- end of switch networking settings ---

    // --- Hardware types and interfaces (Ironic's driver composition) ---
    /// Hardware types nodes may use (`driver`): `fake-hardware`, `manual-management`,
    /// `redfish`, `ipmi`. All four by default, so the quick start's `fake-hardware` nodes work;
    /// a site with only real machines can drop `fake-hardware`.
    pub(crate) enabled_hardware_types: Vec<String>,
    /// BIOS interfaces nodes may use (`no-bios`, `redfish`, `fake`).
    pub(crate) enabled_bios_interfaces: Vec<String>,
    /// Boot interfaces nodes may use (`ipxe`, `pxe`, `fake`). `fake` boots nothing:
    /// leave it out unless demo nodes on real BMCs need it.
    pub(crate) enabled_boot_interfaces: Vec<String>,
    /// Console interfaces nodes may use (`no-console`, `fake`).
    pub(crate) enabled_console_interfaces: Vec<String>,
    /// Deploy interfaces nodes may use (`direct`, `fake`). A node may use an
    /// implementation only if its hardware type supports it and it is listed here; a
    /// node that names none gets the first one its type supports that is listed (or
    /// `default_deploy_interface`). The same holds for every
    /// `enabled_<kind>_interfaces`.
    ///
    /// `fake` is left out of the built-in lists (except power and management): a
    /// `redfish` or `ipmi` node asking for `deploy_interface=fake` would reach `active`
    /// without an image written, so it is refused with 400 until `fake` is listed here.
    /// The `fake-hardware` type drives no machine and may always use its `fake`
    /// implementations, so the quick start works unchanged; remove `fake-hardware` from
    /// `enabled_hardware_types` to switch it off.
    pub(crate) enabled_deploy_interfaces: Vec<String>,
    /// The deploy interfaces the `autodetect` deploy interface picks from, in order
    /// (Ironic's `autodetect_deploy_interfaces`): the first whose rule takes the node's
    /// instance (`ramdisk`: `instance_info.ironic_ramdisk_deploy` with a `boot_iso`, or a
    /// `kernel` and a `ramdisk`; any other: every instance), else the last. Checked
    /// against `enabled_deploy_interfaces` when `autodetect` is enabled. Ferric has no
    /// `bootc` interface, so naming it is refused. Make `autodetect` every node's default
    /// with `default_deploy_interface = "autodetect"`, as Metal3's ironic-image does.
    pub(crate) autodetect_deploy_interfaces: Vec<String>,
    /// Firmware interfaces nodes may use (`no-firmware`, `redfish`, `fake`).
    pub(crate) enabled_firmware_interfaces: Vec<String>,
    /// Inspect interfaces nodes may use (`no-inspect`, `redfish`, `agent`, `inspector`,
    /// `fake`).
    pub(crate) enabled_inspect_interfaces: Vec<String>,
    /// Management interfaces nodes may use (`redfish`, `ipmitool`, `noop`, `fake`).
    /// `fake` is listed by default: no BMC type offers it, and `manual-management`
    /// nodes may pick it.
    pub(crate) enabled_management_interfaces: Vec<String>,
    /// Network interfaces nodes may use (`noop`, `flat`, `ironic-networking`: switch ports
    /// driven over SSH, with `switch_config_file`).
    pub(crate) enabled_network_interfaces: Vec<String>,
    /// Power interfaces nodes may use (`redfish`, `ipmitool`, `fake`). `fake` is listed
    /// by default: it is `manual-management`'s only power interface (the operator
    /// powers the machine) and no BMC type offers it.
    pub(crate) enabled_power_interfaces: Vec<String>,
    /// RAID interfaces nodes may use (`no-raid`, `agent`, `fake`).
    pub(crate) enabled_raid_interfaces: Vec<String>,
    /// Rescue interfaces nodes may use (`no-rescue`, `agent`, `fake`).
    pub(crate) enabled_rescue_interfaces: Vec<String>,
    /// Storage interfaces nodes may use (`noop`, `fake`).
    pub(crate) enabled_storage_interfaces: Vec<String>,
    /// Vendor interfaces nodes may use (`no-vendor`, `fake`).
    pub(crate) enabled_vendor_interfaces: Vec<String>,
    /// The bios interface a node that names none gets, for every hardware type; it must
    /// be in `enabled_bios_interfaces`, and a node whose type does not support it must
    /// name its own. Unset: the type's first supported implementation that is enabled.
    pub(crate) default_bios_interface: Option<String>,
    /// The boot interface a node that names none gets, for every hardware type; it must
    /// be in `enabled_boot_interfaces`, and a node whose type does not support it must
    /// name its own. Unset: the type's first supported implementation that is enabled.
    pub(crate) default_boot_interface: Option<String>,
    /// The console interface a node that names none gets, for every hardware type; it
    /// must be in `enabled_console_interfaces`, and a node whose type does not support
    /// it must name its own. Unset: the type's first supported implementation that is
    /// enabled.
    pub(crate) default_console_interface: Option<String>,
    /// The deploy interface a node that names none gets, for every hardware type; it
    /// must be in `enabled_deploy_interfaces`, and a node whose type does not support
    /// it must name its own. Unset: the type's first supported implementation that is
    /// enabled.
    pub(crate) default_deploy_interface: Option<String>,
    /// The firmware interface a node that names none gets, for every hardware type; it
    /// must be in `enabled_firmware_interfaces`, and a node whose type does not support
    /// it must name its own. Unset: the type's first supported implementation that is
    /// enabled.
    pub(crate) default_firmware_interface: Option<String>,
    /// The inspect interface a node that names none gets, for every hardware type; it
    /// must be in `enabled_inspect_interfaces`, and a node whose type does not support
    /// it must name its own. Unset: the type's first supported implementation that is
    /// enabled.
    pub(crate) default_inspect_interface: Option<String>,
    /// The management interface a node that names none gets, for every hardware type;
    /// it must be in `enabled_management_interfaces`, and a node whose type does not
    /// support it must name its own. Unset: the type's first supported implementation
    /// that is enabled.
    pub(crate) default_management_interface: Option<String>,
    /// The network interface a node that names none gets, for every hardware type; it
    /// must be in `enabled_network_interfaces`, and a node whose type does not support
    /// it must name its own. Unset: the type's first supported implementation that is
    /// enabled.
    pub(crate) default_network_interface: Option<String>,
    /// The power interface a node that names none gets, for every hardware type; it
    /// must be in `enabled_power_interfaces`, and a node whose type does not support it
    /// must name its own. Unset: the type's first supported implementation that is
    /// enabled.
    pub(crate) default_power_interface: Option<String>,
    /// The raid interface a node that names none gets, for every hardware type; it must
    /// be in `enabled_raid_interfaces`, and a node whose type does not support it must
    /// name its own. Unset: the type's first supported implementation that is enabled.
    pub(crate) default_raid_interface: Option<String>,
    /// The rescue interface a node that names none gets, for every hardware type; it
    /// must be in `enabled_rescue_interfaces`, and a node whose type does not support
    /// it must name its own. Unset: the type's first supported implementation that is
    /// enabled.
    pub(crate) default_rescue_interface: Option<String>,
    /// The storage interface a node that names none gets, for every hardware type; it
    /// must be in `enabled_storage_interfaces`, and a node whose type does not support
    /// it must name its own. Unset: the type's first supported implementation that is
    /// enabled.
    pub(crate) default_storage_interface: Option<String>,
    /// The vendor interface a node that names none gets, for every hardware type; it
    /// must be in `enabled_vendor_interfaces`, and a node whose type does not support
    /// it must name its own. Unset: the type's first supported implementation that is
    /// enabled.
    pub(crate) default_vendor_interface: Option<String>,
    // --- end of hardware types and interfaces ---
}

impl Default for Settings {
    fn default() -> Self {
        let interfaces = ferric_drivers::InterfaceSettings::default();
        Settings {
            database_url: "sqlite://ferric.db".to_owned(),
            sqlite_full_sync: false,
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
            pin_handoff_version: 0,
            console_tail_size: 64 * 1024,
            console_bind_address: IpAddr::from([127, 0, 0, 1]),
            console_port_range: "10000:20000".to_owned(),
            bmc_connect_timeout: 10,
            bmc_read_timeout: 30,
            bmc_retries: 3,
            bmc_max_requests: 4,
            auth_strategy: AuthStrategySetting::Noauth,
            http_basic_auth_user_file: None,
            api_max_body_size: ferric_api::limits::DEFAULT_MAX_BODY_SIZE,
            api_render_cache_size: ferric_api::DEFAULT_RENDER_CACHE_SIZE,
            api_render_cache_idle: 60,
            auth_users_file: None,
            auth_policy_file: None,
            keystone_auth_url: None,
            keystone_username: "ferric".to_owned(),
            keystone_password: None,
            keystone_password_file: None,
            keystone_project_name: "service".to_owned(),
            keystone_user_domain_name: "Default".to_owned(),
            keystone_project_domain_name: "Default".to_owned(),
            keystone_region_name: None,
            keystone_interface: "internal".to_owned(),
            keystone_cafile: None,
            keystone_timeout: 5,
            keystone_token_cache_size: 10_000,
            keystone_token_cache_time: 300,
            send_power_notifications: true,
            nova_interface: "internal".to_owned(),
            nova_region_name: None,
            api_tls_cert: None,
            tls_min_version: "1.3".to_owned(),
            tls_cipher_suites: Vec::new(),
            enable_ramdisk_endpoints: true,
            ramdisk_listen: None,
            api_tls_key: None,
            agent_verify_ca: "true".to_owned(),
            api_url: None,
            boot_http_listen: None,
            boot_http_url: None,
            boot_http_root: PathBuf::from("ferric-boot"),
            boot_https_listen: None,
            boot_https_url: None,
            boot_tls_cert: None,
            boot_tls_key: None,
            deploy_kernel: "agent.kernel".to_owned(),
            deploy_ramdisk: "agent.ramdisk".to_owned(),
            deploy_kernel_by_arch: String::new(),
            deploy_ramdisk_by_arch: String::new(),
            ipxe_bootfile_name_by_arch: String::new(),
            kernel_append_params: "console=ttyS0".to_owned(),
            dhcp_hostsdir: None,
            ipxe_dir: PathBuf::from(ferric_drivers::dhcp::IPXE_DIR),
            ramdisk_image_download_source: "local".to_owned(),
            image_download_source: "http".to_owned(),
            image_cache_size: 20480,
            glance_valid_interfaces: "internal,public".to_owned(),
            glance_region_name: None,
            oci_image_download_source: "local".to_owned(),
            image_peer_delivery: false,
            oci_authentication_config: None,
            oci_verify_ca: None,
            dhcp_interface: None,
            dhcp_range: None,
            dhcp_enable_ra: false,
            erase_devices_priority: 0,
            erase_devices_metadata_priority: 99,
            continue_if_disk_secure_erase_fails: false,
            enable_ata_secure_erase: true,
            enable_nvme_secure_erase: true,
            disk_erasure_concurrency: 4,
            clean_step_priority_override: Vec::new(),
            fast_track: false,
            agent_heartbeat_timeout: 300,
            agent_require_tls: true,
            agent_enable_bios_bootloader_install: false,
            deploy_logs_collect: "on_failure".to_owned(),
            deploy_logs_storage_backend: "local".to_owned(),
            deploy_logs_local_path: PathBuf::from("/var/log/ferric/deploy"),
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
            switch_config_file: None,
            switch_drift_check_interval: 300,
            switch_drift_repair: false,
            enabled_bios_interfaces: interfaces.enabled(InterfaceKind::Bios).to_vec(),
            enabled_boot_interfaces: interfaces.enabled(InterfaceKind::Boot).to_vec(),
            enabled_console_interfaces: interfaces.enabled(InterfaceKind::Console).to_vec(),
            enabled_deploy_interfaces: interfaces.enabled(InterfaceKind::Deploy).to_vec(),
            autodetect_deploy_interfaces: interfaces.autodetect_order().to_vec(),
            enabled_firmware_interfaces: interfaces.enabled(InterfaceKind::Firmware).to_vec(),
            enabled_inspect_interfaces: interfaces.enabled(InterfaceKind::Inspect).to_vec(),
            enabled_management_interfaces: interfaces.enabled(InterfaceKind::Management).to_vec(),
            enabled_network_interfaces: interfaces.enabled(InterfaceKind::Network).to_vec(),
            enabled_power_interfaces: interfaces.enabled(InterfaceKind::Power).to_vec(),
            enabled_raid_interfaces: interfaces.enabled(InterfaceKind::Raid).to_vec(),
            enabled_rescue_interfaces: interfaces.enabled(InterfaceKind::Rescue).to_vec(),
            enabled_storage_interfaces: interfaces.enabled(InterfaceKind::Storage).to_vec(),
            enabled_vendor_interfaces: interfaces.enabled(InterfaceKind::Vendor).to_vec(),
            default_bios_interface: None,
            default_boot_interface: None,
            default_console_interface: None,
            default_deploy_interface: None,
            default_firmware_interface: None,
            default_inspect_interface: None,
            default_management_interface: None,
            default_network_interface: None,
            default_power_interface: None,
            default_raid_interface: None,
            default_rescue_interface: None,
            default_storage_interface: None,
            default_vendor_interface: None,
        }
    }
}

/// `true`, `false` or a path (`agent_verify_ca`): a TOML file may write the first two as
/// booleans.
fn bool_or_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum BoolOrString {
        Bool(bool),
        Text(String),
    }
    Ok(match BoolOrString::deserialize(deserializer)? {
        BoolOrString::Bool(flag) => flag.to_string(),
        BoolOrString::Text(text) => text,
    })
}

impl Settings {
    /// Every setting's name, as used in the TOML file and (upper-cased, with `FERRIC_`) in
    /// the environment.
    pub(crate) const KEYS: [&'static str; 147] = [
        "database_url",
        "sqlite_full_sync",
        "api_listen",
        "log_format",
        "log_level",
        "role",
        "conductor_hostname",
        "conductor_group",
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
        "pin_handoff_version",
        "console_tail_size",
        "console_bind_address",
        "console_port_range",
        // BMCs
        "bmc_connect_timeout",
        "bmc_read_timeout",
        "bmc_retries",
        "bmc_max_requests",
        // API access
        "auth_strategy",
        "http_basic_auth_user_file",
        "api_max_body_size",
        "api_render_cache_size",
        "api_render_cache_idle",
        "auth_users_file",
        "auth_policy_file",
        "keystone_auth_url",
        "keystone_username",
        "keystone_password",
        "keystone_password_file",
        "keystone_project_name",
        "keystone_user_domain_name",
        "keystone_project_domain_name",
        "keystone_region_name",
        "keystone_interface",
        "keystone_cafile",
        "keystone_timeout",
        "keystone_token_cache_size",
        "keystone_token_cache_time",
        "send_power_notifications",
        "nova_interface",
        "nova_region_name",
        "api_tls_cert",
        "api_tls_key",
        "tls_min_version",
        "tls_cipher_suites",
        "enable_ramdisk_endpoints",
        "ramdisk_listen",
        "agent_verify_ca",
        // network boot and the agent
        "api_url",
        "boot_http_listen",
        "boot_http_url",
        "boot_http_root",
        "boot_https_listen",
        "boot_https_url",
        "boot_tls_cert",
        "boot_tls_key",
        "deploy_kernel",
        "deploy_ramdisk",
        "deploy_kernel_by_arch",
        "deploy_ramdisk_by_arch",
        "ipxe_bootfile_name_by_arch",
        "kernel_append_params",
        "dhcp_hostsdir",
        "ipxe_dir",
        "ramdisk_image_download_source",
        "image_download_source",
        "image_cache_size",
        "glance_valid_interfaces",
        "glance_region_name",
        "oci_image_download_source",
        "image_peer_delivery",
        "oci_authentication_config",
        "oci_verify_ca",
        "dhcp_interface",
        "dhcp_range",
        "dhcp_enable_ra",
        "erase_devices_priority",
        "erase_devices_metadata_priority",
        "continue_if_disk_secure_erase_fails",
        "enable_ata_secure_erase",
        "enable_nvme_secure_erase",
        "disk_erasure_concurrency",
        "clean_step_priority_override",
        "fast_track",
        "agent_heartbeat_timeout",
        "agent_require_tls",
        "agent_enable_bios_bootloader_install",
        "deploy_logs_collect",
        "deploy_logs_storage_backend",
        "deploy_logs_local_path",
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
        // switch networking
        "switch_config_file",
        "switch_drift_check_interval",
        "switch_drift_repair",
        // hardware types and interfaces
        "enabled_hardware_types",
        "enabled_bios_interfaces",
        "enabled_boot_interfaces",
        "enabled_console_interfaces",
        "enabled_deploy_interfaces",
        "autodetect_deploy_interfaces",
        "enabled_firmware_interfaces",
        "enabled_inspect_interfaces",
        "enabled_management_interfaces",
        "enabled_network_interfaces",
        "enabled_power_interfaces",
        "enabled_raid_interfaces",
        "enabled_rescue_interfaces",
        "enabled_storage_interfaces",
        "enabled_vendor_interfaces",
        "default_bios_interface",
        "default_boot_interface",
        "default_console_interface",
        "default_deploy_interface",
        "default_firmware_interface",
        "default_inspect_interface",
        "default_management_interface",
        "default_network_interface",
        "default_power_interface",
        "default_raid_interface",
        "default_rescue_interface",
        "default_storage_interface",
        "default_vendor_interface",
    ];

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
            // Only the known keys, each read as its setting's type: other FERRIC_* variables
            // (FERRIC_URL for the CLI, test settings, …) belong to other parts of the program.
            .merge(env::provider()?)
            .merge(Serialized::defaults(overrides))
            .extract()
            .context("invalid settings")
    }
}

#[cfg(test)]
mod tests;
