//! Giving freed heap back to the operating system after a catalog swap, and after many API
//! connections closed.
//!
//! Loading and building a catalog allocates several times the snapshot's size (the rows, the
//! `CatalogData`, the compiled snapshot), and the previous snapshot is freed after the swap.
//! glibc keeps such memory in its arenas instead of returning it, so without a trim the
//! process keeps the high-water mark of every reload: with the 43 MB benchmark catalog, about
//! twice the resident memory after one published change (P5 in `docs/decisions.md`). The same
//! holds for connections: each holds its read buffers and the part of its body that arrived,
//! and a burst of slow or stalled clients (D25) would leave its high-water mark resident long
//! after they were closed. Other allocators return memory on their own; there this is a no-op.

use std::sync::Weak;
use std::time::Duration;

/// How often [`release_once_freed`] checks whether the replaced snapshot is gone.
pub const RELEASE_POLL: Duration = Duration::from_millis(50);
/// How long [`release_once_freed`] waits for it at most before releasing anyway: a few of the
/// workers' sweep intervals (1 s), so a request that keeps the old snapshot for long does not
/// keep the load's own garbage resident.
pub const RELEASE_WAIT_MAX: Duration = Duration::from_secs(5);

/// Calls `release` (off the async workers) once `previous`, the snapshot a reload replaced, has
/// been freed, or after `wait_max`. The workers hold the published snapshot through their own
/// `Rc` and let go of a replaced one on their next request or within their sweep interval, so
/// the replaced snapshot is usually freed after the swap, not at it: a release at the swap
/// would leave it resident (P5).
pub async fn release_once_freed<T: Send + Sync + 'static>(
    previous: Weak<T>,
    poll: Duration,
    wait_max: Duration,
    release: fn(),
) {
    let deadline = tokio::time::Instant::now() + wait_max;
    while previous.strong_count() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(poll).await;
    }
    drop(previous);
    let _ = tokio::task::spawn_blocking(release).await;
}

/// Every `every`, calls `release` (off the async workers) when at least `at_least` API
/// connections closed since the last release (`closed` counts them): their buffers are then
/// free heap that glibc would otherwise keep. Runs until the process ends.
pub async fn release_after_closed_connections(
    closed: impl Fn() -> u64,
    every: Duration,
    at_least: u64,
    release: fn(),
) {
    let mut released_at = closed();
    loop {
        tokio::time::sleep(every).await;
        let now = closed();
        if now.saturating_sub(released_at) >= at_least {
            released_at = now;
            let _ = tokio::task::spawn_blocking(release).await;
        }
    }
}

/// How often [`release_after_closed_connections`] looks, and how many closed connections
/// make it release.
pub const CONNECTIONS_RELEASE_EVERY: Duration = Duration::from_secs(5);
/// See [`CONNECTIONS_RELEASE_EVERY`].
pub const CONNECTIONS_RELEASE_AT_LEAST: u64 = 256;

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

#[cfg(test)]
mod release_tests {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    static RELEASES: AtomicUsize = AtomicUsize::new(0);

    fn count_release() {
        RELEASES.fetch_add(1, Ordering::SeqCst);
    }

    static CONNECTION_RELEASES: AtomicUsize = AtomicUsize::new(0);

    fn count_connection_release() {
        CONNECTION_RELEASES.fetch_add(1, Ordering::SeqCst);
    }

    #[tokio::test(start_paused = true)]
    async fn memory_is_released_after_enough_connections_closed() {
        static CLOSED: AtomicU64 = AtomicU64::new(10);
        let task = tokio::spawn(super::release_after_closed_connections(
            || CLOSED.load(Ordering::SeqCst),
            Duration::from_secs(5),
            100,
            count_connection_release,
        ));
        let releases = || CONNECTION_RELEASES.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(releases(), 0, "nothing closed");
        CLOSED.store(109, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(releases(), 0, "99 closed: not yet");
        CLOSED.store(110, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(releases(), 1, "100 closed since the start");
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(releases(), 1, "counted from the last release");
        task.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memory_is_released_once_the_replaced_snapshot_is_freed_or_at_the_deadline() {
        // A worker still holds the replaced snapshot: nothing is released until it lets go.
        let held = Arc::new(vec![0u8; 1024]);
        let task = tokio::spawn(super::release_once_freed(
            Arc::downgrade(&held),
            Duration::from_millis(5),
            Duration::from_secs(30),
            count_release,
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            RELEASES.load(Ordering::SeqCst),
            0,
            "released while still held"
        );
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("released soon after the last holder let go")
            .unwrap();
        assert_eq!(RELEASES.load(Ordering::SeqCst), 1);

        // A holder that never lets go delays the release by the deadline only.
        let kept = Arc::new(vec![0u8; 1024]);
        let started = std::time::Instant::now();
        super::release_once_freed(
            Arc::downgrade(&kept),
            Duration::from_millis(5),
            Duration::from_millis(200),
            count_release,
        )
        .await;
        assert_eq!(RELEASES.load(Ordering::SeqCst), 2);
        assert!(started.elapsed() >= Duration::from_millis(200));
        drop(kept);
    }
}

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
