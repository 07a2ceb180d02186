//! The conductor's settings, with the defaults Ironic's mirror.

use std::time::Duration;

use crate::console_hub::ConsoleSettings;
use crate::priority_override::PriorityOverride;

/// The conductor's settings (`reference/ironic.md` §6.4 for the defaults mirrored here).
#[derive(Debug, Clone)]
pub struct ConductorConfig {
    /// This conductor's name in leases, history and `GET /v1/conductors`; unique per process.
    pub hostname: String,
    pub conductor_group: String,
    /// How many tasks may run at once; more requests get 503.
    pub workers: usize,
    /// How long a lease lasts without renewal; a dead conductor's nodes are taken over after it.
    pub lease_ttl: Duration,
    /// How often the conductor records that it is alive.
    pub heartbeat_interval: Duration,
    /// How old a conductor's last heartbeat may be before the others count it dead and drop
    /// it from the hash ring (its nodes move to the remaining conductors).
    pub heartbeat_timeout: Duration,
    /// How long an API process waits for another conductor to answer a request it handed
    /// over before it answers 503.
    pub request_timeout: Duration,
    /// The hand-off version this process sends to other conductors: its own, or an older
    /// one it is pinned to while a rolling upgrade runs (`pin_handoff_version`).
    pub handoff: ferric_model::action::HandoffVersion,
    /// Whether `provide` and undeploy run automated cleaning (a node's own
    /// `automated_clean=false` also skips it).
    pub automated_clean: bool,
    /// Power-state sync period; `None` disables it.
    pub sync_power_state_interval: Option<Duration>,
    /// Failed power reads in a row before a node goes into maintenance (`fault: power failure`).
    pub power_state_sync_max_retries: u32,
    /// How many power reads the power sync has in flight at once, in total (they are
    /// asynchronous requests, not threads: hundreds cost little).
    pub power_sync_workers: usize,
    /// How many of them may go to one BMC at once.
    pub power_sync_max_per_bmc: usize,
    /// How long one BMC may take to answer a power read before it counts as failed.
    pub power_sync_timeout: Duration,
    /// Period of the callback-timeout and recovery reconcilers.
    pub check_provision_state_interval: Duration,
    pub deploy_callback_timeout: Option<Duration>,
    pub clean_callback_timeout: Option<Duration>,
    pub inspect_wait_timeout: Option<Duration>,
    pub rescue_callback_timeout: Option<Duration>,
    pub service_callback_timeout: Option<Duration>,
    /// Whether [`Conductor::start`](crate::Conductor::start) runs the reconcilers periodically (tests step them).
    pub periodic: bool,
    /// Fast track (§3): agents may look nodes up and heartbeat in resting states, and a node
    /// whose agent is up skips the reboot into the ramdisk.
    pub fast_track: bool,
    /// How long an agent may stay silent; it heartbeats at 30–60 % of this.
    pub agent_heartbeat_timeout: Duration,
    /// Ironic's `[agent]require_tls`: heartbeats whose callback URL is not `https://` are
    /// refused, so no agent token is sent to an agent in clear text.
    pub agent_require_tls: bool,
    /// Ironic's `[agent]enable_bios_bootloader_install`, sent to agents at lookup: whether an
    /// agent may run a deployed image's own `grub-install` to make a BIOS node bootable.
    pub agent_enable_bios_bootloader_install: bool,
    /// The oldest TLS version (`1.2` or `1.3`) and the cipher suites (IANA names; empty: the
    /// library's defaults) agents are told to accept on their own HTTPS API, at lookup.
    pub tls_min_version: String,
    pub tls_cipher_suites: Vec<String>,
    /// How the `agent` inspect interface's data is processed (`add_ports`, overwriting).
    pub inspection: ferric_inspector::ProcessingConfig,
    /// How often nodes inspected through the inspection service are polled; `None`: never.
    pub inspector_status_interval: Option<Duration>,
    /// Ironic's `[conductor]clean_step_priority_override`: automated cleaning runs these
    /// steps, the driver's or the agent's, at these priorities (0: not at all).
    pub clean_step_priority_override: Vec<PriorityOverride>,
    /// Serial consoles: output kept per node, where the TCP relays listen.
    pub console: ConsoleSettings,
    /// How often the switch ports the `ironic-networking` interface manages are read back
    /// for drift; `None`: never.
    pub switch_drift_check_interval: Option<Duration>,
    /// Whether a drifted switch port is put back where Ferric left it (else the node goes
    /// into maintenance with `fault: switch port drift`).
    pub switch_drift_repair: bool,
}

impl Default for ConductorConfig {
    fn default() -> Self {
        let half_hour = Some(Duration::from_secs(1800));
        Self {
            hostname: default_hostname(),
            conductor_group: String::new(),
            workers: 300,
            lease_ttl: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(10),
            heartbeat_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            handoff: ferric_model::action::HandoffVersion::default(),
            automated_clean: true,
            sync_power_state_interval: Some(Duration::from_secs(120)),
            power_state_sync_max_retries: 3,
            power_sync_workers: 256,
            power_sync_max_per_bmc: 2,
            power_sync_timeout: Duration::from_secs(60),
            check_provision_state_interval: Duration::from_secs(60),
            deploy_callback_timeout: half_hour,
            clean_callback_timeout: half_hour,
            inspect_wait_timeout: half_hour,
            rescue_callback_timeout: half_hour,
            service_callback_timeout: half_hour,
            periodic: true,
            fast_track: false,
            agent_heartbeat_timeout: Duration::from_secs(300),
            agent_require_tls: false,
            agent_enable_bios_bootloader_install: false,
            tls_min_version: "1.3".to_owned(),
            tls_cipher_suites: Vec::new(),
            inspection: ferric_inspector::ProcessingConfig::default(),
            inspector_status_interval: Some(Duration::from_secs(60)),
            clean_step_priority_override: Vec::new(),
            console: ConsoleSettings::default(),
            switch_drift_check_interval: Some(Duration::from_secs(300)),
            switch_drift_repair: false,
        }
    }
}

/// The machine's host name, or `ferric` when it cannot be read.
pub fn default_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "ferric".to_owned())
}
