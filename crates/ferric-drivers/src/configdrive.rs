//! Config drives given as JSON (`{"meta_data": …, "user_data": …, "network_data": …,
//! "vendor_data": …}`, API 1.56) rendered into the ISO 9660 image cloud-init reads: volume
//! label `config-2`, files under `openstack/latest/`.
//!
//! The ISO is made by `genisoimage` (Debian's cdrkit; `xorriso -as genisoimage` works too):
//! writing ISO 9660 with Rock Ridge and Joliet ourselves would cost more than calling the
//! tool every site that builds images already has.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};
use tokio::process::Command;

use crate::Component;
use crate::DriverError;

/// The config drive's files: `(path under the ISO root, contents)`.
pub(crate) fn files(drive: &Map<String, Value>) -> Result<Vec<(String, Vec<u8>)>, DriverError> {
    let known = ["meta_data", "user_data", "network_data", "vendor_data"];
    if let Some(unknown) = drive.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(DriverError::invalid(
            "instance_info.configdrive",
            format!(
                "Unknown config drive key \"{unknown}\"; expected meta_data, user_data, \
             network_data and vendor_data."
            ),
        ));
    }
    let mut files = Vec::new();
    for (key, name) in [
        ("meta_data", "meta_data.json"),
        ("network_data", "network_data.json"),
        ("vendor_data", "vendor_data.json"),
    ] {
        match drive.get(key) {
            None | Some(Value::Null) => {}
            Some(value @ Value::Object(_)) => files.push((
                format!("openstack/latest/{name}"),
                value.to_string().into_bytes(),
            )),
            Some(other) => {
                return Err(DriverError::invalid(
                    "instance_info.configdrive",
                    format!("Config drive {key} must be a JSON object, not {other}."),
                ));
            }
        }
    }
    match drive.get("user_data") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => {
            files.push((
                "openstack/latest/user_data".to_owned(),
                text.clone().into_bytes(),
            ));
        }
        Some(value) => files.push((
            "openstack/latest/user_data".to_owned(),
            value.to_string().into_bytes(),
        )),
    }
    if !files
        .iter()
        .any(|(path, _)| path.ends_with("meta_data.json"))
    {
        files.push(("openstack/latest/meta_data.json".to_owned(), b"{}".to_vec()));
    }
    Ok(files)
}

/// Renders `drive` into an ISO and returns it gzipped and base64-encoded.
pub(crate) async fn render(drive: &Map<String, Value>, tool: &str) -> Result<String, DriverError> {
    let files = files(drive)?;
    let failed = |what: &str, error: &dyn std::fmt::Display| {
        DriverError::failed(
            Component::Conductor,
            format!("Could not build the config drive: {what}: {error}"),
        )
    };
    let dir = tempfile::tempdir().map_err(|error| failed("temporary directory", &error))?;
    let root = dir.path().join("root");
    for (path, contents) in &files {
        let target = root.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|error| failed("directory", &error))?;
        }
        std::fs::write(&target, contents).map_err(|error| failed("file", &error))?;
    }
    let iso = dir.path().join("configdrive.iso");
    let output = Command::new(tool)
        .args([
            "-quiet",
            "-J",
            "-r",
            "-l",
            "-ldots",
            "-allow-lowercase",
            "-allow-multidot",
        ])
        .args(["-V", "config-2", "-publisher", "ferric", "-o"])
        .arg(&iso)
        .arg(&root)
        .output()
        .await
        .map_err(|error| {
            failed(
                &format!("running {tool} (install Debian's genisoimage)"),
                &error,
            )
        })?;
    if !output.status.success() {
        return Err(failed(
            tool,
            &String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ));
    }
    let bytes = std::fs::read(&iso).map_err(|error| failed("reading the ISO", &error))?;
    gzip_base64(&bytes)
}

/// Base64 of gzip of `bytes` — the form the agent takes a config drive in.
fn gzip_base64(bytes: &[u8]) -> Result<String, DriverError> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder
        .write_all(bytes)
        .and_then(|()| encoder.finish())
        .map(|compressed| STANDARD.encode(compressed))
        .map_err(|error| {
            DriverError::failed(
                Component::Conductor,
                format!("Could not compress the config drive: {error}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_drives_become_openstack_latest_files() {
        let drive = json!({"meta_data": {"uuid": "u"}, "user_data": "#cloud-config\n"});
        let rendered = files(drive.as_object().expect("object")).expect("valid");
        let paths: Vec<&str> = rendered.iter().map(|(path, _)| path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "openstack/latest/meta_data.json",
                "openstack/latest/user_data"
            ]
        );
        let bad = json!({"metadata": {}});
        assert!(files(bad.as_object().expect("object")).is_err());
        let empty = files(&Map::new()).expect("valid");
        assert_eq!(empty[0].0, "openstack/latest/meta_data.json");
    }

    #[tokio::test]
    async fn an_iso_is_rendered_with_the_config_2_label() {
        let drive = json!({"meta_data": {"uuid": "u"}});
        let drive = drive.as_object().expect("object");
        let missing = render(drive, "no-such-iso-tool").await.unwrap_err();
        assert!(missing.to_string().contains("genisoimage"), "{missing}");
        assert!(
            std::process::Command::new("genisoimage")
                .arg("--version")
                .output()
                .is_ok(),
            "genisoimage is missing: run scripts/install-deps.sh"
        );
        let encoded = render(drive, "genisoimage").await.expect("rendered");
        let compressed =
            base64::engine::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
                .expect("base64");
        let mut iso = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(compressed.as_slice()),
            &mut iso,
        )
        .expect("gzip");
        // The primary volume descriptor at 32 KiB carries the label.
        assert_eq!(&iso[32769..32774], b"CD001");
        assert!(iso[32808..32840].starts_with(b"config-2"));
    }
}
