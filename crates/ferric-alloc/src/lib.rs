//! Hands the memory the process's two allocators keep after it was freed back to the system,
//! for the server's idle sweep (issue 26: an idle server at 10,000 nodes within 40 MB).
//!
//! Why it is needed: Rust code allocates with mimalloc (`ferric`'s global allocator), which
//! keeps some freed pages in its thread-local heaps, and SQLite's C code with glibc's
//! `malloc`, whose main heap only shrinks from its top: the page caches and statements of
//! closed or shrunk connections leave free holes in the middle that stay resident until
//! `malloc_trim` returns them (~5 MB at 10,000 nodes, measured in `docs/benchmarks.md`).
//!
//! Why here: the workspace forbids `unsafe` code; these two calls are foreign functions, so
//! this crate alone denies it instead and allows it on the two calls below. Neither touches
//! memory the caller holds: each only gives back pages no allocation uses.

/// Returns the free memory both allocators hold to the system. Cheap enough for a sweep every
/// few seconds (a walk over glibc's heap of a few MB, mimalloc's collection of this thread's
/// heap and of abandoned pages), but meant for idle moments: the next allocations fault their
/// pages in again.
#[allow(
    unsafe_code,
    reason = "foreign functions; see the module's documentation"
)]
pub fn release_free_memory() {
    // SAFETY: `mi_collect` takes no pointer; mimalloc collects only pages without live
    // blocks, from any thread.
    unsafe {
        mi_collect(true);
    }
    trim_malloc();
}

#[allow(
    unsafe_code,
    reason = "foreign functions; see the module's documentation"
)]
// SAFETY: the declaration matches `mimalloc.h`: `void mi_collect(bool force)`.
unsafe extern "C" {
    /// mimalloc's collection (`mimalloc.h`); `libmimalloc-sys` declares it only with its
    /// `extended` feature, which would pull another crate in for its C types.
    fn mi_collect(force: bool);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(
    unsafe_code,
    reason = "foreign functions; see the module's documentation"
)]
fn trim_malloc() {
    // SAFETY: `malloc_trim` takes no pointer; glibc returns only free pages of its arenas,
    // under each arena's lock.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other C libraries have no `malloc_trim`; what they keep stays.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_malloc() {}

#[cfg(test)]
mod tests {
    // As in the `ferric` binary; it also links the mimalloc library `mi_collect` is in.
    #[global_allocator]
    static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

    #[test]
    fn releasing_free_memory_leaves_live_allocations_alone() {
        let kept: Vec<Vec<u8>> = (0..1_000)
            .map(|n| vec![u8::try_from(n % 251).unwrap_or(0); 4096])
            .collect();
        drop((0..1_000).map(|_| vec![0_u8; 8192]).collect::<Vec<_>>());
        super::release_free_memory();
        super::release_free_memory();
        for (n, block) in kept.iter().enumerate() {
            assert!(block.iter().all(|&byte| usize::from(byte) == n % 251));
        }
    }
}
