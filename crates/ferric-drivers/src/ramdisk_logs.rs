//! Ramdisk logs (`reference/ironic.md` §4.2 `log.collect_system_logs`): the agent's base64
//! gzipped tar of its logs, stored under `deploy_logs_local_path` with Ironic's file names —
//! `<node uuid>[_<instance uuid>][_<label>]_<YYYY-MM-DD-hh-mm-ss>.tar.gz` — so operators
//! and their tools find them where they would on an Ironic conductor.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ferric_model::resources::Node;
use serde_json::Value;

use crate::Component;
use crate::DriverError;

/// The file name Ironic gives a node's ramdisk logs collected now.
pub fn file_name(node: &Node, label: Option<&str>, now: chrono::DateTime<chrono::Utc>) -> String {
    let mut fields = vec![node.uuid.to_string()];
    if let Some(instance) = node.instance_uuid {
        fields.push(instance.to_string());
    }
    if let Some(label) = label {
        fields.push(label.to_owned());
    }
    fields.push(now.format("%Y-%m-%d-%H-%M-%S").to_string());
    format!("{}.tar.gz", fields.join("_"))
}

/// Stores what `log.collect_system_logs` answered (`{"system_logs": "<base64>"}`) in `dir`
/// (created if missing, readable by its owner's group only: logs carry addresses and
/// commands) and returns the file's path.
pub fn store(
    dir: &Path,
    node: &Node,
    label: Option<&str>,
    result: &Value,
) -> Result<PathBuf, DriverError> {
    let encoded = result
        .get("system_logs")
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
        .ok_or_else(|| {
            DriverError::failed(
                Component::Agent,
                format!(
                    "the agent of node {} answered log.collect_system_logs without system_logs",
                    node.uuid
                ),
            )
        })?;
    let bytes = STANDARD.decode(encoded.trim()).map_err(|error| {
        DriverError::failed(
            Component::Agent,
            format!(
                "the agent of node {} sent logs that are not base64 ({error})",
                node.uuid
            ),
        )
    })?;
    let failed = |error: std::io::Error| {
        DriverError::failed(
            Component::Conductor,
            format!(
                "cannot store ramdisk logs in {} (deploy_logs_local_path): {error}",
                dir.display()
            ),
        )
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    let path = dir.join(file_name(node, label, chrono::Utc::now()));
    let mut file = std::fs::File::create(&path).map_err(failed)?;
    file.write_all(&bytes).map_err(failed)?;
    set_private(&path);
    Ok(path)
}

#[cfg(unix)]
fn set_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o640));
}

#[cfg(not(unix))]
fn set_private(_path: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    #[test]
    fn logs_are_stored_under_ironic_names() {
        let mut node = Node::new(
            uuid::Uuid::nil(),
            "fake-hardware",
            ferric_model::ProvisionState::DeployFailed,
        );
        let at = chrono::Utc.with_ymd_and_hms(2026, 11, 25, 1, 2, 3).unwrap();
        assert_eq!(
            file_name(&node, None, at),
            "00000000-0000-0000-0000-000000000000_2026-11-25-01-02-03.tar.gz"
        );
        node.instance_uuid = Some(uuid::Uuid::max());
        assert_eq!(
            file_name(&node, Some("cleaning"), at),
            "00000000-0000-0000-0000-000000000000_ffffffff-ffff-ffff-ffff-ffffffffffff_cleaning_\
             2026-11-25-01-02-03.tar.gz"
        );

        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("deploy");
        let path = store(
            &logs,
            &node,
            None,
            &json!({"system_logs": STANDARD.encode(b"tar.gz bytes")}),
        )
        .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"tar.gz bytes");
        assert!(path.starts_with(&logs));
        let error = store(&logs, &node, None, &json!({"system_logs": "%%%"})).unwrap_err();
        assert!(error.to_string().contains("not base64"), "{error}");
        let error = store(&logs, &node, None, &json!({})).unwrap_err();
        assert!(error.to_string().contains("without system_logs"), "{error}");
    }
}
