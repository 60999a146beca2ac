//! SQLite's own allocations on mimalloc, with its allocation statistics off, and no transparent
//! huge pages: settings of the whole process that a binary chooses before it opens any
//! database (feature `mimalloc`; the library never makes them on its own, as it never sets
//! Rust's allocator).
//!
//! The Rust allocator does not reach SQLite's C code: under a bulk write SQLite still called
//! glibc's `malloc` and, to keep its statistics, took a mutex and asked each block's size around
//! every allocation, about a tenth of the writer thread's time (docs/benchmarks.md, "SQLite's
//! allocations"). With these settings `sqlite3_memory_used` reads 0 and a soft heap limit
//! has no effect; nothing here uses either.
//!
//! `unsafe` here is SQLite's C API (`sqlite3_config`) and mimalloc's, each block with what
//! makes it sound.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use rusqlite::ffi;

// The methods SQLite calls: every pointer it passes came from these, so from mimalloc.

unsafe extern "C" fn x_malloc(n: c_int) -> *mut c_void {
    // SAFETY: any size; SQLite never asks for a negative one (0 gives a unique pointer).
    unsafe { libmimalloc_sys::mi_malloc(usize::try_from(n).unwrap_or(0)) }
}

unsafe extern "C" fn x_free(p: *mut c_void) {
    // SAFETY: `p` is null or from `x_malloc`/`x_realloc`, freed once (SQLite's contract).
    unsafe { libmimalloc_sys::mi_free(p) }
}

unsafe extern "C" fn x_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    // SAFETY: as for `x_free`.
    unsafe { libmimalloc_sys::mi_realloc(p, usize::try_from(n).unwrap_or(0)) }
}

unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
    // SAFETY: as for `x_free`, and still allocated.
    let n = unsafe { libmimalloc_sys::mi_usable_size(p) };
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn x_roundup(n: c_int) -> c_int {
    let n = usize::try_from(n).unwrap_or(0);
    // SAFETY: a pure function of a size.
    c_int::try_from(unsafe { libmimalloc_sys::mi_good_size(n) }).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_shutdown(_: *mut c_void) {}

/// Makes SQLite allocate with mimalloc and stop keeping allocation statistics, for the whole
/// process. `Err` with `SQLITE_MISUSE` when the process has another thread (Linux: its tasks in
/// `/proc/self/task`; elsewhere it cannot be told, so always), or with SQLite's result code when
/// SQLite refused, which it does once it has been initialized (a database opened before this
/// call). SQLite then keeps its defaults and works as before, so a caller may log the refusal
/// and go on.
///
/// SQLite's configuration must not run while another thread calls SQLite. A process with one
/// thread, the caller, cannot, so the refusal above makes this function sound to call at any
/// time; it only succeeds at the start of `main`, before any runtime or other thread starts
/// (where the two binaries of this workspace call it).
pub fn sqlite_allocates_with_mimalloc() -> Result<(), c_int> {
    if !only_thread() {
        return Err(ffi::SQLITE_MISUSE);
    }
    let methods = ffi::sqlite3_mem_methods {
        xMalloc: Some(x_malloc),
        xFree: Some(x_free),
        xRealloc: Some(x_realloc),
        xSize: Some(x_size),
        xRoundup: Some(x_roundup),
        xInit: Some(x_init),
        xShutdown: Some(x_shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: the methods are valid for SQLite's whole life (mimalloc's functions, which take
    // any pointer mimalloc gave, and null); SQLite copies the struct, which need not outlive
    // the call; before initialization (the documented precondition) nothing else runs in
    // SQLite, and after it SQLite refuses without reading the argument.
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MALLOC, &methods as *const _) };
    if rc != ffi::SQLITE_OK {
        return Err(rc);
    }
    // SAFETY: as above; the one argument is an int.
    match unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int) } {
        ffi::SQLITE_OK => Ok(()),
        rc => Err(rc),
    }
}

/// Whether the calling thread is the process's only one (and no other can start meanwhile:
/// only a running thread can start one). `false` where that cannot be read.
fn only_thread() -> bool {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Stops the kernel from backing this process's memory with transparent huge pages, from now
/// on (`prctl(PR_SET_THP_DISABLE)`; Linux only, elsewhere nothing to do). mimalloc asks for them
/// (`madvise(MADV_HUGEPAGE)`) on the regions it reserves, so each first touch zeroed 2 MiB:
/// the CLI's run of 5,000 commands peaked at 66 MB instead of 43, and an import 55-60 MB higher
/// (docs/benchmarks.md, "Transparent huge pages"). Child processes inherit the setting.
pub fn without_transparent_huge_pages() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::thread::disable_transparent_huge_pages(true)?;
    Ok(())
}

/// What both binaries do first in `main`, before their runtime starts:
/// [`sqlite_allocates_with_mimalloc`] and [`without_transparent_huge_pages`], each refusal
/// logged as a warning, since the process works as before without them.
pub fn set_up_process() {
    if let Err(rc) = sqlite_allocates_with_mimalloc() {
        tracing::warn!(code = rc, "SQLite kept its own allocator");
    }
    if let Err(e) = without_transparent_huge_pages() {
        tracing::warn!(error = %e, "transparent huge pages stay on");
    }
}
