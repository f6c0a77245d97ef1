//! The allocator settings of a process that runs for years: memory freed after
//! a burst goes back to the system instead of staying in the process.
//!
//! glibc's malloc raises its mmap threshold to the size of the largest block
//! freed so far (up to 32 MiB), and its trim threshold with it. The store's
//! compaction reads parts of up to 50,000 samples (the store's `COMPACT_PART`), so
//! after the first one every later part is carved from a heap that only grows,
//! and one arena per thread keeps its own peak: the RSS of an agent with 1,000
//! devices crept by more than 20 MB in its first minutes. [`tune`] fixes the
//! thresholds (large blocks are mapped and unmapped again; a free top of the
//! heap above 1 MiB is given back) and bounds the arenas; [`give_back`] returns
//! the free pages inside the heaps after a burst.
//!
//! On other C libraries both do nothing. Nothing here allocates, logs, or
//! knows any other module.

/// Blocks at least this large are mapped on their own and unmapped when freed.
/// A commit's buffers (about 300 KiB at 1,000 devices) stay below it: they
/// come from the heap and reuse its free memory every second, where a mapping
/// of their own would take fresh zeroed pages from the kernel each time.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 1024 * 1024;
/// A free top of a heap larger than this is given back at once.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 1024 * 1024;
/// Arenas at most: the agent has a few threads that allocate (the async
/// workers, the store writer, short-lived readers), and each arena keeps its
/// own free memory.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENA_MAX: libc::c_int = 2;

/// Sets the allocator's thresholds for the whole process. Call once, first
/// thing in `main`, before any thread starts.
#[allow(unsafe_code)]
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc's parameters; it is called before
    // any other thread exists, and a refused setting (return 0) leaves
    // glibc's default in place, which is safe.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
    }
}

/// Gives the free pages inside the allocator's heaps back to the system. For
/// after a burst of allocation (a compaction); it takes the arenas' locks
/// for a moment, so not for every small operation.
#[allow(unsafe_code)]
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim is thread-safe (it locks each arena) and touches
    // only memory malloc owns and has marked free.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    /// Whether the block at `ptr`, from malloc, is mapped on its own: glibc
    /// keeps a chunk's size in the word before the pointer it hands out, with
    /// bit 1 (`IS_MMAPPED`) set for a chunk of its own mapping. The block's own
    /// header, unlike `mallinfo2`'s process-wide count, is not moved by the
    /// tests that allocate and free beside this one.
    #[allow(unsafe_code)]
    fn mapped_on_its_own(ptr: *const u8) -> bool {
        const IS_MMAPPED: usize = 0x2;
        // SAFETY: `ptr` came from malloc (Rust's System allocator, alignment
        // 1) and is live; the size word before it is part of the same chunk
        // and is written only by malloc and free of that chunk.
        let size = unsafe { std::ptr::read(ptr.cast::<usize>().sub(1)) };
        size & IS_MMAPPED != 0
    }

    /// After a large block is freed, glibc by itself would carve the next one
    /// of that size from the heap (its threshold follows the largest free);
    /// tuned, it is mapped again, so freeing it gives the memory back.
    #[test]
    fn large_blocks_stay_mapped_after_one_was_freed() {
        super::tune();
        const SIZE: usize = 4 << 20;
        let first = std::hint::black_box(vec![1u8; SIZE]);
        assert!(mapped_on_its_own(first.as_ptr()), "the first block");
        drop(first);
        let second = std::hint::black_box(vec![2u8; SIZE]);
        assert!(
            mapped_on_its_own(second.as_ptr()),
            "a {SIZE}-byte block after a freed one is carved from the heap, not mapped on its own"
        );
        // A commit's buffers stay in the heap.
        let small = std::hint::black_box(vec![3u8; 300 << 10]);
        assert!(!mapped_on_its_own(small.as_ptr()), "a 300 KiB block");
        drop((second, small));
        super::give_back();
    }
}
