//! The process title (`set-proc-title`, `proc-title-template`): the bytes
//! that held the process's arguments are rewritten, which is where `ps`
//! and `/proc/PID/cmdline` read them, as Redis's setproctitle.c does. The
//! environment strings that follow the arguments are copied to the heap
//! first, so that a title can also use their room.
//!
//! Only the server binary calls [`init`] (a server started inside another
//! program, such as the tests, leaves that program's title alone), and
//! only on Linux with glibc, which hands `argv` to `.init_array`
//! functions; elsewhere the title stays the command line.

/// The engine's hook, when [`init`] found the argument area.
pub fn hook() -> Option<engine::core::host::ProcTitle> {
    imp::exec_name().map(|exec_name| engine::core::host::ProcTitle { exec_name, set: imp::set })
}

/// Finds the argument area and moves the environment out of its way.
/// Called first thing in `main`, before any other thread runs (the
/// environment pointer is replaced).
pub fn init() {
    imp::init();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    use std::ffi::{c_char, c_int, CStr};
    use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
    use std::sync::{Mutex, OnceLock};

    static ARGC: AtomicI32 = AtomicI32::new(0);
    static ARGV: AtomicPtr<*mut c_char> = AtomicPtr::new(std::ptr::null_mut());

    /// glibc calls the executable's `.init_array` functions with `argc`,
    /// `argv` and `envp` (the standard library reads its arguments the
    /// same way).
    #[used]
    #[link_section = ".init_array"]
    static CAPTURE: extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_char) = capture;

    extern "C" fn capture(argc: c_int, argv: *mut *mut c_char, _envp: *mut *mut c_char) {
        ARGC.store(argc, Ordering::Relaxed);
        ARGV.store(argv, Ordering::Relaxed);
    }

    extern "C" {
        static mut environ: *mut *mut c_char;
    }

    /// The writable area: from the first argument to the end of the last
    /// string contiguous with it, and where the last argument's NUL was.
    struct Area {
        base: usize,
        end: usize,
        nul: usize,
    }

    static AREA: Mutex<Option<Area>> = Mutex::new(None);
    static EXEC: OnceLock<String> = OnceLock::new();

    pub fn exec_name() -> Option<String> {
        EXEC.get().cloned()
    }

    pub fn init() {
        let mut area = AREA.lock().unwrap_or_else(|e| e.into_inner());
        if area.is_some() {
            return;
        }
        let argc = ARGC.load(Ordering::Relaxed);
        let argv = ARGV.load(Ordering::Relaxed);
        if argv.is_null() || argc < 1 {
            return;
        }
        // SAFETY: `argv` is the kernel's argument vector as glibc handed
        // it to `capture`: `argc` pointers to NUL-terminated strings, laid
        // out one after the other and followed by the environment's; the
        // environment array is NULL-terminated. Nothing else runs yet.
        unsafe {
            let first = *argv;
            if first.is_null() {
                return;
            }
            let base = first as usize;
            let mut end = base;
            for i in 0..argc as usize {
                let p = *argv.add(i);
                if p.is_null() || p as usize != end {
                    break;
                }
                end = p as usize + CStr::from_ptr(p).to_bytes().len() + 1;
            }
            let nul = end - 1;
            let _ = EXEC.set(CStr::from_ptr(first).to_string_lossy().into_owned());
            // The environment's strings that follow join the area; the
            // process keeps reading copies of them.
            let env = environ;
            if !env.is_null() {
                let mut copies: Vec<*mut c_char> = Vec::new();
                let mut i = 0;
                while !(*env.add(i)).is_null() {
                    let p = *env.add(i);
                    let s = CStr::from_ptr(p);
                    if p as usize == end {
                        end += s.to_bytes().len() + 1;
                    }
                    copies.push(s.to_owned().into_raw());
                    i += 1;
                }
                copies.push(std::ptr::null_mut());
                // Leaked on purpose: the environment lives as long as the
                // process.
                environ = Box::leak(copies.into_boxed_slice()).as_mut_ptr();
            }
            *area = Some(Area { base, end, nul });
        }
    }

    pub fn set(title: &str) {
        let area = AREA.lock().unwrap_or_else(|e| e.into_inner());
        let Some(a) = area.as_ref() else { return };
        let room = a.end - a.base;
        let n = title.len().min(room - 1);
        // SAFETY: [base, end) is the argument area (and the environment
        // strings moved out of it) found by `init`; nothing else reads or
        // writes it since, under this lock.
        unsafe {
            let base = a.base as *mut u8;
            std::ptr::write_bytes(base, 0, room);
            std::ptr::copy_nonoverlapping(title.as_ptr(), base, n);
            // Linux reads the title up to its first NUL only while the
            // byte that ended the last argument is not a NUL (else it
            // reads the arguments as NUL-separated strings).
            let end_of_title = a.base + n;
            if end_of_title < a.nul {
                *(a.nul as *mut u8) = b'.';
            } else if end_of_title == a.nul && a.nul + 1 < a.end {
                *(a.nul as *mut u8) = b' ';
            }
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    pub fn exec_name() -> Option<String> {
        None
    }

    pub fn init() {}

    pub fn set(_: &str) {}
}
