//! The per-node boot ISO of the `redfish-virtual-media` boot interface: the agent kernel and
//! ramdisk, a GRUB menu whose one entry boots them with the agent's parameters (API URL, node
//! UUID, boot MAC, the site's and node's kernel parameters), and a second initramfs that puts
//! the node's `network_data` at [`NETWORK_DATA_PATH`] for the agent to configure static
//! addresses from. `grub-mkrescue` (GRUB's `grub-common`, with `grub-pc-bin`,
//! `grub-efi-amd64-bin`, `xorriso` and `mtools`) makes it bootable by legacy BIOS and UEFI
//! firmware alike. It is written to `<boot_http_root>/vmedia/<node>.iso`, which Ferric's boot
//! file server serves for the BMC to fetch. A node that asks for secure boot gets Debian's
//! signed shim and GRUB as the UEFI boot image instead (`secure_boot`).

pub mod secure_boot;

use std::path::{Path, PathBuf};

use ferric_model::resources::{Node, Port};
use serde_json::Value;
use tokio::process::Command;

use crate::Component;
use crate::DriverError;
use crate::settings::BootSettings;

/// What builds the ISO.
pub const ISO_TOOL: &str = "grub-mkrescue";

/// Where the agent finds the node's `network_data` in its ramdisk.
pub const NETWORK_DATA_PATH: &str = "etc/ferric/network_data.json";

/// The directory under the boot file server's root that holds the ISOs.
const ISO_DIR: &str = "vmedia";

/// Where a node's ISO is written.
pub fn iso_path(settings: &BootSettings, node: &Node) -> PathBuf {
    settings
        .http_root
        .join(ISO_DIR)
        .join(format!("{}.iso", node.uuid))
}

/// The URL the BMC fetches the node's ISO from.
pub fn iso_url(settings: &BootSettings, node: &Node) -> Result<String, DriverError> {
    let http_url = http_url(settings)?;
    Ok(format!(
        "{}/{ISO_DIR}/{}.iso",
        http_url.trim_end_matches('/'),
        node.uuid
    ))
}

fn http_url(settings: &BootSettings) -> Result<&str, DriverError> {
    settings.http_url.as_deref().ok_or_else(|| {
        DriverError::missing(
            "settings.boot_http_url",
            "Virtual media boot is not configured: set boot_http_url (the URL BMCs fetch \
             Ferric's boot ISOs from) and api_url in Ferric's settings."
                .to_owned(),
        )
    })
}

/// A node setting from `driver_info`, or the site's.
fn node_setting<'a>(node: &'a Node, key: &str, default: &'a str) -> &'a str {
    node.driver_info
        .get(key)
        .and_then(Value::as_str)
        .filter(|value| !value.is_empty())
        .unwrap_or(default)
}

/// The agent kernel or ramdisk as a file under the boot file server's root (a URL cannot go
/// into an ISO Ferric builds).
fn local_file(settings: &BootSettings, node: &Node, key: &str) -> Result<PathBuf, DriverError> {
    let (kernel, ramdisk) = crate::boot_arch::agent_files(settings, node)?;
    let name = if key == "deploy_kernel" {
        kernel
    } else {
        ramdisk
    };
    // Metal3's baremetal-operator names the agent by its URL on the provisioner's own HTTP
    // server (its DEPLOY_KERNEL_URL, DEPLOY_RAMDISK_URL); on Ferric's that is a local file.
    let name = settings
        .http_url
        .as_deref()
        .map(|base| format!("{}/", base.trim_end_matches('/')))
        .and_then(|base| name.strip_prefix(base.as_str()))
        .unwrap_or(name);
    let relative = name.trim_start_matches('/');
    let safe = !relative.is_empty()
        && !relative.contains("://")
        && relative
            .split('/')
            .all(|part| !part.is_empty() && part != "..");
    if !safe {
        return Err(DriverError::invalid(
            format!("driver_info.{key}"),
            format!(
                "Node {}: the redfish-virtual-media boot interface puts the agent's {key} into \
                 an ISO, so it must be a file under the boot file server's root (a name, or its \
                 URL on the boot file server), not {name:?}; set driver_info {key} (or the \
                 site's {key}) to such a file.",
                node.uuid
            ),
        ));
    }
    let path = settings.http_root.join(relative);
    if !path.is_file() {
        return Err(DriverError::invalid(
            format!("driver_info.{key}"),
            format!(
                "Node {}: the agent's {key} {} does not exist, so its virtual-media ISO cannot be \
             built; build the ramdisk into the boot file server's root (ferric ramdisk build) \
             or set driver_info {key}.",
                node.uuid,
                path.display()
            ),
        ));
    }
    Ok(path)
}

/// The agent's kernel command line for this node.
pub fn kernel_params(
    settings: &BootSettings,
    node: &Node,
    ports: &[Port],
    extra: &[String],
) -> Result<String, DriverError> {
    http_url(settings)?;
    let api_url = settings.api_url.as_deref().ok_or_else(|| {
        DriverError::missing(
            "settings.api_url",
            "Virtual media boot is not configured: set api_url (the URL agents reach Ferric's \
             API at) in Ferric's settings."
                .to_owned(),
        )
    })?;
    let mut params = format!(
        "ipa-api-url={api_url} ferric.api_url={api_url} ipa-node-uuid={}",
        node.uuid
    );
    if let Some(port) = ports.iter().find(|port| port.pxe_enabled) {
        params.push_str(&format!(
            " BOOTIF=01-{}",
            port.address.to_ascii_lowercase().replace(':', "-")
        ));
    }
    for (field, part) in [
        (
            "settings.kernel_append_params",
            settings.kernel_append_params.as_str(),
        ),
        (
            "driver_info.kernel_append_params",
            node_setting(node, "kernel_append_params", ""),
        ),
    ]
    .into_iter()
    .chain(
        extra
            .iter()
            .map(|extra| ("kernel parameters", extra.as_str())),
    ) {
        crate::kernel_params::check(field, part)?;
        if !part.is_empty() {
            params.push(' ');
            params.push_str(part);
        }
    }
    // The line goes into grub.cfg: quotes, `$`, `;`, braces and backslashes mean something there.
    if params
        .chars()
        .any(|c| c.is_control() || matches!(c, '"' | '\'' | '$' | ';' | '{' | '}' | '\\'))
    {
        return Err(DriverError::invalid(
            "driver_info.kernel_append_params",
            format!(
                "Node {}: the agent's kernel parameters {params:?} cannot go into a GRUB menu: \
             remove quotes, $, ;, braces, backslashes and line breaks from kernel_append_params.",
                node.uuid
            ),
        ));
    }
    Ok(params)
}

/// Checks, without building anything, that the node's ISO can be built here: the settings,
/// the agent files and the tool.
pub fn check(
    settings: &BootSettings,
    node: &Node,
    ports: &[Port],
    tool: &str,
) -> Result<(), DriverError> {
    kernel_params(settings, node, ports, &[])?;
    let (kernel, ramdisk) = crate::boot_arch::agent_files(settings, node)?;
    // A Glance image is checked against Glance and becomes a file of the image cache when
    // the ISO is built (`ImageSources::resolve_agent_files`).
    for (key, name) in [("deploy_kernel", kernel), ("deploy_ramdisk", ramdisk)] {
        if crate::glance::image_id(name).is_none() {
            local_file(settings, node, key)?;
        }
    }
    if find_in_path(tool).is_none() {
        return Err(DriverError::invalid(
            "node.boot_interface",
            format!(
                "Node {}: its virtual-media ISO cannot be built: {tool} is not installed on this \
             conductor; install the Debian packages grub-common, grub-pc-bin, \
             grub-efi-amd64-bin, xorriso and mtools (scripts/install-deps.sh does).",
                node.uuid
            ),
        ));
    }
    secure_boot::check(node, find_in_path)
}

fn find_in_path(tool: &str) -> Option<PathBuf> {
    if tool.contains('/') {
        return Path::new(tool).is_file().then(|| PathBuf::from(tool));
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(tool))
            .find(|candidate| candidate.is_file())
    })
}

/// Builds the node's ISO (replacing an older one) and returns its URL.
pub async fn build(
    settings: &BootSettings,
    node: &Node,
    ports: &[Port],
    extra: &[String],
    tool: &str,
) -> Result<String, DriverError> {
    let params = kernel_params(settings, node, ports, extra)?;
    let kernel = local_file(settings, node, "deploy_kernel")?;
    let ramdisk = local_file(settings, node, "deploy_ramdisk")?;
    let failed = |what: &str, error: &dyn std::fmt::Display| {
        DriverError::failed(
            Component::Conductor,
            format!(
                "Could not build the virtual-media ISO of node {}: {what}: {error}",
                node.uuid
            ),
        )
    };
    let out = iso_path(settings, node);
    let dir = out.parent().unwrap_or(&settings.http_root).to_owned();
    std::fs::create_dir_all(&dir).map_err(|error| failed("create the ISO directory", &error))?;
    let tree = tempfile::Builder::new()
        .prefix(&format!(".{}-", node.uuid))
        .tempdir_in(&dir)
        .map_err(|error| failed("create a work directory", &error))?;
    let files = tree.path().join("ferric");
    std::fs::create_dir_all(tree.path().join("boot/grub"))
        .and_then(|()| std::fs::create_dir_all(&files))
        .map_err(|error| failed("create the ISO tree", &error))?;
    for (source, name) in [(&kernel, "agent.kernel"), (&ramdisk, "agent.ramdisk")] {
        let target = files.join(name);
        if std::fs::hard_link(source, &target).is_err() {
            std::fs::copy(source, &target)
                .map_err(|error| failed(&format!("copy {}", source.display()), &error))?;
        }
    }
    let mut initrds = "/ferric/agent.ramdisk".to_owned();
    if !node.network_data.is_empty() {
        let json = serde_json::to_vec(&node.network_data)
            .map_err(|error| failed("encode network_data", &error))?;
        std::fs::write(
            files.join("node.cpio"),
            newc_archive(NETWORK_DATA_PATH, &json),
        )
        .map_err(|error| failed("write the network_data archive", &error))?;
        initrds.push_str(" /ferric/node.cpio");
    }
    let menu = format!(
        "# Written by Ferric for node {uuid}: boot the agent ramdisk.\n\
         set timeout=0\nset default=0\n\
         serial --unit=0 --speed=115200\n\
         terminal_input serial console\nterminal_output serial console\n\
         menuentry \"Ferric agent (node {uuid})\" {{\n\
         \x20 echo \"Loading the Ferric agent...\"\n\
         \x20 linux /ferric/agent.kernel {params}\n\
         \x20 initrd {initrds}\n\
         }}\n",
        uuid = node.uuid,
    );
    std::fs::write(tree.path().join("boot/grub/grub.cfg"), menu)
        .map_err(|error| failed("write grub.cfg", &error))?;
    let partial = dir.join(format!(".{}.iso.partial", node.uuid));
    let output = Command::new(tool)
        .arg("-o")
        .arg(&partial)
        .arg(tree.path())
        .output()
        .await
        .map_err(|error| failed(&format!("run {tool}"), &error))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&partial);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
        return Err(failed(
            &format!("{tool} failed ({})", output.status),
            &tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
        ));
    }
    let partial = if secure_boot::wanted(node) {
        let signed = dir.join(format!(".{}.secure-boot.iso.partial", node.uuid));
        let remastered = secure_boot::remaster(node, &partial, &signed, tree.path()).await;
        let _ = std::fs::remove_file(&partial);
        if let Err(error) = remastered {
            let _ = std::fs::remove_file(&signed);
            return Err(error);
        }
        signed
    } else {
        partial
    };
    std::fs::rename(&partial, &out).map_err(|error| failed("move the ISO in place", &error))?;
    tracing::info!(node = %node.uuid, iso = %out.display(), "virtual-media ISO built");
    iso_url(settings, node)
}

/// Removes the node's ISO (gone already is fine).
pub fn remove(settings: &BootSettings, node: &Node) -> Result<(), DriverError> {
    let path = iso_path(settings, node);
    match std::fs::remove_file(&path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(DriverError::failed(
            Component::Conductor,
            format!("Could not remove {}: {error}", path.display()),
        )),
        _ => Ok(()),
    }
}

/// An uncompressed cpio archive (the kernel's `newc` initramfs format) with one file and its
/// directories, readable and owned by root.
fn newc_archive(path: &str, data: &[u8]) -> Vec<u8> {
    let mut archive = Vec::new();
    let mut inode = 1;
    let parts: Vec<&str> = path.split('/').collect();
    for depth in 1..parts.len() {
        newc_entry(
            &mut archive,
            inode,
            0o040_755,
            &parts[..depth].join("/"),
            &[],
        );
        inode += 1;
    }
    newc_entry(&mut archive, inode, 0o100_644, path, data);
    newc_entry(&mut archive, 0, 0, "TRAILER!!!", &[]);
    archive
}

fn newc_entry(archive: &mut Vec<u8>, inode: u32, mode: u32, name: &str, data: &[u8]) {
    let nlink = if mode & 0o040_000 != 0 { 2 } else { 1 };
    let fields = [
        inode,
        mode,
        0,
        0,
        nlink,
        0,
        u32::try_from(data.len()).unwrap_or(u32::MAX),
        0,
        0,
        0,
        0,
        u32::try_from(name.len() + 1).unwrap_or(u32::MAX),
        0,
    ];
    archive.extend_from_slice(b"070701");
    for field in fields {
        archive.extend_from_slice(format!("{field:08x}").as_bytes());
    }
    archive.extend_from_slice(name.as_bytes());
    archive.push(0);
    pad4(archive);
    archive.extend_from_slice(data);
    pad4(archive);
}

fn pad4(archive: &mut Vec<u8>) {
    while !archive.len().is_multiple_of(4) {
        archive.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use uuid::Uuid;

    fn settings(root: &Path) -> BootSettings {
        BootSettings {
            http_url: Some("http://10.0.0.1:8080/".into()),
            http_root: root.to_owned(),
            api_url: Some("http://10.0.0.1:6385".into()),
            ..BootSettings::default()
        }
    }

    #[test]
    fn the_kernel_line_names_the_api_node_and_boot_mac_and_refuses_grub_syntax() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings(dir.path());
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Manageable);
        let ports = [Port::new(Uuid::new_v4(), node.uuid, "52:54:00:AB:00:01")];
        let params = kernel_params(&settings, &node, &ports, &["x=1".into()]).unwrap();
        assert_eq!(
            params,
            "ipa-api-url=http://10.0.0.1:6385 ferric.api_url=http://10.0.0.1:6385 \
             ipa-node-uuid=00000000-0000-0000-0000-000000000000 BOOTIF=01-52-54-00-ab-00-01 \
             console=ttyS0 console=tty0 x=1"
        );
        node.driver_info
            .insert("kernel_append_params".into(), "a=$(reboot)".into());
        let error = kernel_params(&settings, &node, &ports, &[]).unwrap_err();
        assert!(error.to_string().contains("boot script"), "{error}");
        assert_eq!(
            iso_url(&settings, &node).unwrap(),
            "http://10.0.0.1:8080/vmedia/00000000-0000-0000-0000-000000000000.iso"
        );
    }

    #[test]
    fn missing_agent_files_tools_and_urls_are_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings(dir.path());
        let mut node = Node::new(Uuid::nil(), "redfish", ProvisionState::Manageable);
        let error = check(&settings, &node, &[], "true").unwrap_err();
        assert!(
            error.to_string().contains("ferric ramdisk build"),
            "{error}"
        );
        std::fs::write(dir.path().join("agent.kernel"), b"k").unwrap();
        std::fs::write(dir.path().join("agent.ramdisk"), b"r").unwrap();
        let error = check(&settings, &node, &[], "no-such-iso-tool").unwrap_err();
        assert!(error.to_string().contains("grub-efi-amd64-bin"), "{error}");
        node.driver_info
            .insert("deploy_kernel".into(), "http://x/kernel".into());
        let error = check(&settings, &node, &[], "true").unwrap_err();
        assert!(error.to_string().contains("must be a file"), "{error}");
        // Metal3's shape: the agent's URL on Ferric's own boot file server is its file.
        for (key, file) in [
            ("deploy_kernel", "agent.kernel"),
            ("deploy_ramdisk", "agent.ramdisk"),
        ] {
            node.driver_info
                .insert(key.into(), format!("http://10.0.0.1:8080/{file}").into());
        }
        check(&settings, &node, &[], "true").unwrap();
        assert_eq!(
            local_file(&settings, &node, "deploy_kernel").unwrap(),
            dir.path().join("agent.kernel")
        );
        node.driver_info.insert(
            "deploy_kernel".into(),
            "http://10.0.0.1:8080/../etc/passwd".into(),
        );
        let error = check(&settings, &node, &[], "true").unwrap_err();
        assert!(error.to_string().contains("must be a file"), "{error}");
    }

    #[test]
    fn the_network_data_archive_is_a_valid_newc_cpio() {
        let archive = newc_archive(NETWORK_DATA_PATH, b"{}");
        assert!(archive.len().is_multiple_of(4));
        // Two directories, the file and the trailer.
        assert_eq!(
            archive
                .windows(6)
                .filter(|window| window == b"070701")
                .count(),
            4
        );
        let text = String::from_utf8_lossy(&archive);
        assert!(text.contains("etc/ferric/network_data.json\0"), "{text}");
        assert!(text.contains("TRAILER!!!"));
        // The file's header: mode 0100644, size 2.
        let file = text.find("etc/ferric/network_data.json").unwrap() - 110;
        assert_eq!(&text[file + 14..file + 22], "000081a4");
        assert_eq!(&text[file + 54..file + 62], "00000002");
    }
}
