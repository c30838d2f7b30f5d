//! The benchmark's allocation counters (feature `count-allocations`, which only the benchmark
//! turns on): a global allocator over the system's that counts every allocation and its
//! bytes, and SIGUSR1, which prints the totals as one line on stderr:
//! `agentd allocations: count=N bytes=N live=N`. A reallocation counts as one allocation of
//! its new size (a growing buffer costs what it copies); `live` is the bytes allocated and not
//! yet freed, which tells the heap the daemon holds from the RSS the allocator keeps.
//!
//! Hand-written rather than a crate (`stats_alloc`): it is the standard library's
//! `GlobalAlloc` example with three counters.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

static COUNT: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

struct Counting;

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated(size: usize) {
    COUNT.fetch_add(1, Relaxed);
    BYTES.fetch_add(size as u64, Relaxed);
    LIVE.fetch_add(size as i64, Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// counters are atomics and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocated(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract, which is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        allocated(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        allocated(new_size);
        LIVE.fetch_sub(layout.size() as i64, Relaxed);
        // SAFETY: `ptr` and `layout` came from this allocator, which is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Relaxed);
        // SAFETY: as for `realloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Prints the counters on stderr at every SIGUSR1.
pub(crate) async fn report_on_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
        tracing::error!("cannot install the SIGUSR1 handler: allocations are not reported");
        return;
    };
    while usr1.recv().await.is_some() {
        eprintln!(
            "agentd allocations: count={} bytes={} live={}",
            COUNT.load(Relaxed),
            BYTES.load(Relaxed),
            LIVE.load(Relaxed)
        );
    }
}
