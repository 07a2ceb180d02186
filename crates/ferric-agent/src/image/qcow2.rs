//! qcow2 → raw conversion in one sequential pass over the download, without holding the image.
//!
//! Theory of operation: a qcow2 file is a header, an L1 table (one entry per 512 MiB of disk
//! with 64 KiB clusters) pointing at L2 tables, whose entries point at data clusters. The
//! converter reads the stream in order and keeps a map of the *upcoming* interesting offsets:
//! the L1 table (known from the header), each L2 table (known once the L1 table has passed)
//! and each data cluster (known once its L2 table has passed). When the stream reaches an
//! offset in the map, the bytes are parsed (tables) or written to the disk at their guest
//! offset (data; compressed clusters are inflated first). Everything else is skipped. Entries
//! behind us leave the map, so memory holds one L2 table's worth of entries at a time.
//!
//! Images written by `qemu-img` place each L2 table before its data, so the single pass finds
//! everything. A cluster that lies *before* the table that names it cannot be written in that
//! pass; it is noted and fetched afterwards with an HTTP range request (`fetch`). Ranges that
//! are unallocated or marked zero are zeroed on the disk (a hole punch on files, a zero-out on
//! block devices), as `qemu-img convert` to a host device does.
//!
//! Refused: encryption, backing files, external data files, extended L2 entries, and zstd
//! compression; the image is then not written at all (the header comes first).
//!
//! Written here because the qcow2 crates (`qcow`, `qcow2`, `qcow2-core`, which also lacks
//! compressed clusters) read a whole local file by random access, while the agent converts a
//! download stream without keeping it, and the subset it needs is small (header, L1/L2,
//! zlib-compressed clusters).

use std::collections::BTreeMap;
use std::io::{self, Read};

/// The magic at offset 0: `QFI\xfb`.
pub const MAGIC: [u8; 4] = *b"QFI\xfb";
/// A run of data clusters is written with one call up to this size.
const MAX_RUN: u64 = 1024 * 1024;
/// Bytes kept behind the read position, for compressed clusters sharing a sector.
const WINDOW: usize = 4096;

/// Why an image cannot be converted.
#[derive(Debug, thiserror::Error)]
pub enum Qcow2Error {
    #[error("not a qcow2 image (bad magic)")]
    BadMagic,
    #[error("unsupported qcow2 image: {0}")]
    Unsupported(String),
    #[error("corrupt qcow2 image: {0}")]
    Corrupt(String),
    #[error(
        "the image's virtual size ({virtual_size} bytes) is larger than the disk ({disk_size} bytes)"
    )]
    TooLarge { virtual_size: u64, disk_size: u64 },
    #[error("reading the image failed")]
    Read(#[source] io::Error),
    #[error("writing the disk failed")]
    Write(#[source] io::Error),
}

/// Where the converted image goes.
pub trait Target {
    /// Writes `data` at guest offset `offset`.
    fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()>;
    /// Makes `len` bytes at `offset` read as zeros.
    fn zero(&mut self, offset: u64, len: u64) -> io::Result<()>;
}

/// What the conversion did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    pub virtual_size: u64,
    pub data_bytes: u64,
    pub zero_bytes: u64,
    /// Tables and clusters fetched by range after the pass (0 for qemu-img's layout).
    pub refetched: u64,
}

#[derive(Debug, Clone)]
struct Header {
    version: u32,
    cluster_bits: u32,
    size: u64,
    l1_size: u64,
    l1_table_offset: u64,
}

fn be32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

fn be64(buf: &[u8], at: usize) -> u64 {
    (u64::from(be32(buf, at)) << 32) | u64::from(be32(buf, at + 4))
}

/// Parses the first 104+ bytes.
fn parse_header(buf: &[u8]) -> Result<Header, Qcow2Error> {
    if buf.len() < 72 || buf[..4] != MAGIC {
        return Err(Qcow2Error::BadMagic);
    }
    let version = be32(buf, 4);
    if version != 2 && version != 3 {
        return Err(Qcow2Error::Unsupported(format!("version {version}")));
    }
    if be64(buf, 8) != 0 {
        return Err(Qcow2Error::Unsupported(
            "images with a backing file".to_owned(),
        ));
    }
    let cluster_bits = be32(buf, 20);
    if !(9..=21).contains(&cluster_bits) {
        return Err(Qcow2Error::Corrupt(format!("cluster_bits {cluster_bits}")));
    }
    if be32(buf, 32) != 0 {
        return Err(Qcow2Error::Unsupported("encrypted images".to_owned()));
    }
    if version == 3 {
        if buf.len() < 104 {
            return Err(Qcow2Error::Corrupt("short version 3 header".to_owned()));
        }
        let incompatible = be64(buf, 72);
        let refuse = [
            (1 << 1, "the image is marked corrupt"),
            (1 << 2, "external data files"),
            (1 << 3, "compression types other than zlib"),
            (1 << 4, "extended L2 entries"),
        ];
        for (bit, what) in refuse {
            if incompatible & bit != 0 {
                return Err(Qcow2Error::Unsupported(what.to_owned()));
            }
        }
        if incompatible & !0b1_1111 != 0 {
            return Err(Qcow2Error::Unsupported(format!(
                "unknown incompatible features {incompatible:#x}"
            )));
        }
    }
    let size = be64(buf, 24);
    let l1_size = u64::from(be32(buf, 36));
    let l1_table_offset = be64(buf, 40);
    let l2_entries = 1u64 << (cluster_bits - 3);
    let cluster_size = 1u64 << cluster_bits;
    let needed = size.div_ceil(cluster_size).div_ceil(l2_entries);
    if l1_size < needed {
        return Err(Qcow2Error::Corrupt(format!(
            "L1 table has {l1_size} entries, {needed} needed"
        )));
    }
    if l1_size > 32 * 1024 * 1024 || !l1_table_offset.is_multiple_of(512) {
        return Err(Qcow2Error::Corrupt("implausible L1 table".to_owned()));
    }
    Ok(Header {
        version,
        cluster_bits,
        size,
        l1_size,
        l1_table_offset,
    })
}

/// Something at a host offset the converter wants to read.
#[derive(Debug, Clone, Copy)]
enum Item {
    L1,
    L2 {
        l1_index: u64,
    },
    /// `len` bytes of consecutive data clusters for guest offset `guest`.
    Data {
        guest: u64,
        len: u64,
    },
    /// A compressed cluster of up to `len` bytes (the last one may be cut short by EOF).
    Compressed {
        guest: u64,
        len: u64,
    },
}

impl Item {
    fn host_len(&self, header: &Header) -> u64 {
        match *self {
            Item::L1 => header.l1_size * 8,
            Item::L2 { .. } => 1 << header.cluster_bits,
            Item::Data { len, .. } | Item::Compressed { len, .. } => len,
        }
    }
}

/// The download, read in order, with a small window of bytes already passed.
struct Stream<R> {
    inner: R,
    pos: u64,
    window: Vec<u8>,
    eof: bool,
}

impl<R: Read> Stream<R> {
    fn read_some(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => filled += n,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        self.pos += filled as u64;
        let keep = WINDOW.min(filled);
        self.window.extend_from_slice(&buf[filled - keep..filled]);
        if self.window.len() > WINDOW {
            self.window.drain(..self.window.len() - WINDOW);
        }
        Ok(filled)
    }

    fn skip_to(&mut self, offset: u64, scratch: &mut Vec<u8>) -> io::Result<()> {
        while self.pos < offset && !self.eof {
            let n = (offset - self.pos).min(MAX_RUN) as usize;
            scratch.resize(n, 0);
            self.read_some(&mut scratch[..n])?;
        }
        Ok(())
    }

    /// Reads `[offset, offset + len)` into `out`, using the window for bytes already passed.
    /// `None` when part of it lies before the window (the caller fetches it by range).
    /// Stops short at the end of the file.
    fn read_span(
        &mut self,
        offset: u64,
        len: u64,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> io::Result<Option<()>> {
        out.clear();
        if offset < self.pos {
            let window_start = self.pos - self.window.len() as u64;
            if offset < window_start {
                return Ok(None);
            }
            let from = (offset - window_start) as usize;
            let to = (from as u64 + len).min(self.window.len() as u64) as usize;
            out.extend_from_slice(&self.window[from..to]);
        } else {
            self.skip_to(offset, scratch)?;
        }
        let missing = len - out.len() as u64;
        if missing > 0 && !self.eof {
            let start = out.len();
            out.resize(start + missing as usize, 0);
            let n = self.read_some(&mut out[start..])?;
            out.truncate(start + n);
        }
        Ok(Some(()))
    }
}

/// The converter's state between items.
struct Converter<'t> {
    header: Header,
    cluster_size: u64,
    pending: BTreeMap<u64, Vec<Item>>,
    missed: Vec<(u64, Item)>,
    zero_run: Option<(u64, u64)>,
    target: &'t mut dyn Target,
    stats: Stats,
    inflated: Vec<u8>,
}

impl Converter<'_> {
    fn add(&mut self, host: u64, item: Item) {
        self.pending.entry(host).or_default().push(item);
    }

    fn zero(&mut self, guest: u64, len: u64) -> Result<(), Qcow2Error> {
        let end = (guest + len).min(self.header.size);
        if end <= guest {
            return Ok(());
        }
        match &mut self.zero_run {
            Some((start, run_len)) if *start + *run_len == guest => *run_len = end - *start,
            _ => {
                self.flush_zeros()?;
                self.zero_run = Some((guest, end - guest));
            }
        }
        Ok(())
    }

    fn flush_zeros(&mut self) -> Result<(), Qcow2Error> {
        if let Some((start, len)) = self.zero_run.take() {
            self.target.zero(start, len).map_err(Qcow2Error::Write)?;
            self.stats.zero_bytes += len;
        }
        Ok(())
    }

    fn parse_l1(&mut self, bytes: &[u8]) -> Result<(), Qcow2Error> {
        let region = self.cluster_size * (self.cluster_size / 8);
        for index in 0..self.header.l1_size {
            let guest = index * region;
            if guest >= self.header.size {
                break;
            }
            let Some(raw) = bytes.get(index as usize * 8..index as usize * 8 + 8) else {
                return Err(Qcow2Error::Corrupt("the L1 table is cut short".to_owned()));
            };
            let offset = be64(raw, 0) & 0x00ff_ffff_ffff_fe00;
            if offset == 0 {
                self.zero(guest, region)?;
            } else {
                self.add(offset, Item::L2 { l1_index: index });
            }
        }
        Ok(())
    }

    fn parse_l2(&mut self, l1_index: u64, bytes: &[u8]) -> Result<(), Qcow2Error> {
        if bytes.len() as u64 != self.cluster_size {
            return Err(Qcow2Error::Corrupt(format!(
                "L2 table {l1_index} is cut short"
            )));
        }
        let bits = self.header.cluster_bits;
        let entries = self.cluster_size / 8;
        // Consecutive clusters (host and guest) are merged into one run.
        let mut run: Option<(u64, u64, u64)> = None;
        for index in 0..entries {
            let guest = (l1_index * entries + index) * self.cluster_size;
            if guest >= self.header.size {
                break;
            }
            let entry = be64(bytes, index as usize * 8);
            if entry & (1 << 62) != 0 {
                let shift = 62 - (bits - 8);
                let host = entry & ((1u64 << shift) - 1);
                let sectors = ((entry >> shift) & ((1u64 << (bits - 8)) - 1)) + 1;
                let len = sectors * 512 - (host & 511);
                self.add(host, Item::Compressed { guest, len });
                continue;
            }
            let host = entry & 0x00ff_ffff_ffff_fe00;
            let zero_flag = self.header.version >= 3 && entry & 1 != 0;
            if host == 0 || zero_flag {
                self.zero(guest, self.cluster_size)?;
                continue;
            }
            if !host.is_multiple_of(self.cluster_size) {
                return Err(Qcow2Error::Corrupt(format!(
                    "unaligned data cluster at {host:#x}"
                )));
            }
            let len = self.cluster_size.min(self.header.size - guest);
            match &mut run {
                Some((run_host, run_guest, run_len))
                    if *run_host + *run_len == host
                        && *run_guest + *run_len == guest
                        && *run_len < MAX_RUN =>
                {
                    *run_len += len;
                }
                _ => {
                    if let Some((h, g, l)) = run.take() {
                        self.add(h, Item::Data { guest: g, len: l });
                    }
                    run = Some((host, guest, len));
                }
            }
        }
        if let Some((h, g, l)) = run {
            self.add(h, Item::Data { guest: g, len: l });
        }
        Ok(())
    }

    fn handle(&mut self, item: Item, bytes: &[u8]) -> Result<(), Qcow2Error> {
        match item {
            Item::L1 => self.parse_l1(bytes),
            Item::L2 { l1_index } => self.parse_l2(l1_index, bytes),
            Item::Data { guest, len } => {
                if bytes.len() as u64 != len {
                    return Err(Qcow2Error::Corrupt(format!(
                        "data for guest offset {guest:#x} is cut short"
                    )));
                }
                self.target
                    .write_at(bytes, guest)
                    .map_err(Qcow2Error::Write)?;
                self.stats.data_bytes += len;
                Ok(())
            }
            Item::Compressed { guest, .. } => {
                let want = self.cluster_size.min(self.header.size - guest) as usize;
                self.inflated.clear();
                self.inflated.resize(self.cluster_size as usize, 0);
                let mut inflater = flate2::Decompress::new(false);
                inflater
                    .decompress(bytes, &mut self.inflated, flate2::FlushDecompress::Finish)
                    .map_err(|error| {
                        Qcow2Error::Corrupt(format!(
                            "compressed cluster at guest {guest:#x}: {error}"
                        ))
                    })?;
                if (inflater.total_out() as usize) < want {
                    return Err(Qcow2Error::Corrupt(format!(
                        "compressed cluster at guest {guest:#x} inflates to {} bytes",
                        inflater.total_out()
                    )));
                }
                self.target
                    .write_at(&self.inflated[..want], guest)
                    .map_err(Qcow2Error::Write)?;
                self.stats.data_bytes += want as u64;
                Ok(())
            }
        }
    }
}

/// Converts the qcow2 image read from `source` onto `target` (a disk of `disk_size` bytes).
/// `fetch(offset, len)` reads a byte range of the same image (HTTP Range); it is called only
/// for the rare layouts the single pass cannot finish. `on_progress` gets the bytes written.
pub fn convert<R: Read>(
    source: R,
    fetch: &mut dyn FnMut(u64, u64) -> io::Result<Vec<u8>>,
    target: &mut dyn Target,
    disk_size: u64,
    on_progress: &mut dyn FnMut(&Stats),
) -> Result<Stats, Qcow2Error> {
    let mut stream = Stream {
        inner: source,
        pos: 0,
        window: Vec::with_capacity(WINDOW * 2),
        eof: false,
    };
    let mut scratch = Vec::new();
    let mut bytes = Vec::new();
    stream
        .read_span(0, 112, &mut bytes, &mut scratch)
        .map_err(Qcow2Error::Read)?;
    let header = parse_header(&bytes)?;
    if header.size > disk_size {
        return Err(Qcow2Error::TooLarge {
            virtual_size: header.size,
            disk_size,
        });
    }
    let cluster_size = 1u64 << header.cluster_bits;
    let mut converter = Converter {
        pending: BTreeMap::new(),
        missed: Vec::new(),
        zero_run: None,
        target,
        stats: Stats {
            virtual_size: header.size,
            ..Stats::default()
        },
        inflated: Vec::new(),
        cluster_size,
        header: header.clone(),
    };
    converter.add(header.l1_table_offset, Item::L1);

    // The sequential pass.
    let mut reported = 0u64;
    while let Some((host, items)) = converter.pending.pop_first() {
        for item in items {
            let len = item.host_len(&header);
            let got = stream
                .read_span(host, len, &mut bytes, &mut scratch)
                .map_err(Qcow2Error::Read)?;
            match got {
                Some(()) => converter.handle(item, &bytes)?,
                None => converter.missed.push((host, item)),
            }
        }
        if converter.stats.data_bytes - reported >= 16 * 1024 * 1024 {
            reported = converter.stats.data_bytes;
            on_progress(&converter.stats);
        }
    }
    // Read to the end, so the whole file passes through the checksum.
    while !stream.eof {
        stream
            .skip_to(u64::MAX, &mut scratch)
            .map_err(Qcow2Error::Read)?;
    }

    // What the pass could not place: fetch by range (tables first, then what they name).
    while let Some((host, item)) = converter.missed.pop() {
        let len = item.host_len(&header);
        let data = fetch(host, len).map_err(Qcow2Error::Read)?;
        converter.stats.refetched += 1;
        converter.handle(item, &data)?;
        // Anything the fetched table named is now behind the stream: fetch it too.
        let named = std::mem::take(&mut converter.pending);
        converter.missed.extend(
            named
                .into_iter()
                .flat_map(|(h, items)| items.into_iter().map(move |i| (h, i))),
        );
    }
    converter.flush_zeros()?;
    on_progress(&converter.stats);
    Ok(converter.stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target in memory.
    struct Memory(Vec<u8>);

    impl Target for Memory {
        fn write_at(&mut self, data: &[u8], offset: u64) -> io::Result<()> {
            self.0[offset as usize..offset as usize + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn zero(&mut self, offset: u64, len: u64) -> io::Result<()> {
            self.0[offset as usize..(offset + len) as usize].fill(0);
            Ok(())
        }
    }

    /// Builds a tiny version-3 image with 512-byte clusters by hand: header, L1 at 512, then
    /// for guest cluster 0 a data cluster *before* its L2 table (to exercise the range fetch),
    /// guest cluster 1 zero-flagged, guest cluster 2 after its table.
    fn tiny_image() -> (Vec<u8>, Vec<u8>) {
        let cluster = 512usize;
        let size = 64 * cluster; // one L2 table covers 64 clusters
        // The L2 table sits 10 clusters (5 KiB) after the data it names: beyond the window.
        let l2_cluster = 12;
        let mut image = vec![0u8; 14 * cluster];
        image[..4].copy_from_slice(&MAGIC);
        image[4..8].copy_from_slice(&3u32.to_be_bytes());
        image[20..24].copy_from_slice(&9u32.to_be_bytes());
        image[24..32].copy_from_slice(&(size as u64).to_be_bytes());
        image[36..40].copy_from_slice(&1u32.to_be_bytes());
        image[40..48].copy_from_slice(&512u64.to_be_bytes());
        image[100..104].copy_from_slice(&104u32.to_be_bytes());
        image[512..520].copy_from_slice(&((l2_cluster * cluster) as u64).to_be_bytes());
        // Data for guest cluster 0 at host cluster 2 (long before the L2 table).
        image[2 * cluster..3 * cluster].fill(0xaa);
        // L2: guest 0 → host 2, guest 1 → zero flag, guest 2 → host 13 (after the table).
        let l2 = l2_cluster * cluster;
        image[l2..l2 + 8].copy_from_slice(&(2 * cluster as u64).to_be_bytes());
        image[l2 + 8..l2 + 16].copy_from_slice(&1u64.to_be_bytes());
        image[l2 + 16..l2 + 24].copy_from_slice(&(13 * cluster as u64).to_be_bytes());
        image[13 * cluster..14 * cluster].fill(0xbb);
        let mut expected = vec![0u8; size];
        expected[..cluster].fill(0xaa);
        expected[2 * cluster..3 * cluster].fill(0xbb);
        (image, expected)
    }

    #[test]
    fn clusters_before_their_table_are_fetched_by_range() {
        let (image, expected) = tiny_image();
        let mut disk = Memory(vec![0x55u8; expected.len() + 4096]);
        let mut fetch =
            |offset: u64, len: u64| Ok(image[offset as usize..(offset + len) as usize].to_vec());
        let stats =
            convert(&image[..], &mut fetch, &mut disk, 1 << 20, &mut |_| {}).expect("convert");
        assert_eq!(&disk.0[..expected.len()], &expected[..]);
        assert_eq!(stats.refetched, 1);
        assert_eq!(stats.data_bytes, 1024);
        // Past the virtual size the disk is untouched.
        assert!(disk.0[expected.len()..].iter().all(|b| *b == 0x55));
    }

    #[test]
    fn oversized_and_unsupported_images_are_refused_before_writing() {
        let (mut image, _) = tiny_image();
        let mut disk = Memory(vec![0u8; 1 << 16]);
        let mut fetch = |_: u64, _: u64| -> io::Result<Vec<u8>> { unreachable!() };
        let too_large = convert(&image[..], &mut fetch, &mut disk, 1024, &mut |_| {});
        assert!(matches!(too_large, Err(Qcow2Error::TooLarge { .. })));
        image[8..16].copy_from_slice(&4096u64.to_be_bytes());
        let backing = convert(&image[..], &mut fetch, &mut disk, 1 << 20, &mut |_| {});
        assert!(matches!(backing, Err(Qcow2Error::Unsupported(_))));
        let garbage = convert(
            &b"not an image at all"[..],
            &mut fetch,
            &mut disk,
            1 << 20,
            &mut |_| {},
        );
        assert!(matches!(garbage, Err(Qcow2Error::BadMagic)));
    }
}
