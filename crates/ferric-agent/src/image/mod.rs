//! `standby.prepare_image` (and the `write_image` deploy step): stream a whole-disk image over
//! HTTP onto the root disk — raw written as it arrives, qcow2 converted on the fly — verify its
//! checksum while writing, then fix the GPT and add the config drive (IPA §4.5). A partition
//! image (`image_type=partition`) gets a new partition table first ([`layout`]) and is streamed
//! the same way into its root partition; `image.install_bootloader` ([`bootloader`]) then
//! makes it bootable.

pub mod bootloader;
pub mod held;
pub mod layout;
pub mod partitions;
pub mod peers;
pub mod qcow2;
pub mod source;

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agent::Agent;
use crate::agent::Invocation;
use crate::commands::{CommandError, Params, Progress};
use crate::disk::BlockDevice;
use source::Download;

/// The `image_info` fields the agent uses.
#[derive(Debug, Clone)]
pub struct ImageInfo {
    pub id: String,
    pub urls: Vec<String>,
    pub disk_format: Option<String>,
    pub checksum: Option<String>,
    pub os_hash_algo: Option<String>,
    pub os_hash_value: Option<String>,
    /// The partitions to make for a partition image; `None` for a whole-disk image.
    pub layout: Option<layout::Layout>,
    /// The `Authorization` header the image's server wants (IPA's
    /// `image_request_authorization`, base64 in `image_info`: an OCI registry's token).
    pub authorization: Option<String>,
    /// The swarm of peer-assisted delivery (`ferric_peers`), when the conductor set one up.
    pub peers: Option<peers::Plan>,
}

impl ImageInfo {
    /// The `image_request_authorization` header, decoded.
    fn authorization(
        info: &serde_json::Map<String, Value>,
    ) -> Result<Option<String>, CommandError> {
        use base64::Engine;
        let Some(encoded) = info
            .get("image_request_authorization")
            .and_then(Value::as_str)
            .filter(|encoded| !encoded.is_empty())
        else {
            return Ok(None);
        };
        let invalid = || {
            CommandError::invalid_params(
                "image_info.image_request_authorization must be a base64 HTTP header value",
            )
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| invalid())?;
        String::from_utf8(decoded).map(Some).map_err(|_| invalid())
    }
}

impl ImageInfo {
    /// Reads and checks `image_info` (→ 400 when wrong).
    pub fn from_params(params: &Params) -> Result<ImageInfo, CommandError> {
        let info = params
            .get("image_info")
            .and_then(Value::as_object)
            .ok_or_else(|| CommandError::invalid_params("image_info must be an object"))?;
        let text = |key: &str| info.get(key).and_then(Value::as_str).map(str::to_owned);
        let id = text("id")
            .ok_or_else(|| CommandError::invalid_params("image_info.id must be a string"))?;
        let urls: Vec<String> = info
            .get("urls")
            .and_then(Value::as_array)
            .map(|urls| {
                urls.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if urls.is_empty() {
            return Err(CommandError::invalid_params(
                "image_info.urls must be a non-empty list of URLs",
            ));
        }
        let layout = layout::Layout::from_image_info(info)?;
        let checksum = text("checksum");
        let os_hash_value = text("os_hash_value");
        if checksum.is_none() && os_hash_value.is_none() {
            return Err(CommandError::invalid_params(
                "image_info needs os_hash_algo and os_hash_value, or checksum",
            ));
        }
        Ok(ImageInfo {
            id,
            urls,
            disk_format: text("disk_format"),
            checksum,
            os_hash_algo: text("os_hash_algo"),
            os_hash_value,
            layout,
            authorization: Self::authorization(info)?,
            peers: peers::Plan::from_image_info(info)?,
        })
    }
}

pub(crate) fn validate_prepare_image(params: &Params) -> Result<(), CommandError> {
    ImageInfo::from_params(params).map(|_| ())
}

pub(crate) fn prepare_image_command(
    invocation: &Invocation,
) -> Result<Option<Value>, CommandError> {
    prepare_image(
        &invocation.agent,
        &invocation.params,
        &invocation.progress,
        None,
    )
    .map(Some)
}

pub(crate) fn partition_uuids_command(
    invocation: &Invocation,
) -> Result<Option<Value>, CommandError> {
    // IPA answers with what the last partition-image deployment made, if there was one.
    if let Some(uuids) = invocation.agent.partition_uuids() {
        return Ok(Some(uuids));
    }
    let disk = root_disk(&invocation.agent, None)?;
    let mut file = File::open(&disk.path).map_err(|error| disk_error(&disk, error))?;
    Ok(Some(partitions::partition_uuids(&mut file)))
}

fn disk_error(disk: &BlockDevice, error: io::Error) -> CommandError {
    CommandError::new(
        "ImageWriteError",
        "Error writing image to device",
        format!("cannot write {}: {error}", disk.name),
    )
}

/// The root disk by the node's `properties.root_device` hints (from the step's `node`
/// parameter when given, else from the lookup).
pub fn root_disk(agent: &Agent, node: Option<&Value>) -> Result<BlockDevice, CommandError> {
    let from_lookup = agent.node_info().map(|info| info.node);
    let node = node.or(from_lookup.as_ref());
    let hints = node.map(|node| &node["properties"]["root_device"]);
    let disks = crate::disk::list(&agent.config).map_err(|error| {
        CommandError::new(
            "DeviceNotFound",
            "Error finding the root device",
            error.to_string(),
        )
    })?;
    crate::disk::choose_root(&disks, hints).map_err(|error| {
        CommandError::new(
            "DeviceNotFound",
            "Error finding the root device",
            error.to_string(),
        )
    })
}

/// What the first bytes say the image is.
fn detect_format(first: &[u8]) -> &'static str {
    if first.starts_with(&qcow2::MAGIC) {
        "qcow2"
    } else if first.starts_with(b"KDMV") || first.starts_with(b"# Disk DescriptorFile") {
        "vmdk"
    } else if first.starts_with(b"conectix") {
        "vhd"
    } else {
        "raw"
    }
}

/// Writes to the disk with `O_DIRECT` where it can — an aligned buffer at an aligned offset
/// of an aligned length: the raw path's full chunks, the qcow2 converter's data clusters from
/// a staging buffer — and through the page cache otherwise (an image's unaligned tail, a file
/// or a kernel that refuses direct I/O). A direct write costs no copy into the page cache nor its writeback, which is most of
/// a buffered write's CPU when the CPU is emulated (`dd oflag=direct` vs `conv=fsync` in the
/// lab, docs/benchmarks.md). The final `sync_all` of the buffered file flushes both.
struct DiskWriter<'f> {
    buffered: &'f File,
    direct: Option<File>,
    /// Wall and CPU time in the write calls.
    wall: Duration,
    cpu: Duration,
    direct_bytes: u64,
}

impl<'f> DiskWriter<'f> {
    fn new(buffered: &'f File, path: &std::path::Path) -> Self {
        use std::os::unix::fs::OpenOptionsExt;
        let direct = i32::try_from(rustix::fs::OFlags::DIRECT.bits())
            .ok()
            .and_then(|flag| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(flag)
                    .open(path)
                    .inspect_err(|error| {
                        tracing::info!("no O_DIRECT on {}: {error}", path.display());
                    })
                    .ok()
            });
        Self {
            buffered,
            direct,
            wall: Duration::ZERO,
            cpu: Duration::ZERO,
            direct_bytes: 0,
        }
    }

    /// Whether `O_DIRECT` writes are (still) on.
    fn can_write_direct(&self) -> bool {
        self.direct.is_some()
    }

    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()> {
        let align = source::ALIGN;
        let (wall, cpu) = (Instant::now(), source::thread_cpu());
        let aligned = (data.as_ptr() as usize).is_multiple_of(align)
            && data.len().is_multiple_of(align)
            && offset.is_multiple_of(align as u64);
        let mut done = false;
        if let Some(direct) = self.direct.as_ref().filter(|_| aligned) {
            match direct.write_all_at(data, offset) {
                Ok(()) => {
                    done = true;
                    self.direct_bytes += data.len() as u64;
                }
                // A device or file system without direct I/O: the page cache from now on.
                Err(error)
                    if error.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) =>
                {
                    tracing::info!("O_DIRECT write refused ({error}); writing buffered");
                    self.direct = None;
                }
                Err(error) => return Err(error),
            }
        }
        if !done {
            self.buffered.write_all_at(data, offset)?;
        }
        self.wall += wall.elapsed();
        self.cpu += source::thread_cpu().saturating_sub(cpu);
        Ok(())
    }
}

/// A disk opened for the qcow2 converter.
struct DiskTarget<'f> {
    file: &'f File,
    /// Data clusters go out with `O_DIRECT` from `staging` (a copy: the converter's buffers
    /// are not page-aligned), which still costs less than the page cache's copy and writeback.
    writer: DiskWriter<'f>,
    staging: source::Chunk,
    /// Where the image starts on the disk (the root partition of a partition image).
    base: u64,
    /// Whether hole punching works here; falls back to writing zeros once it does not.
    punch: bool,
}

impl qcow2::Target for DiskTarget<'_> {
    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()> {
        let offset = self.base + offset;
        let align = source::ALIGN as u64;
        if !self.writer.can_write_direct()
            || !offset.is_multiple_of(align)
            || !(data.len() as u64).is_multiple_of(align)
        {
            return self.writer.write_at(data, offset);
        }
        let mut at = offset;
        for piece in data.chunks(source::CHUNK) {
            let room = &mut self.staging.room()[..piece.len()];
            room.copy_from_slice(piece);
            self.writer.write_at(room, at)?;
            at += piece.len() as u64;
        }
        Ok(())
    }

    fn zero(&mut self, offset: u64, len: u64) -> io::Result<()> {
        use rustix::fs::{FallocateFlags, fallocate};
        let offset = self.base + offset;
        // On a file this makes a hole; on a block device the kernel zeroes the range
        // (BLKZEROOUT), which is what `qemu-img convert` does for unallocated clusters.
        if self.punch
            && fallocate(
                self.file,
                FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
                offset,
                len,
            )
            .is_ok()
        {
            return Ok(());
        }
        self.punch = false;
        let zeros = vec![0u8; source::CHUNK];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(source::CHUNK as u64) as usize;
            self.file.write_all_at(&zeros[..n], offset + done)?;
            done += n as u64;
        }
        Ok(())
    }
}

/// Writes the image in `params["image_info"]` (and `params["configdrive"]`) to the root disk.
pub fn prepare_image(
    agent: &Agent,
    params: &Params,
    progress: &Progress,
    node: Option<&Value>,
) -> Result<Value, CommandError> {
    let info = ImageInfo::from_params(params)?;
    let disk = root_disk(agent, node)?;
    let http = source::http_client(
        agent.config.api_ca_file.as_deref(),
        info.authorization.as_deref(),
    )?;
    let expected = source::expected_checksum(
        &http,
        &info.urls[0],
        info.os_hash_algo.as_deref(),
        info.os_hash_value.as_deref(),
        info.checksum.as_deref(),
        agent.md5_allowed(),
    )?;
    let configdrive = match params.get("configdrive") {
        Some(Value::String(text)) if !text.is_empty() => {
            Some(partitions::decode_configdrive(text, &http)?)
        }
        _ => None,
    };
    tracing::info!(image = %info.id, device = %disk.name, "writing image");
    let mut file =
        crate::erase::open_for_write(&disk.path).map_err(|error| disk_error(&disk, error))?;
    crate::erase::wipe_metadata(&file, disk.size).map_err(|error| disk_error(&disk, error))?;
    // A partition image goes into the root partition of a new table, a whole-disk image from
    // the first byte.
    let partitions = match &info.layout {
        Some(wanted) => Some(layout::create(
            &mut file,
            disk.size,
            wanted,
            configdrive.as_ref().map(|data| data.len() as u64),
        )?),
        None => None,
    };
    let (base, room, target) = match &partitions {
        Some(made) => (
            made.root.start,
            made.root.size,
            format!("{} partition {}", disk.name, made.root.number),
        ),
        None => (0, disk.size, disk.name.clone()),
    };

    // The write's own figures (docs/benchmarks.md): from the first request for the image to
    // the final flush, and the agent's peak resident memory over that time.
    let timer = WriteTimer::start();
    let place = Place {
        disk: &disk,
        file: &file,
        base,
        room,
        target: &target,
    };
    let peer_plan = info
        .peers
        .clone()
        .filter(|_| info.disk_format.as_deref() != Some("qcow2"));
    let streamed = match peer_plan {
        Some(plan) => from_peers(agent, &info, &http, &expected, plan, &place, progress)?,
        None => stream(&info, &http, &expected, &place, progress)?,
    };
    let Streamed {
        detected,
        written,
        downloaded,
        total,
        url,
        actual,
        producer,
        mut split,
        peers: peer_figures,
    } = streamed;
    if actual != expected.hex {
        // Never leave a half-trusted image bootable.
        if let Err(error) = crate::erase::wipe_metadata(&file, disk.size) {
            tracing::error!(
                "wiping {} after a checksum mismatch failed: {error}",
                disk.name
            );
        }
        return Err(CommandError::new(
            "ImageChecksumError",
            "Error verifying image checksum",
            format!(
                "Image failed to verify against checksum. location: {url}; image ID: {}; \
                 image checksum: {}; verification checksum: {actual}",
                info.id, expected.hex
            ),
        ));
    }
    let mut message = format!("image ({}) written to device {target}", info.id);
    let mut reply = json!({
        "bytes_written": written,
        "bytes_downloaded": downloaded,
        "total": total,
        "device": disk.name,
        "image_format": detected,
    });
    if let Some(delivered) = peer_figures {
        reply["bytes_from_peers"] = json!(delivered.from_peers);
        reply["bytes_from_conductor"] = json!(delivered.from_origin);
        reply["peers_dropped"] = json!(delivered.peers_dropped);
        message.push_str(&format!(
            "; {} bytes from peers, {} from the conductor",
            delivered.from_peers, delivered.from_origin
        ));
    }
    match &partitions {
        Some(made) => {
            let uuids = finish_partitions(&file, made, configdrive.as_deref())?;
            message.push_str(&format!(
                "; root uuid {}",
                uuids["root uuid"].as_str().unwrap_or_default()
            ));
            if let (Value::Object(reply), Value::Object(uuids)) = (&mut reply, &uuids) {
                reply.extend(uuids.clone());
            }
            agent.set_partition_uuids(uuids);
        }
        None => {
            partitions::fix_gpt(&mut file)?;
            if let Some(data) = configdrive {
                let note = partitions::write_configdrive(&mut file, &data)?;
                message.push_str(&format!("; {note}"));
            }
        }
    }
    let syncing = Instant::now();
    file.sync_all().map_err(|error| disk_error(&disk, error))?;
    split.sync = syncing.elapsed();
    let process_cpu = source::process_cpu().saturating_sub(timer.process_cpu);
    let (seconds, peak_rss_kib) = timer.finish();
    let mib_per_s = written as f64 / 1048576.0 / seconds.max(1e-9);
    tracing::info!(
        image = %info.id,
        device = %target,
        format = %detected,
        bytes = written,
        seconds = %format_args!("{seconds:.3}"),
        mib_per_s = %format_args!("{mib_per_s:.1}"),
        peak_rss_kib,
        "image written and verified"
    );
    // Where the time went (docs/benchmarks.md): the download thread's reads (the HTTP
    // client's copies, and waiting for the network) and hashing, the writer's waits for a
    // chunk, its writes and the final flush; wall and CPU seconds, and the whole process's
    // CPU (the HTTP client's runtime thread included).
    let secs = |d: Duration| format!("{:.2}", d.as_secs_f64());
    tracing::info!(
        image = %info.id,
        read_wall = %secs(producer.read_wall),
        read_cpu = %secs(producer.read_cpu),
        hash_wall = %secs(producer.hash_wall),
        hash_cpu = %secs(producer.hash_cpu),
        wait_wall = %secs(split.wait),
        disk_wall = %secs(split.disk_wall),
        disk_cpu = %secs(split.disk_cpu),
        sync_wall = %secs(split.sync),
        process_cpu = %secs(process_cpu),
        direct_bytes = split.direct_bytes,
        "image write split"
    );
    reply["write_seconds"] = json!(seconds);
    reply["write_mib_per_s"] = json!(mib_per_s);
    reply["peak_rss_kib"] = json!(peak_rss_kib);
    reply["result"] = Value::String(format!("prepare_image: {message}"));
    Ok(reply)
}

/// Where the image goes: the disk, opened; where on it; how much room there is.
struct Place<'a> {
    disk: &'a BlockDevice,
    file: &'a File,
    base: u64,
    room: u64,
    target: &'a str,
}

impl Place<'_> {
    /// The refusal of an image of `size` bytes that does not fit.
    fn too_small_for(&self, size: u64) -> CommandError {
        CommandError::new(
            "ImageWriteError",
            "Error writing image to device",
            format!(
                "the image ({size} bytes) is larger than {} ({} bytes)",
                self.target, self.room
            ),
        )
    }
}

/// An image written, not yet checked against its hash.
struct Streamed {
    detected: &'static str,
    written: u64,
    downloaded: u64,
    total: Option<u64>,
    url: String,
    /// The hex digest of what was written.
    actual: String,
    producer: source::ProducerTimes,
    split: WriteSplit,
    /// Where the bytes came from, for a peer-assisted delivery.
    peers: Option<peers::Delivered>,
}

/// The image streamed from its URL in one request: raw written as it arrives, qcow2
/// converted on the fly.
fn stream(
    info: &ImageInfo,
    http: &reqwest::blocking::Client,
    expected: &source::Expected,
    place: &Place<'_>,
    progress: &Progress,
) -> Result<Streamed, CommandError> {
    let Place {
        disk,
        file,
        base,
        room,
        target,
    } = *place;
    let mut split = WriteSplit::default();
    let mut download = Download::start(http, &info.urls, expected.algorithm)?;
    let total = download.content_length;
    if let Some(length) = total.filter(|length| *length > room) {
        return Err(place.too_small_for(length));
    }
    let first = download.next_chunk().unwrap_or_default();
    let detected = detect_format(&first);
    let declared = info.disk_format.as_deref().unwrap_or(detected);
    if declared != detected {
        return Err(CommandError::new(
            "InvalidImage",
            "Image format mismatch",
            format!(
                "image {} is declared {declared} but its content is {detected}",
                info.id
            ),
        ));
    }
    let report = |written: u64, downloaded: u64| {
        progress.set(json!({
            "bytes_written": written,
            "bytes_downloaded": downloaded,
            "total": total,
            "device": disk.name,
            "image_format": detected,
        }));
    };
    let written = match detected {
        "raw" => {
            let mut offset = 0u64;
            let mut chunk = first;
            let mut reported = 0u64;
            let mut writer = DiskWriter::new(file, &disk.path);
            loop {
                if chunk.is_empty() {
                    break;
                }
                if offset + chunk.len() as u64 > room {
                    return Err(CommandError::new(
                        "ImageWriteError",
                        "Error writing image to device",
                        format!("the image is larger than {target} ({room} bytes)"),
                    ));
                }
                writer
                    .write_at(&chunk, base + offset)
                    .map_err(|error| disk_error(disk, error))?;
                offset += chunk.len() as u64;
                download.recycle(chunk);
                if offset - reported >= 16 * 1024 * 1024 {
                    reported = offset;
                    report(offset, download.downloaded.load(Ordering::Relaxed));
                }
                let waiting = Instant::now();
                chunk = download.next_chunk().unwrap_or_default();
                split.wait += waiting.elapsed();
            }
            split.disk_wall = writer.wall;
            split.disk_cpu = writer.cpu;
            split.direct_bytes = writer.direct_bytes;
            offset
        }
        "qcow2" => {
            download.push_back(first);
            let url = download.url.clone();
            let downloaded = download.downloaded.clone();
            let mut fetch = |offset: u64, len: u64| source::fetch_range(http, &url, offset, len);
            let mut writer = DiskTarget {
                file,
                writer: DiskWriter::new(file, &disk.path),
                staging: source::Chunk::aligned(),
                base,
                punch: true,
            };
            let stats =
                qcow2::convert(&mut download, &mut fetch, &mut writer, room, &mut |stats| {
                    report(stats.data_bytes, downloaded.load(Ordering::Relaxed));
                })
                .map_err(|error| {
                    let details = match &error {
                        qcow2::Qcow2Error::Read(cause) | qcow2::Qcow2Error::Write(cause) => {
                            format!("{error}: {cause}")
                        }
                        _ => error.to_string(),
                    };
                    CommandError::new("ImageWriteError", "Error writing image to device", details)
                })?;
            if stats.refetched > 0 {
                tracing::info!(
                    ranges = stats.refetched,
                    "qcow2: fetched out-of-order tables/clusters by range"
                );
            }
            split.disk_wall = writer.writer.wall;
            split.disk_cpu = writer.writer.cpu;
            split.direct_bytes = writer.writer.direct_bytes;
            stats.data_bytes
        }
        other => {
            return Err(CommandError::new(
                "InvalidImage",
                "Unsupported image format",
                format!(
                    "image {} is {other}; ferric-agent writes raw and qcow2 images",
                    info.id
                ),
            ));
        }
    };
    let url = download.url.clone();
    let downloaded = download.downloaded.load(Ordering::Relaxed);
    let (actual, producer) = download.finish()?;
    Ok(Streamed {
        detected,
        written,
        downloaded,
        total,
        url,
        actual,
        producer,
        split,
        peers: None,
    })
}

/// The image delivered by its swarm (`image_info.ferric_peers`): pieces from peers and the
/// conductor, each checked, written where they fall, served to the others from then on.
fn from_peers(
    agent: &Agent,
    info: &ImageInfo,
    http: &reqwest::blocking::Client,
    expected: &source::Expected,
    plan: peers::Plan,
    place: &Place<'_>,
    progress: &Progress,
) -> Result<Streamed, CommandError> {
    let size = plan.size;
    if size > place.room {
        return Err(place.too_small_for(size));
    }
    let swarm = plan.swarm.clone();
    let held = peers::hold(plan, place.disk.path.clone(), place.base);
    agent.set_peer_swarm(Some(held.clone()));
    tracing::info!(image = %info.id, swarm = %swarm, pieces = held.plan.pieces.len(), "image from peers and the conductor");
    let url = info.urls[0].clone();
    let mut reported = 0u64;
    let mut report = |written: u64| {
        if written - reported >= 16 * 1024 * 1024 || written == size {
            reported = written;
            progress.set(json!({
                "bytes_written": written,
                "total": size,
                "device": place.disk.name,
                "image_format": "raw",
            }));
        }
    };
    let delivered = peers::deliver(
        held,
        &url,
        http,
        place.file,
        expected.algorithm.hasher(),
        &mut report,
    );
    let (actual, figures) = match delivered {
        Ok(delivered) => delivered,
        Err(error) => {
            agent.set_peer_swarm(None);
            return Err(error);
        }
    };
    // The GPT is fixed for the disk's size next, in the first piece: peers get it as it was;
    // other pieces are checked before they leave from now on (a config drive may land in one).
    if let Some(held) = agent.peer_swarm() {
        held.keep(0);
        held.mark_changed();
    }
    tracing::info!(
        image = %info.id,
        from_peers = figures.from_peers,
        from_conductor = figures.from_origin,
        peers_dropped = figures.peers_dropped,
        "image delivered"
    );
    Ok(Streamed {
        detected: "raw",
        written: size,
        downloaded: figures.from_peers + figures.from_origin,
        total: Some(size),
        url,
        actual,
        producer: source::ProducerTimes::default(),
        split: WriteSplit::default(),
        peers: Some(figures),
    })
}

/// The writer's side of [`prepare_image`]'s time (for qcow2, the wait for a chunk is inside
/// the converter and not split out).
#[derive(Debug, Default)]
struct WriteSplit {
    wait: Duration,
    disk_wall: Duration,
    disk_cpu: Duration,
    sync: Duration,
    direct_bytes: u64,
}

/// Times an image write and measures the agent's peak resident memory during it: the
/// kernel's high-water mark (`VmHWM`) is reset to the current RSS at the start
/// (`/proc/self/clear_refs` ← 5) and read at the end. Where that is not possible (not Linux,
/// no procfs) the peak since the agent started is what is reported, or 0.
struct WriteTimer {
    started: std::time::Instant,
    process_cpu: Duration,
}

impl WriteTimer {
    fn start() -> Self {
        if let Err(error) = std::fs::write("/proc/self/clear_refs", "5") {
            tracing::debug!("cannot reset the peak RSS (/proc/self/clear_refs): {error}");
        }
        Self {
            started: std::time::Instant::now(),
            process_cpu: source::process_cpu(),
        }
    }

    /// Seconds since the start, and the peak RSS in KiB.
    fn finish(self) -> (f64, u64) {
        let seconds = self.started.elapsed().as_secs_f64();
        let peak = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| status_kib(&status, "VmHWM:"))
            .unwrap_or(0);
        (seconds, peak)
    }
}

/// A `/proc/PID/status` figure in KiB (`VmHWM:   1234 kB`).
fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
}

/// After a partition image's root filesystem is written: the ESP formatted, the swap
/// signature and the config drive written; returns the `get_partition_uuids` answer.
pub fn finish_partitions(
    file: &File,
    made: &layout::Partitions,
    configdrive: Option<&[u8]>,
) -> Result<Value, CommandError> {
    let esp_uuid = match &made.esp {
        Some(esp) => Some(layout::format_esp(file, esp)?),
        None => None,
    };
    if let Some(swap) = &made.swap {
        layout::write_swap(file, swap)?;
    }
    if let (Some(part), Some(data)) = (&made.configdrive, configdrive) {
        file.write_all_at(data, part.start).map_err(|error| {
            CommandError::new(
                "ConfigDriveError",
                "Error writing the config drive",
                format!("cannot write the config drive partition: {error}"),
            )
        })?;
    }
    // IPA reports the filesystem's UUID (blkid's UUID, else PARTUUID).
    let root_uuid = layout::filesystem_uuid(file, made.root.start, made.root.size)
        .unwrap_or_else(|| made.root.partuuid.clone());
    Ok(layout::uuids_json(made, &root_uuid, esp_uuid.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_kib_reads_a_field() {
        let status =
            "Name:\tferric-agent\nVmPeak:\t  20000 kB\nVmHWM:\t    7340 kB\nVmRSS:\t    7000 kB\n";
        assert_eq!(status_kib(status, "VmHWM:"), Some(7340));
        assert_eq!(status_kib(status, "VmRSS:"), Some(7000));
        assert_eq!(status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn the_write_timer_reports_this_process_peak() {
        let timer = WriteTimer::start();
        let (seconds, peak) = timer.finish();
        assert!(seconds >= 0.0);
        // A test process has a resident set of at least a few hundred KiB.
        assert!(peak > 100, "VmHWM {peak} KiB");
    }
}
