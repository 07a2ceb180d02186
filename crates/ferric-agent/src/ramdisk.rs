//! `ferric ramdisk build`.
