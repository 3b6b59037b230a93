//! Giving freed memory back to the system: glibc keeps the pages of freed allocations in
//! its arenas (one per thread that allocated), so after a burst (a million tasks failed
//! at once, the last hour's events read back at start) hundreds of MB, or tens, would
//! stay resident without it.

/// Has the allocator give the whole free pages of every arena back to the system.
pub fn return_freed_memory() {
    // SAFETY: malloc_trim(3) only releases free memory of the allocator's arenas.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}
