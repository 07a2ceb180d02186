//! Site-wide settings the drivers need: where boot files are served, where the API is, how
//! cleaning erases disks. `ferric server` fills them from its configuration. Also the URL of a
//! file on the boot file server ([`boot_file_url`]), which the boot and deploy interfaces share.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::DriverError;

/// Network boot (`ipxe` boot interface) and the boot file server.
#[derive(Debug, Clone)]
pub struct BootSettings {
    /// The base URL machines fetch boot files from (Ferric's boot file server), e.g.
    /// `http://10.231.0.1:8080`. `None`: network boot is not configured and the `ipxe` boot
    /// interface refuses to validate.
    pub http_url: Option<String>,
    /// The base URL BMCs fetch boot ISOs from over HTTPS (the boot file server's TLS listener,
    /// e.g. `https://10.231.0.1:8443`): what the `redfish-https` boot interface gives the BMC
    /// as `HttpBootUri`. `None`: that interface refuses to validate.
    pub https_url: Option<String>,
    /// The directory the boot file server serves: the agent kernel and ramdisk, the iPXE
    /// scripts Ferric writes (`boot.ipxe`, `ipxe/<mac>.ipxe`) and images (`images/`).
    pub http_root: PathBuf,
    /// The API URL the agent is told on its kernel command line (`ipa-api-url=`).
    pub api_url: Option<String>,
    /// The agent kernel and ramdisk: a URL, or a file name under `http_root`. A node's
    /// `driver_info.deploy_kernel` / `deploy_ramdisk` override them.
    pub deploy_kernel: String,
    pub deploy_ramdisk: String,
    /// The agent kernel and ramdisk per `properties.cpu_arch`, between a node's own and the
    /// defaults above (`boot_arch`).
    pub deploy_kernel_by_arch: BTreeMap<String, String>,
    pub deploy_ramdisk_by_arch: BTreeMap<String, String>,
    /// Appended to the agent's kernel command line.
    pub kernel_append_params: String,
    /// dnsmasq's `--dhcp-hostsdir`: Ferric writes one file per MAC of a node in a ramdisk
    /// phase (tagged `ferric`) and removes it afterwards. `None`: DHCP is the operator's.
    pub dhcp_hostsdir: Option<PathBuf>,
    /// Where the iPXE loaders firmware network boot fetches are read from (`snponly.efi`,
    /// `undionly.kpxe`): Debian's `ipxe` package by default, or a site's own iPXE build.
    pub ipxe_dir: PathBuf,
    /// How a deploy or rescue ISO a node brings (`driver_info.deploy_iso`) reaches its BMC.
    pub ramdisk_image_download_source: DownloadSource,
}

/// How an image named by URL reaches the machine (Ironic's `*_image_download_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DownloadSource {
    /// The conductor downloads it and serves it from its boot file server.
    #[default]
    Local,
    /// The URL is handed on; the BMC or agent fetches from the origin.
    Http,
}

impl std::str::FromStr for DownloadSource {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "local" => Ok(Self::Local),
            "http" => Ok(Self::Http),
            other => Err(format!(
                "'{other}' is not an image download source: use local (the conductor downloads \
                 and serves it) or http (the URL is handed on)"
            )),
        }
    }
}

impl Default for BootSettings {
    fn default() -> Self {
        Self {
            http_url: None,
            https_url: None,
            http_root: PathBuf::from("./ferric-boot"),
            api_url: None,
            deploy_kernel: "agent.kernel".to_owned(),
            deploy_ramdisk: "agent.ramdisk".to_owned(),
            deploy_kernel_by_arch: BTreeMap::new(),
            deploy_ramdisk_by_arch: BTreeMap::new(),
            kernel_append_params: "console=ttyS0 console=tty0".to_owned(),
            dhcp_hostsdir: None,
            ipxe_dir: PathBuf::from(crate::dhcp::IPXE_DIR),
            ramdisk_image_download_source: DownloadSource::Local,
        }
    }
}

/// The `direct` deploy interface and cleaning through the agent.
#[derive(Debug, Clone)]
pub struct DeploySettings {
    /// Priority of the agent's full `erase_devices` in automated cleaning (0: not run).
    pub erase_devices_priority: u32,
    /// Priority of `erase_devices_metadata` in automated cleaning (0: not run).
    pub erase_devices_metadata_priority: u32,
    /// How the agent's `erase_devices` erases disks.
    pub erase: EraseSettings,
    /// How often a running agent command is looked at.
    pub command_poll_interval: Duration,
    /// How long one request to an agent may take.
    pub agent_command_timeout: Duration,
    /// The executable that renders a config drive given as JSON into an ISO 9660 image.
    pub iso_tool: String,
    /// How agents' HTTPS certificates are checked (`agent_verify_ca`).
    pub agent_verify_ca: AgentVerifyCa,
    /// When the ramdisk's logs are collected (`deploy_logs_collect`).
    pub logs_collect: LogsCollect,
    /// Where collected ramdisk logs are stored (`deploy_logs_local_path`).
    pub logs_local_path: PathBuf,
}

/// Ironic's `[deploy]` erase options, which the conductor hands the agent in the node's
/// `driver_internal_info` (Ironic's `agent_add_clean_params`) before it boots for cleaning or
/// servicing; IPA and ferric-agent read them there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EraseSettings {
    /// `agent_continue_if_secure_erase_failed` and `agent_continue_if_ata_erase_failed`.
    pub continue_if_secure_erase_fails: bool,
    /// `agent_enable_ata_secure_erase`.
    pub ata_secure_erase: bool,
    /// `agent_enable_nvme_secure_erase`.
    pub nvme_secure_erase: bool,
    /// `disk_erasure_concurrency`.
    pub concurrency: u32,
}

impl Default for EraseSettings {
    /// Ironic's defaults.
    fn default() -> Self {
        Self {
            continue_if_secure_erase_fails: false,
            ata_secure_erase: true,
            nvme_secure_erase: true,
            concurrency: 4,
        }
    }
}

impl EraseSettings {
    /// The `driver_internal_info` entries, with Ironic's names.
    pub fn agent_params(&self) -> [(&'static str, serde_json::Value); 5] {
        [
            (
                "agent_continue_if_secure_erase_failed",
                self.continue_if_secure_erase_fails.into(),
            ),
            (
                "agent_continue_if_ata_erase_failed",
                self.continue_if_secure_erase_fails.into(),
            ),
            (
                "agent_enable_ata_secure_erase",
                self.ata_secure_erase.into(),
            ),
            (
                "agent_enable_nvme_secure_erase",
                self.nvme_secure_erase.into(),
            ),
            ("disk_erasure_concurrency", self.concurrency.into()),
        ]
    }
}

/// When the agent's logs (`log.collect_system_logs`) are collected and stored: Ironic's
/// `[agent]deploy_logs_collect`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogsCollect {
    /// After every deployment (before the agent goes) and when a flow fails.
    Always,
    /// When a deployment, cleaning or servicing fails while the agent runs.
    #[default]
    OnFailure,
    Never,
}

impl LogsCollect {
    /// `always`, `on_failure` or `never`.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "always" => Ok(Self::Always),
            "on_failure" => Ok(Self::OnFailure),
            "never" => Ok(Self::Never),
            other => Err(format!(
                "deploy_logs_collect is \"{other}\"; use always, on_failure or never"
            )),
        }
    }
}

/// How the conductor checks the certificate of an agent whose callback URL is `https://`
/// (Ironic's `[agent]verify_ca`: true, false or a CA file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AgentVerifyCa {
    /// Against the system's trusted roots.
    #[default]
    SystemRoots,
    /// Not at all (test labs only: anyone on the provisioning network can impersonate an
    /// agent).
    Disabled,
    /// Against the CA certificates in this PEM file only.
    CaFile(PathBuf),
}

impl AgentVerifyCa {
    /// `true`, `false` (any case; also `yes`/`no`, `1`/`0`), or a path.
    pub fn parse(text: &str) -> Self {
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" | "on" => Self::SystemRoots,
            "false" | "no" | "0" | "off" => Self::Disabled,
            _ => Self::CaFile(PathBuf::from(text.trim())),
        }
    }
}

impl Default for DeploySettings {
    fn default() -> Self {
        Self {
            erase_devices_priority: 0,
            erase_devices_metadata_priority: 99,
            erase: EraseSettings::default(),
            command_poll_interval: Duration::from_secs(2),
            agent_command_timeout: Duration::from_secs(60),
            iso_tool: "genisoimage".to_owned(),
            agent_verify_ca: AgentVerifyCa::default(),
            logs_collect: LogsCollect::default(),
            logs_local_path: PathBuf::from("/var/log/ferric/deploy"),
        }
    }
}

/// In-band inspection: the `inspector` interface (seed 002) and the `agent` interface.
#[derive(Debug, Clone)]
pub struct InspectorSettings {
    /// `inspector_enabled`: inspection through the inspection service. Off by default; the
    /// `inspector` interface then fails inspection with an error naming this setting.
    pub enabled: bool,
    /// `inspector_service_url`: where the conductor reaches the service, e.g.
    /// `http://127.0.0.1:5050`.
    pub service_url: Option<String>,
    /// Where the ramdisk posts its data to the service (`<url>/v1/continue`); defaults to
    /// `service_url`, which machines often cannot reach when it is on loopback.
    pub callback_url: Option<String>,
    /// How long one request to the service may take.
    pub request_timeout: Duration,
}

impl Default for InspectorSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            service_url: None,
            callback_url: None,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Everything above, shared by every node's interfaces.
#[derive(Debug, Clone, Default)]
pub struct DriverSettings {
    pub boot: BootSettings,
    pub deploy: DeploySettings,
    pub inspector: InspectorSettings,
    /// Fast track: ramdisk phases reuse a running agent instead of rebooting into one.
    pub fast_track: crate::fast_track::FastTrackSettings,
}

/// A URL for `name`: itself when it is one, else a file under the boot server's root.
pub fn boot_file_url(http_url: &str, name: &str) -> Result<String, DriverError> {
    // The name goes into an iPXE script line: whitespace would add arguments, a line break
    // commands, `${…}` expands settings, quotes and backslashes change how iPXE splits it.
    if name
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '$' | '"' | '\'' | '\\'))
    {
        return Err(DriverError::invalid(
            "driver_info.deploy_kernel",
            format!(
                "{name:?} is not a usable boot file: URLs and file names cannot contain spaces, \
             control characters, $, quotes or backslashes."
            ),
        ));
    }
    if name.starts_with("http://") || name.starts_with("https://") {
        return Ok(name.to_owned());
    }
    let relative = name.trim_start_matches('/');
    let safe = !relative.is_empty()
        && !relative.contains("://")
        && relative
            .split('/')
            .all(|part| !part.is_empty() && part != "..");
    if !safe {
        return Err(DriverError::invalid(
            "driver_info.deploy_kernel",
            format!(
                "\"{name}\" is neither an http(s) URL nor a file name under the boot file server's \
             root."
            ),
        ));
    }
    Ok(format!("{}/{relative}", http_url.trim_end_matches('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_files_are_urls_or_safe_names() {
        let base = "http://h:8080/";
        assert_eq!(
            boot_file_url(base, "images/os.img").expect("name"),
            "http://h:8080/images/os.img"
        );
        assert_eq!(
            boot_file_url(base, "https://x/y").expect("url"),
            "https://x/y"
        );
        assert!(boot_file_url(base, "../etc/passwd").is_err());
        assert!(boot_file_url(base, "file:///etc/passwd").is_err());
        assert!(boot_file_url(base, "").is_err());
    }
}
