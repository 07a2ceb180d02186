//! `ferric`: the server, and later the CLI, ramdisk builder and lab.
fn main() {}
