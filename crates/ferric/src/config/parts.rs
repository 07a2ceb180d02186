//! The settings turned into each part's configuration (conductor, drivers, BMCs, API access,
//! inspection, the managed dnsmasq), checked: a value no part could work with stops
//! `ferric server` at start-up with a message naming the setting.

use std::path::{Path, PathBuf};

use anyhow::Context;
use ferric_model::resources::InterfaceKind;

use super::{AuthStrategySetting, Settings};

impl Settings {
    /// The conductor's settings, with the hardware types checked.
    pub(crate) fn conductor(
        &self,
    ) -> anyhow::Result<(ferric_drivers::Drivers, ferric_conductor::ConductorConfig)> {
        let drivers = ferric_drivers::Drivers::new(&self.enabled_hardware_types)
            .map_err(|error| anyhow::anyhow!("invalid enabled_hardware_types: {error}"))?
            .with_interfaces(self.interface_settings()?)
            .map_err(|error| anyhow::anyhow!("invalid interface settings: {error}"))?;
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
        ferric_drivers::LogsCollect::parse(&self.deploy_logs_collect)
            .map_err(|error| anyhow::anyhow!("{error}"))?;
        self.ramdisk_image_download_source
            .parse::<ferric_drivers::DownloadSource>()
            .map_err(|error| anyhow::anyhow!("ramdisk_image_download_source: {error}"))?;
        self.boot_by_arch()?;
        anyhow::ensure!(
            self.deploy_logs_storage_backend
                .eq_ignore_ascii_case("local"),
            "deploy_logs_storage_backend is \"{}\"; Ferric stores ramdisk logs only locally \
             (local, in deploy_logs_local_path)",
            self.deploy_logs_storage_backend
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
            handoff: ferric_model::action::HandoffVersion::pinned(
                (self.pin_handoff_version > 0).then_some(self.pin_handoff_version),
            )
            .map_err(anyhow::Error::msg)?,
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
            agent_require_tls: self.agent_require_tls,
            agent_enable_bios_bootloader_install: self.agent_enable_bios_bootloader_install,
            tls_min_version: self.tls_policy()?.min_version().to_owned(),
            tls_cipher_suites: self.tls_policy()?.cipher_suites,
            inspection: self.processing()?,
            clean_step_priority_override: ferric_conductor::PriorityOverride::parse_all(
                &self.clean_step_priority_override,
            )
            .map_err(|error| anyhow::anyhow!("invalid settings: {error}"))?,
            console: self.console_settings()?,
            switch_drift_check_interval: optional(self.switch_drift_check_interval),
            switch_drift_repair: self.switch_drift_repair,
            ..ferric_conductor::ConductorConfig::default()
        };
        let mut drivers = drivers
            .with_bmc_settings(bmc)
            .with_settings(self.driver_settings())
            .with_images(self.image_settings()?)
            .map_err(|error| anyhow::anyhow!("the image cache cannot be used: {error}"))?;
        if let Some(path) = &self.switch_config_file {
            let switches = ferric_drivers::switch::NetworkSettings::from_file(path)
                .map_err(|error| anyhow::anyhow!("invalid switch_config_file: {error}"))?;
            drivers = drivers
                .with_switches(switches)
                .map_err(|error| anyhow::anyhow!("invalid switch_config_file: {error}"))?;
        }
        Ok((drivers, config))
    }

    /// What the HTTPS listeners and the agents accept (`tls_min_version`,
    /// `tls_cipher_suites`), checked.
    pub(crate) fn tls_policy(&self) -> anyhow::Result<ferric_agent::tls::TlsPolicy> {
        ferric_agent::tls::TlsPolicy::parse(&self.tls_min_version, &self.tls_cipher_suites)
            .map_err(|error| anyhow::anyhow!("invalid TLS settings: {error}"))
    }

    /// The consoles' settings (`console_*`), checked.
    pub(crate) fn console_settings(&self) -> anyhow::Result<ferric_conductor::ConsoleSettings> {
        anyhow::ensure!(
            self.console_tail_size >= 1024,
            "console_tail_size must be at least 1024 bytes (it is {}): a viewer would see \
             less than a screen of what happened",
            self.console_tail_size
        );
        let range = self
            .console_port_range
            .split_once(':')
            .and_then(|(low, high)| Some((low.trim().parse().ok()?, high.trim().parse().ok()?)))
            .filter(|(low, high): &(u16, u16)| *low >= 1 && low <= high)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "console_port_range is \"{}\"; expected LOW:HIGH, two ports with LOW <= \
                     HIGH (e.g. 10000:20000)",
                    self.console_port_range
                )
            })?;
        Ok(ferric_conductor::ConsoleSettings {
            tail_size: self.console_tail_size,
            bind_address: self.console_bind_address,
            port_range: range,
        })
    }

    /// The site's enabled interfaces and their defaults (`enabled_<kind>_interfaces`,
    /// `default_<kind>_interface`), checked: known names only, defaults among the enabled.
    pub(crate) fn interface_settings(&self) -> anyhow::Result<ferric_drivers::InterfaceSettings> {
        let mut interfaces = ferric_drivers::InterfaceSettings::default();
        for (kind, enabled, default) in self.interface_lists() {
            interfaces = interfaces
                .with_enabled(kind, enabled)
                .and_then(|interfaces| interfaces.with_default(kind, default.as_deref()))
                .map_err(|error| anyhow::anyhow!("invalid interface settings: {error}"))?;
        }
        interfaces
            .with_autodetect(&self.autodetect_deploy_interfaces)
            .map_err(|error| anyhow::anyhow!("invalid interface settings: {error}"))
    }

    /// Each interface kind with its two settings.
    fn interface_lists(&self) -> [(InterfaceKind, &[String], &Option<String>); 13] {
        [
            (
                InterfaceKind::Bios,
                &self.enabled_bios_interfaces,
                &self.default_bios_interface,
            ),
            (
                InterfaceKind::Boot,
                &self.enabled_boot_interfaces,
                &self.default_boot_interface,
            ),
            (
                InterfaceKind::Console,
                &self.enabled_console_interfaces,
                &self.default_console_interface,
            ),
            (
                InterfaceKind::Deploy,
                &self.enabled_deploy_interfaces,
                &self.default_deploy_interface,
            ),
            (
                InterfaceKind::Firmware,
                &self.enabled_firmware_interfaces,
                &self.default_firmware_interface,
            ),
            (
                InterfaceKind::Inspect,
                &self.enabled_inspect_interfaces,
                &self.default_inspect_interface,
            ),
            (
                InterfaceKind::Management,
                &self.enabled_management_interfaces,
                &self.default_management_interface,
            ),
            (
                InterfaceKind::Network,
                &self.enabled_network_interfaces,
                &self.default_network_interface,
            ),
            (
                InterfaceKind::Power,
                &self.enabled_power_interfaces,
                &self.default_power_interface,
            ),
            (
                InterfaceKind::Raid,
                &self.enabled_raid_interfaces,
                &self.default_raid_interface,
            ),
            (
                InterfaceKind::Rescue,
                &self.enabled_rescue_interfaces,
                &self.default_rescue_interface,
            ),
            (
                InterfaceKind::Storage,
                &self.enabled_storage_interfaces,
                &self.default_storage_interface,
            ),
            (
                InterfaceKind::Vendor,
                &self.enabled_vendor_interfaces,
                &self.default_vendor_interface,
            ),
        ]
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

    /// The URL BMCs reach the boot file server's HTTPS listener at, if there is one.
    pub(crate) fn boot_https_url(&self) -> Option<String> {
        self.boot_https_url
            .clone()
            .or_else(|| {
                self.boot_https_listen
                    .filter(|address| !address.ip().is_unspecified())
                    .map(|address| format!("https://{address}"))
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
            // Firmware PXE clients get iPXE from `ipxe_dir` (Debian's `ipxe`) over dnsmasq's
            // TFTP; without it only clients that are iPXE already can boot (the `pxe` and
            // `http` boot interfaces say so at validate).
            tftp_root: self.ipxe_dir.is_dir().then(|| self.ipxe_dir.clone()),
            http_boot_url: Some(format!("{boot_url}/{}", ferric_drivers::dhcp::UEFI_LOADER)),
            loaders: self.boot_by_arch()?.2,
        }))
    }

    /// The per-architecture boot file settings, parsed and checked: agent kernels, agent
    /// ramdisks, first-stage loaders.
    pub(crate) fn boot_by_arch(
        &self,
    ) -> anyhow::Result<(
        ferric_drivers::boot_arch::ArchMap,
        ferric_drivers::boot_arch::ArchMap,
        ferric_drivers::dhcp::Loaders,
    )> {
        use ferric_drivers::boot_arch::{loaders, parse_map};
        let parse = |name: &str, text: &str| parse_map(name, text).map_err(anyhow::Error::msg);
        let kernels = parse("deploy_kernel_by_arch", &self.deploy_kernel_by_arch)?;
        let ramdisks = parse("deploy_ramdisk_by_arch", &self.deploy_ramdisk_by_arch)?;
        let loaders = loaders(&parse(
            "ipxe_bootfile_name_by_arch",
            &self.ipxe_bootfile_name_by_arch,
        )?)
        .map_err(anyhow::Error::msg)?;
        Ok((kernels, ramdisks, loaders))
    }

    /// What the drivers need to know about the site.
    pub(crate) fn driver_settings(&self) -> ferric_drivers::DriverSettings {
        ferric_drivers::DriverSettings {
            boot: ferric_drivers::BootSettings {
                http_url: self.boot_http_url(),
                https_url: self.boot_https_url(),
                http_root: self.boot_http_root.clone(),
                api_url: self
                    .api_url
                    .clone()
                    .map(|url| url.trim_end_matches('/').to_owned()),
                deploy_kernel: self.deploy_kernel.clone(),
                deploy_ramdisk: self.deploy_ramdisk.clone(),
                // Checked in `conductor()`.
                deploy_kernel_by_arch: self.boot_by_arch().map(|by| by.0).unwrap_or_default(),
                deploy_ramdisk_by_arch: self.boot_by_arch().map(|by| by.1).unwrap_or_default(),
                kernel_append_params: self.kernel_append_params.clone(),
                dhcp_hostsdir: self.effective_dhcp_hostsdir(),
                ipxe_dir: self.ipxe_dir.clone(),
                // Checked in `conductor()`.
                ramdisk_image_download_source: self
                    .ramdisk_image_download_source
                    .parse()
                    .unwrap_or_default(),
            },
            deploy: ferric_drivers::DeploySettings {
                erase_devices_priority: self.erase_devices_priority,
                erase_devices_metadata_priority: self.erase_devices_metadata_priority,
                erase: ferric_drivers::EraseSettings {
                    continue_if_secure_erase_fails: self.continue_if_disk_secure_erase_fails,
                    ata_secure_erase: self.enable_ata_secure_erase,
                    nvme_secure_erase: self.enable_nvme_secure_erase,
                    concurrency: self.disk_erasure_concurrency,
                },
                agent_verify_ca: ferric_drivers::AgentVerifyCa::parse(&self.agent_verify_ca),
                // Checked in `conductor()`.
                logs_collect: ferric_drivers::LogsCollect::parse(&self.deploy_logs_collect)
                    .unwrap_or_default(),
                logs_local_path: self.deploy_logs_local_path.clone(),
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

    /// Glance and the conductor's image cache (`image_*`, `glance_*`): Glance is reached with
    /// Ferric's Keystone service credentials when `keystone_auth_url` is set, whatever the
    /// API's `auth_strategy`.
    fn image_settings(&self) -> anyhow::Result<ferric_drivers::images::ImageSettings> {
        let download_source = self
            .image_download_source
            .parse::<ferric_drivers::DownloadSource>()
            .map_err(|error| anyhow::anyhow!("image_download_source: {error}"))?;
        let session = match &self.keystone_auth_url {
            Some(auth_url) => {
                let timeout = std::time::Duration::from_secs(self.keystone_timeout.max(1));
                let http = ferric_drivers::keystone_session::client(
                    self.keystone_cafile.as_deref(),
                    timeout,
                )?;
                Some(ferric_drivers::keystone_session::ServiceSession::new(
                    ferric_drivers::keystone_session::ServiceCredentials {
                        auth_url: auth_url.clone(),
                        username: self.keystone_username.clone(),
                        password: self.keystone_password()?,
                        project_name: self.keystone_project_name.clone(),
                        user_domain_name: self.keystone_user_domain_name.clone(),
                        project_domain_name: self.keystone_project_domain_name.clone(),
                    },
                    http,
                    timeout,
                ))
            }
            None => None,
        };
        let glance_interfaces: Vec<String> = self
            .glance_valid_interfaces
            .split(',')
            .map(str::trim)
            .filter(|interface| !interface.is_empty())
            .map(str::to_owned)
            .collect();
        anyhow::ensure!(
            !glance_interfaces.is_empty(),
            "glance_valid_interfaces names no interface; use e.g. internal,public"
        );
        let oci_download_source = self
            .oci_image_download_source
            .parse::<ferric_drivers::DownloadSource>()
            .map_err(|error| anyhow::anyhow!("oci_image_download_source: {error}"))?;
        Ok(ferric_drivers::images::ImageSettings {
            http_root: self.boot_http_root.clone(),
            cache_size: self.image_cache_size.saturating_mul(1024 * 1024),
            download_source,
            session,
            glance_interfaces,
            glance_region: self
                .glance_region_name
                .clone()
                .or_else(|| self.keystone_region_name.clone()),
            oci_verify_ca: self.oci_verify_ca.clone(),
            oci_authentication_config: self.oci_authentication_config.clone(),
            oci_download_source,
            peer_delivery: self.image_peer_delivery,
        })
    }

    /// Ferric's Keystone password: the first line of `keystone_password_file`, else
    /// `keystone_password`.
    fn keystone_password(&self) -> anyhow::Result<String> {
        Ok(match &self.keystone_password_file {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("cannot read keystone_password_file {}", path.display()))?
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
            None => self.keystone_password.clone().unwrap_or_default(),
        })
    }

    /// `auth_strategy = keystone`: the service credentials and client settings, checked (the
    /// password file read); Keystone itself is first contacted by the first request.
    fn keystone_auth(&self) -> anyhow::Result<ferric_api::keystone::KeystoneAuth> {
        let Some(auth_url) = self.keystone_auth_url.clone() else {
            anyhow::bail!(
                "auth_strategy is keystone but keystone_auth_url is not set; name Keystone's \
                 identity v3 URL (e.g. http://keystone:5000/v3)"
            );
        };
        let password = self.keystone_password()?;
        if self.keystone_timeout == 0 || self.keystone_token_cache_size == 0 {
            anyhow::bail!("keystone_timeout and keystone_token_cache_size must be at least 1");
        }
        let settings = ferric_api::keystone::KeystoneSettings {
            auth_url,
            username: self.keystone_username.clone(),
            password,
            project_name: self.keystone_project_name.clone(),
            user_domain_name: self.keystone_user_domain_name.clone(),
            project_domain_name: self.keystone_project_domain_name.clone(),
            region_name: self.keystone_region_name.clone(),
            interface: self.keystone_interface.clone(),
            ca_file: self.keystone_cafile.clone(),
            timeout: std::time::Duration::from_secs(self.keystone_timeout),
            cache_size: self.keystone_token_cache_size,
            cache_time: std::time::Duration::from_secs(self.keystone_token_cache_time),
        };
        Ok(ferric_api::keystone::KeystoneAuth::new(settings)?)
    }

    /// Nova's `power-update` sender for the conductor (`send_power_notifications`), with
    /// `auth_strategy = keystone` only: Nova is found in the catalog of Ferric's service token.
    pub(crate) fn power_events(
        &self,
    ) -> anyhow::Result<Option<std::sync::Arc<dyn ferric_conductor::PowerEvents>>> {
        if !self.send_power_notifications || self.auth_strategy != AuthStrategySetting::Keystone {
            return Ok(None);
        }
        let region = self
            .nova_region_name
            .clone()
            .or_else(|| self.keystone_region_name.clone());
        Ok(Some(std::sync::Arc::new(
            ferric_api::nova::NovaNotifier::new(
                self.keystone_auth()?,
                self.nova_interface.clone(),
                region,
            ),
        )))
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
            (AuthStrategySetting::Keystone, _) => {
                ferric_api::AuthStrategy::Keystone(self.keystone_auth()?)
            }
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
            endpoints: if self.enable_ramdisk_endpoints {
                ferric_api::listener::Endpoints::All
            } else {
                ferric_api::listener::Endpoints::WithoutRamdisk
            },
        })
    }
}
