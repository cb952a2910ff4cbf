//! Giving freed heap back to the operating system after a catalog swap.
//!
//! Loading and building a catalog allocates several times the snapshot's size (the rows, the
//! `CatalogData`, the compiled snapshot), and the previous snapshot is freed after the swap.
//! glibc keeps such memory in its arenas instead of returning it, so without a trim the
//! process keeps the high-water mark of every reload: measured with the 43 MB benchmark
//! catalog, 159 MiB resident after one published change instead of 79 MiB
//! (`docs/benchmarks.md`). Other allocators return memory on their own; there this is a
//! no-op.

/// Returns free heap pages to the operating system (glibc `malloc_trim(0)`). Call it off the
/// async workers: it walks every arena.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_free_memory() {
    // SAFETY: `malloc_trim` has no preconditions; it only releases memory the allocator holds
    // as free, under the allocator's own locks, and never touches live allocations.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Returns free heap pages to the operating system (nothing to do with this allocator).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() {}
