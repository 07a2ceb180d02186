//! `cargo xtask`: the one entry point for chores.
fn main() {}
