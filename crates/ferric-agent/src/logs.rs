//! `log.collect_system_logs`: a base64 gzipped tar of what helps to debug a ramdisk: the
//! kernel log, the agent's log, network and disk state.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use base64::Engine;
use serde_json::{Value, json};

use crate::agent::Invocation;
use crate::commands::CommandError;

/// Files larger than this are cut (their last part is kept).
const MAX_FILE: usize = 8 * 1024 * 1024;

pub(crate) fn collect_system_logs_command(
    invocation: &Invocation,
) -> Result<Option<Value>, CommandError> {
    let proc_root = &invocation.agent.config.proc_root;
    let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, program, args) in [
        ("dmesg.txt", "dmesg", &[][..]),
        ("ip-addr.txt", "ip", &["addr"][..]),
        ("ip-route.txt", "ip", &["route"][..]),
        ("ps.txt", "ps", &[][..]),
        ("df.txt", "df", &[][..]),
    ] {
        if let Ok(output) = Command::new(program).args(args).output() {
            let mut text = output.stdout;
            text.extend_from_slice(&output.stderr);
            entries.push((name.to_owned(), text));
        }
    }
    for name in ["cmdline", "mounts", "meminfo", "partitions", "modules"] {
        if let Ok(content) = std::fs::read(proc_root.join(name)) {
            entries.push((format!("proc/{name}"), content));
        }
    }
    if let Ok(dir) = std::fs::read_dir(Path::new("/var/log")) {
        for entry in dir.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_file())
                && let Ok(content) = std::fs::read(entry.path())
            {
                entries.push((
                    format!("var/log/{}", entry.file_name().to_string_lossy()),
                    content,
                ));
            }
        }
    }
    let fail =
        |error: std::io::Error| CommandError::internal(format!("cannot pack the logs: {error}"));
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut archive = tar::Builder::new(encoder);
    for (name, mut content) in entries {
        if content.len() > MAX_FILE {
            content.drain(..content.len() - MAX_FILE);
        }
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        archive
            .append_data(&mut header, &name, &content[..])
            .map_err(fail)?;
    }
    let mut encoder = archive.into_inner().map_err(fail)?;
    encoder.flush().map_err(fail)?;
    let compressed = encoder.finish().map_err(fail)?;
    Ok(Some(json!({
        "system_logs": base64::engine::general_purpose::STANDARD.encode(compressed),
    })))
}
