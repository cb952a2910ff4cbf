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

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    fn resident_kib() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// Memory freed between blocks that stay alive (as after a catalog swap, with the new
    /// snapshot allocated among the old one's pieces) is kept by glibc until the trim.
    #[test]
    fn freed_memory_between_live_blocks_goes_back_to_the_os() {
        // A worker thread, as on the server: its own arena.
        std::thread::spawn(|| {
            let blocks: Vec<Vec<u8>> = (0..40_960u32).map(|i| vec![i as u8; 4096]).collect();
            let kept: Vec<Vec<u8>> = blocks
                .into_iter()
                .enumerate()
                .filter(|(i, _)| i % 64 == 0)
                .map(|(_, b)| b)
                .collect();
            let before = resident_kib();
            super::release_free_memory();
            let after = resident_kib();
            assert!(
                before.saturating_sub(after) > 100 * 1024,
                "160 MiB allocated, 157 MiB freed: resident {before} KiB before the trim, {after} KiB after"
            );
            assert_eq!(kept.len(), 640);
        })
        .join()
        .unwrap();
    }
}
