//! The `redfish-https` boot interface against a small in-process BMC that records the PATCH
//! bodies it receives: the ISO's HTTPS URL goes out as `HttpBootUri` with `UefiHttp`, in one
//! PATCH, and a later boot device change clears it; validate refuses as Ironic does.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use ferric_model::ProvisionState;
use serde_json::{Value, json};
use uuid::Uuid;

use super::*;
use crate::bmc::BmcSettings;
use crate::bmc_state::BmcState;
use crate::interfaces::ManagementInterface;

/// The BMC's ComputerSystem and every PATCH body it was sent.
struct Bmc {
    system: Mutex<Value>,
    patches: Mutex<Vec<Value>>,
}

async fn serve(system: Value) -> (String, Arc<Bmc>) {
    let bmc = Arc::new(Bmc {
        system: Mutex::new(system),
        patches: Mutex::new(Vec::new()),
    });
    let router = Router::new()
        .route(
            "/redfish/v1/",
            get(|| async { axum::Json(json!({"Systems": {"@odata.id": "/redfish/v1/Systems"}})) }),
        )
        .route(
            "/redfish/v1/Systems/1",
            get(|State(bmc): State<Arc<Bmc>>| async move {
                axum::Json(bmc.system.lock().unwrap().clone())
            })
            .patch(
                |State(bmc): State<Arc<Bmc>>, axum::Json(body): axum::Json<Value>| async move {
                    if let Some(uri) = body.pointer("/Boot/HttpBootUri") {
                        bmc.system.lock().unwrap()["Boot"]["HttpBootUri"] = uri.clone();
                    }
                    bmc.patches.lock().unwrap().push(body);
                    StatusCode::NO_CONTENT
                },
            ),
        )
        .with_state(bmc.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (address, bmc)
}

/// A UEFI system with UEFI HTTP boot and an empty `HttpBootUri`.
fn uefi_http_system() -> Value {
    json!({
        "PowerState": "Off",
        "Boot": {
            "BootSourceOverrideTarget": "None",
            "BootSourceOverrideTarget@Redfish.AllowableValues": ["Pxe", "Hdd", "Cd", "UefiHttp"],
            "BootSourceOverrideEnabled": "Disabled",
            "BootSourceOverrideMode": "UEFI",
            "HttpBootUri": null,
        },
    })
}

fn redfish() -> Redfish {
    Redfish {
        state: Arc::new(BmcState::new(BmcSettings::default())),
    }
}

fn node(address: &str, driver_info: Value) -> Node {
    let mut node = Node::new(Uuid::new_v4(), "redfish", ProvisionState::Deploying);
    let mut info = json!({
        "redfish_address": address, "redfish_system_id": "/redfish/v1/Systems/1",
        "redfish_username": "admin", "redfish_password": "password",
        "redfish_auth_type": "basic",
    });
    info.as_object_mut()
        .unwrap()
        .extend(driver_info.as_object().unwrap().clone());
    node.driver_info = info.as_object().unwrap().clone();
    node
}

/// A boot file root holding `isos/given.iso`, served at :8080 and over HTTPS at :8443.
fn settings(root: &std::path::Path) -> BootSettings {
    std::fs::create_dir_all(root.join("isos")).unwrap();
    std::fs::write(root.join("isos/given.iso"), b"iso").unwrap();
    BootSettings {
        http_root: root.to_owned(),
        http_url: Some("http://10.0.0.1:8080".to_owned()),
        https_url: Some("https://10.0.0.1:8443/".to_owned()),
        api_url: Some("http://10.0.0.1:6385".to_owned()),
        ..BootSettings::default()
    }
}

#[tokio::test]
async fn the_iso_url_goes_out_as_http_boot_uri_with_uefi_http_in_one_patch() {
    let (address, bmc) = serve(uefi_http_system()).await;
    let root = tempfile::tempdir().unwrap();
    let boot = RedfishHttpsBoot::new(redfish(), settings(root.path()), &[]);
    let mut node = node(&address, json!({"deploy_iso": "isos/given.iso"}));
    boot.validate(&node).await.unwrap();
    boot.prepare_ramdisk(&mut node).await.unwrap();
    let url = "https://10.0.0.1:8443/isos/given.iso";
    assert_eq!(node.driver_internal_info[HTTP_BOOT_URL_KEY], url);
    assert!(
        bmc.patches.lock().unwrap().is_empty(),
        "no PATCH before the boot device is set"
    );

    let device = boot.network_boot_device();
    assert_eq!(device, BootDevice::Uefihttp);
    redfish()
        .set_boot_device(&mut node, device, false)
        .await
        .unwrap();
    assert!(!node.driver_internal_info.contains_key(HTTP_BOOT_URL_KEY));
    assert_eq!(
        bmc.patches.lock().unwrap().as_slice(),
        [json!({"Boot": {
            "BootSourceOverrideTarget": "UefiHttp",
            "BootSourceOverrideEnabled": "Once",
            "BootSourceOverrideMode": "UEFI",
            "HttpBootUri": url,
        }})]
    );

    // Booting the disk afterwards clears the URL the BMC holds, as sushy does.
    redfish()
        .set_boot_device(&mut node, BootDevice::Disk, true)
        .await
        .unwrap();
    assert_eq!(
        bmc.patches.lock().unwrap()[1],
        json!({"Boot": {
            "BootSourceOverrideTarget": "Hdd",
            "BootSourceOverrideEnabled": "Continuous",
            "BootSourceOverrideMode": "UEFI",
            "HttpBootUri": null,
        }})
    );
    // With nothing set, nothing is cleared.
    redfish()
        .set_boot_device(&mut node, BootDevice::Pxe, false)
        .await
        .unwrap();
    assert!(
        bmc.patches.lock().unwrap()[2]["Boot"]
            .get("HttpBootUri")
            .is_none()
    );
}

#[tokio::test]
async fn an_origin_url_handed_on_needs_no_https_listener() {
    let (address, bmc) = serve(uefi_http_system()).await;
    let root = tempfile::tempdir().unwrap();
    let settings = BootSettings {
        https_url: None,
        ramdisk_image_download_source: DownloadSource::Http,
        ..settings(root.path())
    };
    let boot = RedfishHttpsBoot::new(redfish(), settings, &[]);
    let origin = "https://images.example.com/deploy.iso";
    let mut node = node(&address, json!({"deploy_iso": origin}));
    boot.validate(&node).await.unwrap();
    boot.prepare_ramdisk(&mut node).await.unwrap();
    redfish()
        .set_boot_device(&mut node, BootDevice::Uefihttp, false)
        .await
        .unwrap();
    assert_eq!(
        bmc.patches.lock().unwrap()[0]["Boot"]["HttpBootUri"],
        origin
    );
}

#[tokio::test]
async fn validate_refuses_what_cannot_boot_this_way() {
    let root = tempfile::tempdir().unwrap();
    let given = json!({"deploy_iso": "isos/given.iso"});

    // The BMC lists no UefiHttp: Ironic's message.
    let mut system = uefi_http_system();
    system["Boot"]["BootSourceOverrideTarget@Redfish.AllowableValues"] = json!(["Pxe", "Hdd"]);
    let (address, _) = serve(system).await;
    let boot = RedfishHttpsBoot::new(redfish(), settings(root.path()), &[]);
    let node_ = node(&address, given.clone());
    let error = boot.validate(&node_).await.unwrap_err().to_string();
    assert!(
        error.contains(&format!(
            "Node {} hardware does not support feature UefiHttp boot, which is required based \
             upon the requested configuration.",
            node_.uuid
        )) && error.starts_with("Boot interface redfish-https: "),
        "{error}"
    );

    // No HttpBootUri property to set.
    let mut system = uefi_http_system();
    system["Boot"]
        .as_object_mut()
        .unwrap()
        .remove("HttpBootUri");
    let (address, _) = serve(system).await;
    let error = boot
        .validate(&node(&address, given.clone()))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("no HttpBootUri"), "{error}");

    // BIOS mode, no HTTPS listener, a missing ISO.
    let (address, _) = serve(uefi_http_system()).await;
    let mut bios = node(&address, given.clone());
    bios.boot_mode = Some("bios".to_owned());
    let error = boot.validate(&bios).await.unwrap_err().to_string();
    assert!(error.contains("needs boot mode uefi"), "{error}");
    let unconfigured = RedfishHttpsBoot::new(
        redfish(),
        BootSettings {
            https_url: None,
            ..settings(root.path())
        },
        &[],
    );
    let error = unconfigured
        .validate(&node(&address, given))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("boot_https_listen"), "{error}");
    let error = boot
        .validate(&node(&address, json!({"deploy_iso": "isos/none.iso"})))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("does not exist"), "{error}");
}
