//! The allocator as the engine sees it: jemalloc's statistics, purge,
//! controls and per-thread counters, handed to the engine in the host
//! (`engine::core::host::Memory`), and the start-up tuning.

/// The engine's view of the allocator.
pub fn memory() -> engine::core::host::Memory {
    engine::core::host::Memory {
        probe: jemalloc_probe,
        thread_net: Some(jemalloc_thread_net),
        malloc: Some(engine::core::shared::MallocHooks {
            stats: jemalloc_stats,
            purge: jemalloc_purge,
            mallctl: jemalloc_mallctl,
        }),
    }
}

/// jemalloc's statistics report (MEMORY MALLOC-STATS).
fn jemalloc_stats() -> String {
    extern "C" fn write(opaque: *mut libc::c_void, text: *const libc::c_char) {
        // SAFETY: `opaque` is the Vec passed below, alive for the call;
        // jemalloc hands a NUL-terminated string.
        unsafe {
            let out = &mut *(opaque as *mut Vec<u8>);
            out.extend_from_slice(std::ffi::CStr::from_ptr(text).to_bytes());
        }
    }
    let mut out: Vec<u8> = Vec::new();
    // SAFETY: the callback only appends to `out`; no options string.
    unsafe {
        tikv_jemalloc_sys::malloc_stats_print(
            Some(write),
            (&mut out as *mut Vec<u8>).cast(),
            std::ptr::null(),
        );
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How long jemalloc keeps freed pages before giving them back to the OS.
/// jemalloc's default is 10 s; a keyspace that grows reallocates every
/// stripe's slab several times, and for 10 s the freed copies (a fifth of
/// the data) would stay resident. With the background thread purging, a
/// second keeps pages for reuse by bursts without holding them long.
const DIRTY_DECAY_MS: isize = 1000;

/// Applies `jemalloc-bg-thread` at start-up (Redis's default `yes`: a
/// thread of jemalloc's own gives freed pages back, off the request path)
/// and [`DIRTY_DECAY_MS`] to every arena.
pub fn jemalloc_tune(background_thread: bool) {
    use tikv_jemalloc_ctl::raw;
    // SAFETY: NUL-terminated control names, each written with the type
    // jemalloc documents for it (ssize_t, bool); failures are ignored (an
    // arena index not in use refuses the write).
    unsafe {
        let _ = raw::write(b"arenas.dirty_decay_ms\0", DIRTY_DECAY_MS);
        let arenas: u32 = raw::read(b"arenas.narenas\0").unwrap_or(0);
        for i in 0..arenas {
            let _ = raw::write(format!("arena.{i}.dirty_decay_ms\0").as_bytes(), DIRTY_DECAY_MS);
        }
        if background_thread {
            let _ = raw::write(b"background_thread\0", true);
        }
    }
}

/// Purges every arena's dirty pages (MEMORY PURGE), as Redis's
/// `jemalloc_purge` does.
fn jemalloc_purge() {
    // MALLCTL_ARENAS_ALL is 4096; the control takes no value.
    let name = b"arena.4096.purge\0";
    // SAFETY: a NUL-terminated control name and no input or output.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr().cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}

/// The C library's text for an error number (Redis replies `strerror`).
fn strerror(e: i32) -> String {
    // SAFETY: strerror returns a NUL-terminated static (or thread) string.
    unsafe { std::ffi::CStr::from_ptr(libc::strerror(e)) }.to_string_lossy().into_owned()
}

/// DEBUG MALLCTL / MALLCTL-STR, as Redis's `mallctl_int` and
/// `mallctl_string`: an integer control is tried at 8, 4, 2 and 1 bytes
/// until jemalloc accepts the size; a write-only control is written.
fn jemalloc_mallctl(
    name: &[u8],
    value: Option<&[u8]>,
    string: bool,
) -> engine::core::shared::Mallctl {
    use engine::core::shared::Mallctl;
    use std::ffi::{c_char, c_void, CString};
    let Ok(cname) = CString::new(name) else { return Mallctl::Err(strerror(libc::ENOENT)) };
    let ctl = |old: *mut c_void, oldlen: *mut usize, new: *mut c_void, newlen: usize| {
        // SAFETY: a NUL-terminated name; the pointers are null or point
        // at live locals of the sizes given.
        unsafe { tikv_jemalloc_sys::mallctl(cname.as_ptr(), old, oldlen, new, newlen) }
    };
    if string {
        let mut old: *const c_char = std::ptr::null();
        let mut sz = std::mem::size_of::<*const c_char>();
        let rret = ctl((&raw mut old).cast(), &mut sz, std::ptr::null_mut(), 0);
        if rret != 0 && !(rret == libc::EPERM && value.is_some()) {
            return Mallctl::Err(strerror(rret));
        }
        let mut wret = 0;
        if let Some(v) = value {
            let cv = CString::new(v).unwrap_or_default();
            let mut p = cv.as_ptr();
            wret = if v == b"VOID" {
                ctl(std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), 0)
            } else {
                ctl(std::ptr::null_mut(), std::ptr::null_mut(), (&raw mut p).cast(), sz)
            };
        }
        return if rret == 0 {
            let text = if old.is_null() {
                Vec::new()
            } else {
                // SAFETY: jemalloc returned a NUL-terminated string it owns.
                unsafe { std::ffi::CStr::from_ptr(old) }.to_bytes().to_vec()
            };
            Mallctl::Str(text)
        } else if wret != 0 {
            Mallctl::Err(strerror(wret))
        } else {
            Mallctl::Done
        };
    }
    // Redis 7.0 hands its size variable to jemalloc, which on a size
    // mismatch sets it to the smaller of the two sizes: halved after that,
    // a 4-byte or 1-byte control never matches, and Redis 7.0 answers
    // "Invalid argument" for those. The same here.
    let mut val: i64 = value.and_then(resp::parse_i64).unwrap_or(0);
    let mut old: i64 = 0;
    let mut sz = std::mem::size_of::<i64>();
    while sz > 0 {
        let (newp, newlen) = match value {
            Some(_) => ((&raw mut val).cast::<c_void>(), sz),
            None => (std::ptr::null_mut(), 0),
        };
        let ret = ctl((&raw mut old).cast(), &mut sz, newp, newlen);
        if ret == 0 {
            return Mallctl::Int(old);
        }
        if ret == libc::EPERM
            && value.is_some()
            && ctl(std::ptr::null_mut(), std::ptr::null_mut(), newp, newlen) == 0
        {
            return Mallctl::Done;
        }
        if ret != libc::EINVAL {
            return Mallctl::Err(strerror(ret));
        }
        sz /= 2;
    }
    Mallctl::Err(strerror(libc::EINVAL))
}

/// This thread's bytes allocated minus freed (wrapping), from jemalloc's
/// per-thread counters: two loads through pointers looked up once per
/// thread (the maxmemory check between two `stats.allocated` readings).
fn jemalloc_thread_net() -> u64 {
    use tikv_jemalloc_ctl::thread::{allocatedp, deallocatedp, ThreadLocal};
    thread_local! {
        static COUNTERS: Option<(ThreadLocal<u64>, ThreadLocal<u64>)> =
            allocatedp::read().ok().zip(deallocatedp::read().ok());
    }
    COUNTERS.with(|c| c.map_or(0, |(a, d)| a.get().wrapping_sub(d.get())))
}

/// What the allocator really hands out for a request of `n` bytes (its
/// size class): what `used_memory` counts for a buffer of capacity `n`.
pub(crate) fn allocation_size(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    // SAFETY: nallocx only computes a size (no memory is touched); it is
    // defined for any size but 0, excluded above.
    unsafe { tikv_jemalloc_sys::nallocx(n, 0) }
}

/// Memory figures for INFO from jemalloc's statistics (`used_memory` is
/// what the allocator has handed out, as Redis reports it).
fn jemalloc_probe() -> engine::core::shared::MemStats {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    let allocated = stats::allocated::read().unwrap_or(0) as u64;
    // Freed blocks a thread cache keeps count as allocated for jemalloc;
    // Redis's zmalloc counter frees them at once, and eviction measures
    // what it freed that way, so they are taken off.
    // SAFETY: the name is NUL-terminated and the value a size_t.
    let cached = unsafe {
        tikv_jemalloc_ctl::raw::read::<usize>(b"stats.arenas.4096.tcache_bytes\0").unwrap_or(0)
    } as u64;
    let used = allocated.saturating_sub(cached);
    let active = stats::active::read().unwrap_or(0) as u64;
    let resident = stats::resident::read().unwrap_or(0) as u64;
    let rss = engine::core::shared::statm_probe().used_memory_rss;
    engine::core::shared::MemStats {
        used_memory: used,
        used_memory_rss: rss,
        allocator_allocated: allocated,
        allocator_active: active,
        allocator_resident: resident,
        allocator: "jemalloc-5.3.0",
    }
}
