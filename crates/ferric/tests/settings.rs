//! Safe settings on the real binary (issue 21): every setting given through its `FERRIC_*`
//! variable starts the server, fake interfaces on a BMC hardware type are refused until the
//! site enables them, and a second conductor under a live conductor's name does not start.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::Path;

use common::Server;
use serde_json::{Value, json};

/// Every setting, as its environment variable, in values `ferric server` starts with on one
/// host without privileges: the two that would start dnsmasq on a real interface are given
/// empty (unset), TLS gets a fresh self-signed pair.
fn every_setting(dir: &Path) -> Vec<(String, String)> {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.join("api.crt"), certified.cert.pem()).unwrap();
    std::fs::write(dir.join("api.key"), certified.key_pair.serialize_pem()).unwrap();
    // Read whatever the auth strategy: Ferric's Keystone credentials also reach Glance.
    std::fs::write(dir.join("keystone-ca.pem"), certified.cert.pem()).unwrap();
    std::fs::write(dir.join("keystone-password"), "sample-password\n").unwrap();
    std::fs::write(dir.join("oci-auth.json"), r#"{"auths": {}}"#).unwrap();
    let hash = bcrypt::hash("secret", 4).unwrap();
    std::fs::write(dir.join("htpasswd"), format!("admin:{hash}\n")).unwrap();
    std::fs::write(dir.join("users.toml"), "[admin]\nroles = [\"admin\"]\n").unwrap();
    std::fs::write(
        dir.join("switches.toml"),
        "[networks]\nprovisioning = 100\n\n[ssh]\nstate_dir = \"switch-state\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.toml"),
        "\"baremetal:node:get\" = [\"system_reader\", \"owner_reader\"]\n",
    )
    .unwrap();
    [
        ("DATABASE_URL", "every-setting.db"),
        ("SQLITE_FULL_SYNC", "true"),
        ("API_LISTEN", "127.0.0.1:0"),
        ("LOG_FORMAT", "json"),
        ("LOG_LEVEL", "info,ferric_db=warn"),
        ("ROLE", "all"),
        ("CONDUCTOR_HOSTNAME", "1234"),
        ("CONDUCTOR_GROUP", "42"),
        ("CONDUCTOR_WORKERS", "17"),
        ("AUTOMATED_CLEAN", "false"),
        ("SYNC_POWER_STATE_INTERVAL", "0"),
        ("POWER_STATE_SYNC_MAX_RETRIES", "5"),
        ("POWER_SYNC_WORKERS", "8"),
        ("POWER_SYNC_MAX_PER_BMC", "3"),
        ("POWER_SYNC_TIMEOUT", "20"),
        ("CHECK_PROVISION_STATE_INTERVAL", "5"),
        ("DEPLOY_CALLBACK_TIMEOUT", "0"),
        ("CLEAN_CALLBACK_TIMEOUT", "600"),
        ("INSPECT_WAIT_TIMEOUT", "700"),
        ("RESCUE_CALLBACK_TIMEOUT", "800"),
        ("SERVICE_CALLBACK_TIMEOUT", "900"),
        ("POWER_STATE_CHANGE_TIMEOUT", "30"),
        ("NODE_LEASE_TIMEOUT", "10"),
        ("PIN_HANDOFF_VERSION", "2"),
        ("CONDUCTOR_HEARTBEAT_INTERVAL", "2"),
        ("CONDUCTOR_HEARTBEAT_TIMEOUT", "7"),
        ("CONDUCTOR_REQUEST_TIMEOUT", "9"),
        ("CONSOLE_TAIL_SIZE", "4096"),
        ("CONSOLE_BIND_ADDRESS", "127.0.0.2"),
        ("CONSOLE_PORT_RANGE", "12000:12010"),
        ("BMC_CONNECT_TIMEOUT", "4"),
        ("BMC_READ_TIMEOUT", "11"),
        ("BMC_RETRIES", "0"),
        ("BMC_MAX_REQUESTS", "2"),
        ("AUTH_STRATEGY", "http_basic"),
        ("HTTP_BASIC_AUTH_USER_FILE", "htpasswd"),
        ("API_MAX_BODY_SIZE", "2097152"),
        ("API_RENDER_CACHE_SIZE", "1048576"),
        ("API_RENDER_CACHE_IDLE", "30"),
        ("AUTH_USERS_FILE", "users.toml"),
        ("AUTH_POLICY_FILE", "policy.toml"),
        // Read only with auth_strategy = keystone (crates/ferric/tests/keystone.rs).
        ("KEYSTONE_AUTH_URL", "http://127.0.0.1:5000/v3"),
        ("KEYSTONE_USERNAME", "baremetal"),
        ("KEYSTONE_PASSWORD", "sample-password"),
        ("KEYSTONE_PASSWORD_FILE", "keystone-password"),
        ("KEYSTONE_PROJECT_NAME", "services"),
        ("KEYSTONE_USER_DOMAIN_NAME", "users"),
        ("KEYSTONE_PROJECT_DOMAIN_NAME", "projects"),
        ("KEYSTONE_REGION_NAME", "RegionTwo"),
        ("KEYSTONE_INTERFACE", "public"),
        ("KEYSTONE_CAFILE", "keystone-ca.pem"),
        ("KEYSTONE_TIMEOUT", "3"),
        ("KEYSTONE_TOKEN_CACHE_SIZE", "100"),
        ("KEYSTONE_TOKEN_CACHE_TIME", "60"),
        ("SEND_POWER_NOTIFICATIONS", "false"),
        ("NOVA_INTERFACE", "public"),
        ("NOVA_REGION_NAME", "RegionTwo"),
        ("API_TLS_CERT", "api.crt"),
        ("API_TLS_KEY", "api.key"),
        ("AGENT_VERIFY_CA", "false"),
        ("API_URL", "http://127.0.0.1:6385"),
        ("BOOT_HTTP_LISTEN", "127.0.0.1:0"),
        ("BOOT_HTTP_URL", "http://127.0.0.1:8080"),
        ("BOOT_HTTP_ROOT", "boot-root"),
        ("BOOT_HTTPS_LISTEN", "127.0.0.1:0"),
        ("BOOT_HTTPS_URL", "https://127.0.0.1:8443"),
        ("BOOT_TLS_CERT", "api.crt"),
        ("BOOT_TLS_KEY", "api.key"),
        ("IPXE_DIR", "ipxe-loaders"),
        ("RAMDISK_IMAGE_DOWNLOAD_SOURCE", "http"),
        ("IMAGE_DOWNLOAD_SOURCE", "local"),
        ("IMAGE_CACHE_SIZE", "512"),
        ("GLANCE_VALID_INTERFACES", "public"),
        ("GLANCE_REGION_NAME", "RegionTwo"),
        ("OCI_IMAGE_DOWNLOAD_SOURCE", "http"),
        ("IMAGE_PEER_DELIVERY", "true"),
        ("OCI_AUTHENTICATION_CONFIG", "oci-auth.json"),
        ("OCI_VERIFY_CA", "keystone-ca.pem"),
        ("DEPLOY_KERNEL", "ipa.kernel"),
        ("DEPLOY_RAMDISK", "ipa.initramfs"),
        ("DEPLOY_KERNEL_BY_ARCH", "aarch64:ipa-aarch64.kernel"),
        ("DEPLOY_RAMDISK_BY_ARCH", "aarch64:ipa-aarch64.initramfs"),
        ("IPXE_BOOTFILE_NAME_BY_ARCH", "aarch64:snp-arm64.efi"),
        ("KERNEL_APPEND_PARAMS", "console=ttyS1 nofb"),
        ("DHCP_HOSTSDIR", "dhcp-hosts"),
        ("DHCP_INTERFACE", ""),
        ("DHCP_RANGE", ""),
        ("DHCP_ENABLE_RA", "true"),
        ("ERASE_DEVICES_PRIORITY", "10"),
        ("ERASE_DEVICES_METADATA_PRIORITY", "0"),
        ("CONTINUE_IF_DISK_SECURE_ERASE_FAILS", "true"),
        ("ENABLE_ATA_SECURE_ERASE", "false"),
        ("ENABLE_NVME_SECURE_ERASE", "false"),
        ("DISK_ERASURE_CONCURRENCY", "2"),
        (
            "CLEAN_STEP_PRIORITY_OVERRIDE",
            "deploy.erase_devices:20,deploy.erase_devices_metadata:0",
        ),
        ("FAST_TRACK", "yes"),
        ("AGENT_HEARTBEAT_TIMEOUT", "120"),
        ("AGENT_REQUIRE_TLS", "true"),
        ("AGENT_ENABLE_BIOS_BOOTLOADER_INSTALL", "false"),
        ("TLS_MIN_VERSION", "1.2"),
        (
            "TLS_CIPHER_SUITES",
            "TLS13_AES_256_GCM_SHA384,TLS13_AES_128_GCM_SHA256",
        ),
        ("ENABLE_RAMDISK_ENDPOINTS", "false"),
        ("RAMDISK_LISTEN", "127.0.0.1:0"),
        ("DEPLOY_LOGS_COLLECT", "always"),
        ("DEPLOY_LOGS_STORAGE_BACKEND", "local"),
        ("DEPLOY_LOGS_LOCAL_PATH", "deploy-logs"),
        ("INSPECTOR_ENABLED", "1"),
        ("INSPECTOR_IN_PROCESS", "on"),
        ("INSPECTOR_LISTEN", "127.0.0.1:0"),
        ("INSPECTOR_SERVICE_URL", "http://127.0.0.1:5051"),
        ("INSPECTOR_CALLBACK_URL", "http://127.0.0.1:5052"),
        ("INSPECTOR_ADD_PORTS", "all"),
        ("INSPECTOR_OVERWRITE_EXISTING", "true"),
        ("INSPECTOR_DISCOVERY", "true"),
        ("INSPECTOR_DISCOVERY_DRIVER", "redfish"),
        ("INSPECTOR_TIMEOUT", "60"),
        ("SWITCH_CONFIG_FILE", "switches.toml"),
        ("SWITCH_DRIFT_CHECK_INTERVAL", "60"),
        ("SWITCH_DRIFT_REPAIR", "true"),
        ("ENABLED_HARDWARE_TYPES", "fake-hardware,redfish"),
        ("ENABLED_BIOS_INTERFACES", "no-bios"),
        ("ENABLED_BOOT_INTERFACES", "ipxe,fake"),
        ("ENABLED_CONSOLE_INTERFACES", "no-console,fake"),
        ("ENABLED_DEPLOY_INTERFACES", "direct,fake"),
        ("AUTODETECT_DEPLOY_INTERFACES", "direct"),
        ("ENABLED_FIRMWARE_INTERFACES", "no-firmware"),
        ("ENABLED_INSPECT_INTERFACES", r#"["no-inspect", "agent"]"#),
        ("ENABLED_MANAGEMENT_INTERFACES", "redfish,noop"),
        ("ENABLED_NETWORK_INTERFACES", "flat,noop"),
        ("ENABLED_POWER_INTERFACES", "redfish"),
        ("ENABLED_RAID_INTERFACES", "no-raid"),
        ("ENABLED_RESCUE_INTERFACES", "no-rescue,fake"),
        ("ENABLED_STORAGE_INTERFACES", "noop,fake"),
        ("ENABLED_VENDOR_INTERFACES", "no-vendor,fake"),
        ("DEFAULT_BIOS_INTERFACE", "no-bios"),
        ("DEFAULT_BOOT_INTERFACE", "ipxe"),
        ("DEFAULT_CONSOLE_INTERFACE", "no-console"),
        ("DEFAULT_DEPLOY_INTERFACE", "direct"),
        ("DEFAULT_FIRMWARE_INTERFACE", "no-firmware"),
        ("DEFAULT_INSPECT_INTERFACE", "no-inspect"),
        ("DEFAULT_MANAGEMENT_INTERFACE", ""),
        ("DEFAULT_NETWORK_INTERFACE", "flat"),
        ("DEFAULT_POWER_INTERFACE", ""),
        ("DEFAULT_RAID_INTERFACE", "no-raid"),
        ("DEFAULT_RESCUE_INTERFACE", "no-rescue"),
        ("DEFAULT_STORAGE_INTERFACE", "noop"),
        ("DEFAULT_VENDOR_INTERFACE", "no-vendor"),
    ]
    .into_iter()
    .map(|(name, value)| (format!("FERRIC_{name}"), value.to_owned()))
    .collect()
}

/// The variables `docs/configuration.md` documents (it is generated from the settings, and a
/// test keeps it fresh): the list above must name every one.
fn documented_variables() -> Vec<String> {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
    )
    .unwrap();
    let mut names: Vec<String> = page
        .lines()
        .filter(|line| line.starts_with("| [`"))
        .filter_map(|line| line.split('`').find(|cell| cell.starts_with("FERRIC_")))
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

#[test]
fn every_setting_set_through_its_environment_variable_starts_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let env = every_setting(dir.path());
    let mut named: Vec<String> = env.iter().map(|(name, _)| name.clone()).collect();
    named.sort();
    assert_eq!(named, documented_variables());

    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let mut server = Server::start_with_env(dir.path(), &[], &env);
    assert!(dir.path().join("every-setting.db").is_file());
    assert!(
        server.inspector_address.is_some(),
        "inspection service runs"
    );
    // HTTPS with basic authentication, as set: the conductor is known by its numeric name.
    let http = reqwest::blocking::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let conductors: Value = http
        .get(format!("https://{}/v1/conductors", server.address))
        .header("X-OpenStack-Ironic-API-Version", "1.49")
        .basic_auth("admin", Some("secret"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        conductors["conductors"][0]["hostname"], "1234",
        "{conductors}"
    );
    assert_eq!(conductors["conductors"][0]["conductor_group"], "42");
    assert!(server.terminate());
}

fn create_node(server: &Server, body: Value) -> reqwest::blocking::Response {
    reqwest::blocking::Client::new()
        .post(server.url("/v1/nodes"))
        .header("X-OpenStack-Ironic-API-Version", "1.31")
        .json(&body)
        .send()
        .unwrap()
}

fn faultstring(response: reqwest::blocking::Response) -> String {
    let body: Value = response.json().unwrap();
    let inner: Value = serde_json::from_str(body["error_message"].as_str().unwrap()).unwrap();
    inner["faultstring"].as_str().unwrap().to_owned()
}

const REDFISH_INFO: &str = "http://127.0.0.1:9/redfish/v1/Systems/1";

#[test]
fn fake_interfaces_on_a_bmc_type_are_refused_until_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let redfish_fake = |interface: &str| {
        json!({
            "driver": "redfish",
            "driver_info": {"redfish_address": REDFISH_INFO},
            interface: "fake",
        })
    };
    for interface in ["deploy_interface", "boot_interface"] {
        let response = create_node(&server, redfish_fake(interface));
        assert_eq!(response.status(), 400, "{interface}");
        let message = faultstring(response);
        let kind = interface.trim_end_matches("_interface");
        assert!(
            message.starts_with(&format!(
                "Could not find the following interface in the \
                 'ironic.hardware.interfaces.{kind}' entrypoint: fake."
            )) && message.contains(&format!("enabled_{kind}_interfaces")),
            "{message}"
        );
    }
    // Named nothing, a redfish node gets real interfaces; fake-hardware keeps its fakes (the
    // quick start).
    let created = create_node(&server, json!({"driver": "redfish"}));
    assert_eq!(created.status(), 201);
    let node: Value = created.json().unwrap();
    assert_eq!(node["deploy_interface"], "direct");
    assert_eq!(node["boot_interface"], "ipxe");
    let created = create_node(&server, json!({"driver": "fake-hardware"}));
    assert_eq!(created.status(), 201);
    let node: Value = created.json().unwrap();
    assert_eq!(node["deploy_interface"], "fake");
    assert_eq!(node["boot_interface"], "fake");
    // The driver listing shows what this site allows.
    let redfish: Value = reqwest::blocking::Client::new()
        .get(server.url("/v1/drivers/redfish"))
        .header("X-OpenStack-Ironic-API-Version", "1.30")
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        redfish["enabled_deploy_interfaces"],
        json!(["direct", "ramdisk", "custom-agent", "autodetect"])
    );
    assert_eq!(redfish["default_deploy_interface"], "direct");
    assert!(server.terminate());

    // Enabled in the settings, the same request is accepted.
    let mut server = Server::start_with_env(
        dir.path(),
        &[],
        &[
            ("FERRIC_ENABLED_DEPLOY_INTERFACES", "direct,fake"),
            ("FERRIC_ENABLED_BOOT_INTERFACES", "ipxe,pxe,fake"),
        ],
    );
    for interface in ["deploy_interface", "boot_interface"] {
        let created = create_node(&server, redfish_fake(interface));
        assert_eq!(created.status(), 201, "{interface}");
        let node: Value = created.json().unwrap();
        assert_eq!(node[interface], "fake");
    }
    assert!(server.terminate());
}
