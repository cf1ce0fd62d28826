//! NVTX ranges (`warmup`, `measure`, `batch N`) for any profiler to cut the
//! measured window out of a trace.
//!
//! The NVTX library is loaded at run time with `dlopen`
//! (`libnvtx3interop.so.1` from the CUDA 13 wheels, or the older
//! `libnvToolsExt.so.1`); where neither is found the ranges are still
//! recorded in-process (for the CUPTI trace) and nothing else happens.

use std::ffi::{c_char, c_int, CString};

type PushFn = unsafe extern "C" fn(*const c_char) -> c_int;
type PopFn = unsafe extern "C" fn() -> c_int;

const LIBRARIES: [&str; 3] = [
    "libnvtx3interop.so.1",
    "libnvToolsExt.so.1",
    "libnvToolsExt.so",
];

/// A closed range on the recorder's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub name: String,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Emits NVTX push/pop pairs and, when given a clock, records the ranges.
pub struct Nvtx {
    functions: Option<(PushFn, PopFn)>,
    clock: Option<Box<dyn Fn() -> u64 + Send>>,
    open: Vec<(String, u64)>,
    closed: Vec<Range>,
}

impl Nvtx {
    /// Loads the NVTX library if there is one. With `clock`, every range is
    /// also kept, timed by it, for [`Nvtx::take_ranges`].
    pub fn new(clock: Option<Box<dyn Fn() -> u64 + Send>>) -> Nvtx {
        Nvtx {
            functions: load(),
            clock,
            open: Vec::new(),
            closed: Vec::new(),
        }
    }

    /// Whether an NVTX library was found.
    pub fn loaded(&self) -> bool {
        self.functions.is_some()
    }

    pub fn push(&mut self, name: &str) {
        if let Some((push, _)) = self.functions {
            if let Ok(text) = CString::new(name) {
                // SAFETY: `push` is nvtxRangePushA from the loaded library and
                // `text` is a NUL-terminated string that outlives the call.
                unsafe { push(text.as_ptr()) };
            }
        }
        let start = self.clock.as_ref().map_or(0, |clock| clock());
        self.open.push((name.to_owned(), start));
    }

    pub fn pop(&mut self) {
        if let Some((_, pop)) = self.functions {
            // SAFETY: nvtxRangePop takes no arguments; an unmatched pop is
            // ignored by NVTX, and `open` keeps pushes and pops paired anyway.
            unsafe { pop() };
        }
        if let Some((name, start_ns)) = self.open.pop() {
            let end_ns = self.clock.as_ref().map_or(0, |clock| clock());
            if self.clock.is_some() {
                self.closed.push(Range {
                    name,
                    start_ns,
                    end_ns,
                });
            }
        }
    }

    /// Runs `f` inside a range named `name`.
    pub fn range<T>(&mut self, name: &str, f: impl FnOnce(&mut Nvtx) -> T) -> T {
        self.push(name);
        let out = f(self);
        self.pop();
        out
    }

    /// The ranges recorded so far (empty without a clock).
    pub fn take_ranges(&mut self) -> Vec<Range> {
        std::mem::take(&mut self.closed)
    }
}

fn load() -> Option<(PushFn, PopFn)> {
    LIBRARIES.iter().find_map(|name| {
        let name = CString::new(*name).ok()?;
        // SAFETY: dlopen/dlsym with valid C strings; the handle is never
        // closed, so the function pointers stay valid for the process.
        unsafe {
            let handle = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL);
            if handle.is_null() {
                return None;
            }
            let push = libc::dlsym(handle, c"nvtxRangePushA".as_ptr());
            let pop = libc::dlsym(handle, c"nvtxRangePop".as_ptr());
            if push.is_null() || pop.is_null() {
                return None;
            }
            Some((
                std::mem::transmute::<*mut libc::c_void, PushFn>(push),
                std::mem::transmute::<*mut libc::c_void, PopFn>(pop),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn nested_ranges_are_recorded_with_the_clock() {
        let ticks = Arc::new(AtomicU64::new(0));
        let clock = Arc::clone(&ticks);
        let mut nvtx = Nvtx::new(Some(Box::new(move || {
            clock.fetch_add(10, Ordering::SeqCst)
        })));
        nvtx.range("measure", |n| {
            n.range("batch 0", |_| ());
            n.range("batch 1", |_| ());
        });
        let ranges = nvtx.take_ranges();
        let names: Vec<_> = ranges.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["batch 0", "batch 1", "measure"]);
        assert_eq!((ranges[2].start_ns, ranges[2].end_ns), (0, 50));
        assert_eq!((ranges[0].start_ns, ranges[0].end_ns), (10, 20));
    }

    #[test]
    fn without_a_clock_nothing_is_kept() {
        let mut nvtx = Nvtx::new(None);
        nvtx.range("warmup", |_| ());
        assert!(nvtx.take_ranges().is_empty());
    }
}
