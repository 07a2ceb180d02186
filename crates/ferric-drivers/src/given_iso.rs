//! A deploy or rescue ISO the node brings (`driver_info.deploy_iso`, `rescue_iso`; Ironic's
//! names, with its deprecated `redfish_` prefix read too): the `redfish-virtual-media` boot
//! interface boots it as given instead of building one from the agent kernel and ramdisk.
//! Metal3's baremetal-operator sends one per host (its image-customization controller bakes
//! the API's address and the host's network configuration into it), so nothing is injected:
//! as in Ironic, a given ISO carries its own configuration.
//!
//! With `ramdisk_image_download_source = "local"` (the default, as in Ironic) the conductor
//! downloads the ISO into `<boot_http_root>/vmedia/` and hands the BMC its own URL, so BMCs
//! never need to reach the image's origin; a copy is reused while the origin answers
//! `304 Not Modified` to its `Last-Modified`. With `"http"` an http(s) URL goes to the BMC
//! unchanged. A name without a scheme is a file under the boot file server's root.
//! Architecture invariant: a failed download leaves no partial file under the name the BMC
//! is given (the body goes to a `.part` file, renamed when complete).

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferric_model::ProvisionState;
use ferric_model::resources::Node;
use serde_json::Value;

use crate::settings::{BootSettings, DownloadSource};
use crate::{Component, DriverError};

/// The directory under the boot file server's root (shared with the ISOs Ferric builds).
const ISO_DIR: &str = "vmedia";

/// The `driver_info` key of the ISO the node's current phase boots: `rescue_iso` while it is
/// being rescued, else `deploy_iso`.
pub fn key(node: &Node) -> &'static str {
    match node.provision_state {
        ProvisionState::Rescuing | ProvisionState::RescueWait => "rescue_iso",
        _ => "deploy_iso",
    }
}

/// The ISO the node brings for its current phase, if any.
pub fn given(node: &Node) -> Option<&str> {
    let key = key(node);
    [key.to_owned(), format!("redfish_{key}")]
        .iter()
        .find_map(|name| node.driver_info.get(name).and_then(Value::as_str))
        .map(str::trim)
        .filter(|iso| !iso.is_empty())
}

/// What the ISO reference is.
enum Source<'a> {
    Url(&'a str),
    File(&'a str),
}

fn source<'a>(node: &Node, iso: &'a str) -> Result<Source<'a>, DriverError> {
    let key = key(node);
    if iso.starts_with("http://") || iso.starts_with("https://") {
        return Ok(Source::Url(iso));
    }
    let relative = iso.trim_start_matches('/');
    let local = !iso.contains("://")
        && !relative.is_empty()
        && relative
            .split('/')
            .all(|part| !part.is_empty() && part != "..");
    if local {
        return Ok(Source::File(relative));
    }
    Err(DriverError::invalid(
        format!("driver_info.{key}"),
        format!(
            "Node {}: {key} {iso:?} is neither an http(s) URL nor a file under the boot file \
             server's root; Ferric cannot fetch it (Glance image IDs are not supported yet).",
            node.uuid
        ),
    ))
}

/// Checks the reference without fetching it: its form, and a local file's existence.
pub fn check(settings: &BootSettings, node: &Node, iso: &str) -> Result<(), DriverError> {
    if let Source::File(relative) = source(node, iso)? {
        let path = settings.http_root.join(relative);
        if !path.is_file() {
            let key = key(node);
            return Err(DriverError::invalid(
                format!("driver_info.{key}"),
                format!(
                    "Node {}: {key} {} does not exist on this conductor's boot file server.",
                    node.uuid,
                    path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Where the node's downloaded copy lives.
pub fn local_path(settings: &BootSettings, node: &Node) -> PathBuf {
    settings
        .http_root
        .join(ISO_DIR)
        .join(format!("{}-given.iso", node.uuid))
}

/// Makes the ISO fetchable by the BMC and returns the URL to insert.
pub async fn publish(
    settings: &BootSettings,
    node: &Node,
    iso: &str,
) -> Result<String, DriverError> {
    let http_url = || {
        settings.http_url.as_deref().ok_or_else(|| {
            DriverError::missing(
                "settings.boot_http_url",
                "Virtual media boot is not configured: set boot_http_url (the URL BMCs fetch \
                 ISOs from) in Ferric's settings."
                    .to_owned(),
            )
        })
    };
    match source(node, iso)? {
        Source::File(relative) => {
            check(settings, node, iso)?;
            crate::settings::boot_file_url(http_url()?, relative)
        }
        Source::Url(url) if settings.ramdisk_image_download_source == DownloadSource::Http => {
            Ok(url.to_owned())
        }
        Source::Url(url) => {
            let base = http_url()?.trim_end_matches('/').to_owned();
            let path = local_path(settings, node);
            download(node, url, &path).await?;
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or_default();
            Ok(format!("{base}/{ISO_DIR}/{name}"))
        }
    }
}

/// Removes the node's downloaded copy (nothing to do when there is none).
pub fn remove(settings: &BootSettings, node: &Node) -> Result<(), DriverError> {
    let path = local_path(settings, node);
    for file in [path.clone(), with_suffix(&path, "modified")] {
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(DriverError::failed(
                    Component::Conductor,
                    format!("Could not remove {}: {error}", file.display()),
                ));
            }
        }
    }
    Ok(())
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// Fetches `url` into `path`, unless the copy there is still current.
async fn download(node: &Node, url: &str, path: &Path) -> Result<(), DriverError> {
    let key = key(node);
    let failed = |reason: String| {
        DriverError::failed(
            Component::Conductor,
            format!(
                "Node {}: could not fetch its {key} {url}: {reason}",
                node.uuid
            ),
        )
    };
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(60))
        .build()
        .map_err(|error| failed(error.to_string()))?;
    let modified_file = with_suffix(path, "modified");
    let mut request = client.get(url);
    if path.is_file()
        && let Ok(stamp) = std::fs::read_to_string(&modified_file)
        && let Some((stamped_url, modified)) = stamp.split_once('\n')
        && stamped_url == url
    {
        request = request.header(reqwest::header::IF_MODIFIED_SINCE, modified.trim());
    }
    let mut response = request
        .send()
        .await
        .map_err(|error| failed(describe(&error)))?;
    if response.status() == reqwest::StatusCode::NOT_MODIFIED {
        return Ok(());
    }
    if !response.status().is_success() {
        return Err(failed(format!("the server answered {}", response.status())));
    }
    let modified = response
        .headers()
        .get(reqwest::header::LAST_MODIFIED)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|error| failed(format!("{}: {error}", dir.display())))?;
    let part = with_suffix(path, "part");
    let mut file = tokio::fs::File::create(&part)
        .await
        .map_err(|error| failed(format!("{}: {error}", part.display())))?;
    let written = async {
        use tokio::io::AsyncWriteExt;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| failed(describe(&error)))?
        {
            file.write_all(&chunk)
                .await
                .map_err(|error| failed(format!("{}: {error}", part.display())))?;
        }
        file.flush()
            .await
            .map_err(|error| failed(format!("{}: {error}", part.display())))
    }
    .await;
    if let Err(error) = written {
        let _ = std::fs::remove_file(&part);
        return Err(error);
    }
    std::fs::rename(&part, path).map_err(|error| failed(format!("{}: {error}", path.display())))?;
    match modified {
        Some(modified) => {
            let _ = std::fs::write(&modified_file, format!("{url}\n{modified}"));
        }
        None => {
            let _ = std::fs::remove_file(&modified_file);
        }
    }
    Ok(())
}

/// A reqwest error with its causes.
fn describe(error: &reqwest::Error) -> String {
    crate::agent_client::error_chain(error).join(": ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn node(driver_info: Value, state: ProvisionState) -> Node {
        let mut node = Node::new(Uuid::nil(), "redfish", state);
        node.driver_info = serde_json::from_value(driver_info).unwrap();
        node
    }

    #[test]
    fn the_phase_picks_deploy_or_rescue_and_the_old_prefix_is_read() {
        let info = json!({"deploy_iso": "http://x/d.iso", "redfish_rescue_iso": "r.iso"});
        assert_eq!(
            given(&node(info.clone(), ProvisionState::Deploying)),
            Some("http://x/d.iso")
        );
        assert_eq!(given(&node(info, ProvisionState::Rescuing)), Some("r.iso"));
        assert_eq!(
            given(&node(json!({"deploy_iso": " "}), ProvisionState::Cleaning)),
            None
        );
    }

    #[test]
    fn references_are_urls_or_files_under_the_root() {
        let settings = BootSettings {
            http_root: tempfile::tempdir().unwrap().keep(),
            ..BootSettings::default()
        };
        let any = node(json!({}), ProvisionState::Deploying);
        check(&settings, &any, "http://x/d.iso").unwrap();
        for bad in ["ftp://x/d.iso", "../etc/passwd", "a//b.iso", "glance://abc"] {
            let error = check(&settings, &any, bad).unwrap_err().to_string();
            assert!(error.contains("deploy_iso"), "{bad}: {error}");
        }
        let missing = check(&settings, &any, "isos/d.iso")
            .unwrap_err()
            .to_string();
        assert!(missing.contains("does not exist"), "{missing}");
        std::fs::create_dir_all(settings.http_root.join("isos")).unwrap();
        std::fs::write(settings.http_root.join("isos/d.iso"), b"iso").unwrap();
        check(&settings, &any, "isos/d.iso").unwrap();
    }

    /// An origin serving one ISO with a `Last-Modified`, answering `304` to a matching
    /// `If-Modified-Since`; counts full answers.
    async fn origin() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use axum::http::{HeaderMap, StatusCode, header};
        use std::sync::atomic::{AtomicUsize, Ordering};
        const STAMP: &str = "Wed, 21 Oct 2026 07:28:00 GMT";
        let full = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = full.clone();
        let app = axum::Router::new().route(
            "/live.iso",
            axum::routing::get(move |headers: HeaderMap| {
                let counted = counted.clone();
                async move {
                    if headers
                        .get(header::IF_MODIFIED_SINCE)
                        .and_then(|v| v.to_str().ok())
                        == Some(STAMP)
                    {
                        return (
                            StatusCode::NOT_MODIFIED,
                            [(header::LAST_MODIFIED, STAMP)],
                            vec![],
                        );
                    }
                    counted.fetch_add(1, Ordering::SeqCst);
                    (
                        StatusCode::OK,
                        [(header::LAST_MODIFIED, STAMP)],
                        vec![7u8; 100_000],
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{address}"), full)
    }

    #[tokio::test]
    async fn a_url_is_downloaded_once_served_locally_and_removed() {
        let (origin, full) = origin().await;
        let root = tempfile::tempdir().unwrap();
        let settings = BootSettings {
            http_root: root.path().to_owned(),
            http_url: Some("http://10.0.0.1:8080/".to_owned()),
            ..BootSettings::default()
        };
        let iso = format!("{origin}/live.iso");
        let node = node(json!({"deploy_iso": iso}), ProvisionState::Deploying);
        let url = publish(&settings, &node, &iso).await.unwrap();
        assert_eq!(
            url,
            format!("http://10.0.0.1:8080/vmedia/{}-given.iso", node.uuid)
        );
        let path = local_path(&settings, &node);
        assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 100_000]);
        // Again: the origin says the copy is current, nothing is fetched twice.
        publish(&settings, &node, &iso).await.unwrap();
        assert_eq!(full.load(std::sync::atomic::Ordering::SeqCst), 1);
        remove(&settings, &node).unwrap();
        assert!(!path.exists());

        // Passed through untouched when the BMC fetches from the origin itself.
        let direct = BootSettings {
            ramdisk_image_download_source: DownloadSource::Http,
            ..settings.clone()
        };
        assert_eq!(publish(&direct, &node, &iso).await.unwrap(), iso);
    }

    #[tokio::test]
    async fn an_unreachable_or_missing_iso_fails_naming_it_and_leaves_nothing() {
        let (origin, _) = origin().await;
        let root = tempfile::tempdir().unwrap();
        let settings = BootSettings {
            http_root: root.path().to_owned(),
            http_url: Some("http://10.0.0.1:8080".to_owned()),
            ..BootSettings::default()
        };
        let missing = format!("{origin}/gone.iso");
        let node = node(json!({"deploy_iso": missing}), ProvisionState::Deploying);
        let error = publish(&settings, &node, &missing)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(&missing) && error.contains("404"), "{error}");
        let closed = "http://127.0.0.1:9/none.iso";
        let error = publish(&settings, &node, closed)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains(closed), "{error}");
        let vmedia = root.path().join("vmedia");
        let left: Vec<_> = std::fs::read_dir(&vmedia)
            .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
    }
}
