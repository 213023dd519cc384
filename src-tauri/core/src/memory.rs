//! The process's allocator setting for flat memory under a long import. The app applies it at
//! startup ([`keep_large_buffers_out_of_the_heap`]); the import benchmark's child does the same.
//!
//! Intake works with multi-megabyte pixel buffers (a 1600×1200 photo is 5.8 MB decoded) and a
//! Gemini request carries a few hundred KB of base64. glibc serves blocks at or above its mmap
//! threshold with their own mappings, returned to the OS on free. By default that threshold adapts
//! upward to the largest block freed (up to 32 MiB): after the first photo, the pixel buffers come
//! from the heap arenas (one per thread), and freed memory lingers there until a trim. The resident
//! size then depends on how frees interleave, and its peak creeps up with the length of a run
//! (measured: 82 MiB for 300 photos, 90–95 MiB for 3000). With a fixed threshold the peak is what
//! is actually live. The cost is an mmap/munmap pair per large block, a few per photo.
//!
//! glibc also gives threads their own arenas as they contend (up to 8 per core), and each keeps
//! what was freed in it; the blocking pool's threads come and go, so how many arenas hold memory
//! depends on the run. Two arenas keep that part bounded too (peaks of 58–63 MiB for 300 photos
//! became 61–62 MiB); with a handful of busy threads the contention is negligible.

/// Blocks of at least this size get their own mapping.
pub const LARGE_BLOCK_BYTES: usize = 256 * 1024;
/// At most this many malloc arenas.
pub const ARENAS: usize = 2;

/// Fixes glibc's mmap threshold at [`LARGE_BLOCK_BYTES`] (which also stops it from adapting) and
/// caps its arenas at [`ARENAS`]. Call it once, early, before other threads allocate. A no-op on
/// other platforms and C libraries.
pub fn keep_large_buffers_out_of_the_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes the allocator's parameters; both values fit a c_int.
        let ok = unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES as libc::c_int)
                + libc::mallopt(libc::M_ARENA_MAX, ARENAS as libc::c_int)
        };
        if ok != 2 {
            tracing::warn!("could not tune the allocator (mmap threshold, arenas)");
        }
    }
}
