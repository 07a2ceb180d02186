//! The settings' tests: layering, refusals, and what each part receives.
#![allow(
    clippy::result_large_err,
    reason = "figment::Jail's closures return figment's own error"
)]

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

/// A value other than the default for every setting, as its environment variable is written;
/// together they make a configuration the server accepts.
const SAMPLES: [(&str, &str); 147] = [
    ("database_url", "sqlite://sample.db"),
    ("sqlite_full_sync", "true"),
    ("api_listen", "127.0.0.1:7385"),
    ("log_format", "json"),
    ("log_level", "info,ferric_db=debug"),
    ("role", "conductor"),
    ("conductor_hostname", "1234"),
    ("conductor_group", "42"),
    ("conductor_workers", "17"),
    ("automated_clean", "false"),
    ("sync_power_state_interval", "0"),
    ("power_state_sync_max_retries", "5"),
    ("power_sync_workers", "8"),
    ("power_sync_max_per_bmc", "3"),
    ("power_sync_timeout", "20"),
    ("check_provision_state_interval", "5"),
    ("deploy_callback_timeout", "0"),
    ("clean_callback_timeout", "600"),
    ("inspect_wait_timeout", "700"),
    ("rescue_callback_timeout", "800"),
    ("service_callback_timeout", "900"),
    ("power_state_change_timeout", "30"),
    ("node_lease_timeout", "10"),
    ("conductor_heartbeat_interval", "2"),
    ("conductor_heartbeat_timeout", "7"),
    ("conductor_request_timeout", "9"),
    ("pin_handoff_version", "1"),
    ("console_tail_size", "4096"),
    ("console_bind_address", "127.0.0.2"),
    ("console_port_range", "12000:12010"),
    ("bmc_connect_timeout", "4"),
    ("bmc_read_timeout", "11"),
    ("bmc_retries", "0"),
    ("bmc_max_requests", "2"),
    ("auth_strategy", "http_basic"),
    ("http_basic_auth_user_file", "htpasswd"),
    ("api_max_body_size", "2097152"),
    ("api_render_cache_size", "1048576"),
    ("api_render_cache_idle", "30"),
    ("auth_users_file", "users.toml"),
    ("auth_policy_file", "policy.toml"),
    ("keystone_auth_url", "http://127.0.0.1:5000/v3"),
    ("keystone_username", "baremetal"),
    ("keystone_password", "sample-password"),
    ("keystone_password_file", "keystone-password"),
    ("keystone_project_name", "services"),
    ("keystone_user_domain_name", "users"),
    ("keystone_project_domain_name", "projects"),
    ("keystone_region_name", "RegionTwo"),
    ("keystone_interface", "public"),
    ("keystone_cafile", "keystone-ca.pem"),
    ("keystone_timeout", "3"),
    ("keystone_token_cache_size", "100"),
    ("keystone_token_cache_time", "60"),
    ("send_power_notifications", "false"),
    ("nova_interface", "public"),
    ("nova_region_name", "RegionTwo"),
    ("api_tls_cert", "cert.pem"),
    ("api_tls_key", "key.pem"),
    ("tls_min_version", "1.2"),
    (
        "tls_cipher_suites",
        "TLS13_AES_256_GCM_SHA384,TLS13_AES_128_GCM_SHA256",
    ),
    ("enable_ramdisk_endpoints", "false"),
    ("ramdisk_listen", "127.0.0.1:6386"),
    ("agent_verify_ca", "false"),
    ("api_url", "http://127.0.0.1:6385"),
    ("boot_http_listen", "127.0.0.1:8080"),
    ("boot_http_url", "http://127.0.0.1:8080"),
    ("boot_http_root", "boot-root"),
    ("boot_https_listen", "127.0.0.1:8443"),
    ("boot_https_url", "https://127.0.0.1:8443"),
    ("boot_tls_cert", "boot.crt"),
    ("boot_tls_key", "boot.key"),
    ("deploy_kernel", "ipa.kernel"),
    ("deploy_ramdisk", "ipa.initramfs"),
    ("deploy_kernel_by_arch", "aarch64:ipa-aarch64.kernel"),
    ("deploy_ramdisk_by_arch", "aarch64:ipa-aarch64.initramfs"),
    (
        "ipxe_bootfile_name_by_arch",
        "aarch64:snp-arm64.efi,x86_64-uefi:ipxe.efi",
    ),
    ("kernel_append_params", "console=ttyS1 nofb"),
    ("dhcp_hostsdir", "dhcp-hosts"),
    ("ipxe_dir", "/srv/ipxe"),
    ("ramdisk_image_download_source", "http"),
    ("image_download_source", "local"),
    ("image_cache_size", "512"),
    ("glance_valid_interfaces", "public"),
    ("glance_region_name", "RegionTwo"),
    ("oci_image_download_source", "http"),
    ("image_peer_delivery", "true"),
    ("oci_authentication_config", "/etc/ferric/oci-auth.json"),
    // The CA file is read at start: the jail holds this one.
    ("oci_verify_ca", "keystone-ca.pem"),
    ("dhcp_interface", "ferric0"),
    ("dhcp_range", "10.0.0.10,10.0.0.20,255.255.255.0"),
    ("dhcp_enable_ra", "true"),
    ("erase_devices_priority", "10"),
    ("erase_devices_metadata_priority", "0"),
    ("continue_if_disk_secure_erase_fails", "true"),
    ("enable_ata_secure_erase", "false"),
    ("enable_nvme_secure_erase", "false"),
    ("disk_erasure_concurrency", "2"),
    (
        "clean_step_priority_override",
        r#"["deploy.erase_devices:20"]"#,
    ),
    ("fast_track", "yes"),
    ("agent_heartbeat_timeout", "120"),
    ("agent_require_tls", "false"),
    ("agent_enable_bios_bootloader_install", "true"),
    ("deploy_logs_collect", "always"),
    // Only `local` exists (any case, as a name); a round trip needs another spelling.
    ("deploy_logs_storage_backend", "Local"),
    ("deploy_logs_local_path", "/srv/ferric/deploy-logs"),
    ("inspector_enabled", "1"),
    ("inspector_in_process", "off"),
    ("inspector_listen", "127.0.0.1:5051"),
    ("inspector_service_url", "http://127.0.0.1:5051"),
    ("inspector_callback_url", "http://127.0.0.1:5052"),
    ("inspector_add_ports", "all"),
    ("inspector_overwrite_existing", "true"),
    ("inspector_discovery", "true"),
    ("inspector_discovery_driver", "redfish"),
    ("inspector_timeout", "60"),
    ("switch_config_file", "switches.toml"),
    ("switch_drift_check_interval", "60"),
    ("switch_drift_repair", "true"),
    ("enabled_hardware_types", "fake-hardware,redfish"),
    ("enabled_bios_interfaces", "no-bios"),
    ("enabled_boot_interfaces", "ipxe,fake"),
    ("enabled_console_interfaces", "no-console,fake"),
    ("enabled_deploy_interfaces", "direct,fake"),
    ("autodetect_deploy_interfaces", "direct"),
    ("enabled_firmware_interfaces", "no-firmware"),
    ("enabled_inspect_interfaces", r#"["no-inspect", "agent"]"#),
    ("enabled_management_interfaces", "redfish,noop"),
    ("enabled_network_interfaces", "flat,noop"),
    ("enabled_power_interfaces", "redfish"),
    ("enabled_raid_interfaces", "no-raid"),
    ("enabled_rescue_interfaces", "no-rescue,fake"),
    ("enabled_storage_interfaces", "noop,fake"),
    ("enabled_vendor_interfaces", "no-vendor,fake"),
    ("default_bios_interface", "no-bios"),
    ("default_boot_interface", "ipxe"),
    ("default_console_interface", "no-console"),
    ("default_deploy_interface", "direct"),
    ("default_firmware_interface", "no-firmware"),
    ("default_inspect_interface", "no-inspect"),
    ("default_management_interface", "noop"),
    ("default_network_interface", "flat"),
    ("default_power_interface", "redfish"),
    ("default_raid_interface", "no-raid"),
    ("default_rescue_interface", "no-rescue"),
    ("default_storage_interface", "noop"),
    ("default_vendor_interface", "no-vendor"),
];

#[test]
fn every_setting_has_a_sample() {
    let mut sampled: Vec<&str> = SAMPLES.iter().map(|(key, _)| *key).collect();
    sampled.sort_unstable();
    let mut keys = Settings::KEYS.to_vec();
    keys.sort_unstable();
    assert_eq!(sampled, keys);
}

/// Each setting alone through `FERRIC_<NAME>`: it changes that setting and no other, and its
/// value written back in the environment's form reads as the same value.
#[test]
fn every_setting_round_trips_through_its_environment_variable() {
    figment::Jail::expect_with(|jail| {
        let defaults = serde_json::to_value(Settings::default()).unwrap();
        for (key, sample) in SAMPLES {
            jail.clear_env();
            let variable = env::variable(key);
            jail.set_env(&variable, sample);
            let settings = Settings::load(None, &SettingsOverrides::default())
                .map_err(|error| format!("{variable}={sample}: {error:#}"))?;
            let loaded = serde_json::to_value(&settings).unwrap();
            assert_ne!(
                loaded[key], defaults[key],
                "{variable}={sample} changed nothing"
            );
            for other in Settings::KEYS.iter().filter(|other| **other != key) {
                assert_eq!(loaded[other], defaults[other], "{variable} changed {other}");
            }
            let written = env::render(&loaded[key]);
            jail.set_env(&variable, &written);
            let again = Settings::load(None, &SettingsOverrides::default())
                .map_err(|error| format!("{variable}={written}: {error:#}"))?;
            assert_eq!(again, settings, "{variable}={written} did not read back");
        }
        Ok(())
    });
}

/// Every setting at once, through the environment only: the configuration passes every check
/// `ferric server` makes before it serves (the binary's own test starts it).
#[test]
fn all_settings_from_the_environment_pass_the_start_up_checks() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "htpasswd",
            "admin:$2y$05$abcdefghijklmnopqrstuu5E9K6TA2ZmXyWoaPOXA8Gg2TgUbb3Nu\n",
        )?;
        jail.create_file("users.toml", "[admin]\nroles = [\"admin\"]\n")?;
        // Read whatever the auth strategy: Ferric's Keystone credentials also reach Glance.
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .map_err(|error| error.to_string())?;
        jail.create_file("keystone-ca.pem", &certified.cert.pem())?;
        jail.create_file("keystone-password", "sample-password\n")?;
        jail.create_file("switches.toml", "[networks]\nprovisioning = 100\n")?;
        jail.create_file(
            "policy.toml",
            "\"baremetal:node:get\" = [\"system_reader\", \"owner_reader\"]\n",
        )?;
        for (key, sample) in SAMPLES {
            jail.set_env(env::variable(key), sample);
        }
        let settings = Settings::load(None, &SettingsOverrides::default())
            .map_err(|error| format!("{error:#}"))?;
        assert_eq!(settings.conductor_hostname, "1234");
        assert_eq!(settings.agent_verify_ca, "false");
        assert!(settings.fast_track);
        let (drivers, config) = settings.conductor().map_err(|error| format!("{error:#}"))?;
        assert_eq!(config.hostname, "1234");
        assert_eq!(config.conductor_group, "42");
        assert_eq!(
            drivers.settings().deploy.agent_verify_ca,
            ferric_drivers::AgentVerifyCa::Disabled
        );
        settings
            .api_config()
            .map_err(|error| format!("{error:#}"))?;
        settings
            .inspector_service()
            .map_err(|error| format!("{error:#}"))?;
        let dnsmasq = settings
            .dnsmasq()
            .map_err(|error| format!("{error:#}"))?
            .expect("dhcp_interface asks for dnsmasq");
        assert_eq!(dnsmasq.interface, "ferric0");
        Ok(())
    });
}

#[test]
fn bad_environment_values_name_the_variable() {
    figment::Jail::expect_with(|jail| {
        for (variable, value, needle) in [
            (
                "FERRIC_AUTOMATED_CLEAN",
                "maybe",
                "FERRIC_AUTOMATED_CLEAN is 'maybe': give true or false",
            ),
            (
                "FERRIC_CONDUCTOR_WORKERS",
                "-1",
                "FERRIC_CONDUCTOR_WORKERS is '-1': give a whole number",
            ),
            (
                "FERRIC_ENABLED_HARDWARE_TYPES",
                "[redfish",
                "FERRIC_ENABLED_HARDWARE_TYPES is '[redfish', which is not a JSON array",
            ),
        ] {
            jail.clear_env();
            jail.set_env(variable, value);
            let error = Settings::load(None, &SettingsOverrides::default())
                .expect_err(variable)
                .to_string();
            assert!(error.contains(needle), "{error}");
        }
        Ok(())
    });
}

/// A TOML file may write `agent_verify_ca` as a boolean, and an empty variable unsets an
/// optional setting the file set.
#[test]
fn verify_ca_takes_a_boolean_and_empty_variables_unset() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "ferric.toml",
            "agent_verify_ca = false\napi_url = \"http://10.0.0.1:6385\"\n",
        )?;
        let settings = Settings::load(
            Some(Path::new("ferric.toml")),
            &SettingsOverrides::default(),
        )
        .map_err(|error| format!("{error:#}"))?;
        assert_eq!(settings.agent_verify_ca, "false");
        assert_eq!(settings.api_url.as_deref(), Some("http://10.0.0.1:6385"));
        jail.set_env("FERRIC_API_URL", "");
        let settings = Settings::load(
            Some(Path::new("ferric.toml")),
            &SettingsOverrides::default(),
        )
        .map_err(|error| format!("{error:#}"))?;
        assert_eq!(settings.api_url, None);
        Ok(())
    });
}

#[test]
fn interface_settings_reach_the_drivers_and_are_checked() {
    figment::Jail::expect_with(|jail| {
        let settings = Settings::load(None, &SettingsOverrides::default())
            .map_err(|error| format!("{error:#}"))?;
        let (drivers, _) = settings.conductor().map_err(|error| format!("{error:#}"))?;
        assert_eq!(
            drivers.interfaces(),
            &ferric_drivers::InterfaceSettings::default()
        );

        jail.set_env("FERRIC_ENABLED_DEPLOY_INTERFACES", "direct,fake");
        jail.set_env("FERRIC_DEFAULT_DEPLOY_INTERFACE", "fake");
        let settings = Settings::load(None, &SettingsOverrides::default())
            .map_err(|error| format!("{error:#}"))?;
        let (drivers, _) = settings.conductor().map_err(|error| format!("{error:#}"))?;
        assert_eq!(
            drivers.interfaces().default_for(InterfaceKind::Deploy),
            Some("fake")
        );

        for (variable, value, needle) in [
            (
                "FERRIC_ENABLED_DEPLOY_INTERFACES",
                "direkt",
                "enabled_deploy_interfaces names 'direkt'",
            ),
            (
                "FERRIC_ENABLED_POWER_INTERFACES",
                "redfish",
                "has no enabled power interface",
            ),
            (
                "FERRIC_DEFAULT_BOOT_INTERFACE",
                "fake",
                "default_boot_interface is 'fake', which is not in enabled_boot_interfaces",
            ),
        ] {
            jail.clear_env();
            jail.set_env(variable, value);
            let settings = Settings::load(None, &SettingsOverrides::default())
                .map_err(|error| format!("{error:#}"))?;
            let error = format!("{:#}", settings.conductor().expect_err(variable));
            assert!(error.contains(needle), "{variable}: {error}");
        }
        Ok(())
    });
}
