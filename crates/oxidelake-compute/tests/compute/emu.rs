//! The emulated CUDA driver's own entry points (tools/cuda-emu/src/emu_api.h), found in
//! the loaded `libcuda`. On a real driver they do not exist: each accessor is `None`
//! and the tests that need one say so and return.

use std::ffi::{CString, c_char, c_int};
use std::sync::OnceLock;

/// The loaded libcuda, kept for the life of the process.
fn library() -> Option<&'static libloading::Library> {
    static LIBRARY: OnceLock<Option<&'static libloading::Library>> = OnceLock::new();
    *LIBRARY.get_or_init(|| {
        // SAFETY: loading libcuda runs its initialisers; it is the library cudarc loads
        // (the same name, so the same already-loaded object), and it stays loaded for the
        // life of the process because the handle is leaked below.
        let library = unsafe { libloading::Library::new("libcuda.so") }.ok()?;
        Some(&*Box::leak(Box::new(library)))
    })
}

/// The symbol `name` (NUL-terminated) of the emulator, typed as `T`.
///
/// # Safety
/// `T` must be the function type the emulator exports under `name`.
unsafe fn symbol<T: Copy>(name: &[u8]) -> Option<T> {
    let library = library()?;
    // SAFETY: the caller guarantees `T` is the symbol's type.
    unsafe { library.get::<T>(name) }.ok().map(|s| *s)
}

type SetFault = unsafe extern "C" fn(*const c_char) -> c_int;
type CallCount = unsafe extern "C" fn(*const c_char) -> u64;
type Trace = unsafe extern "C" fn(c_int);
type TraceText = unsafe extern "C" fn(*mut c_char, usize) -> usize;

/// `oxide_emu_set_fault`, if the loaded libcuda is the emulator.
fn set_fault_hook() -> Option<SetFault> {
    // SAFETY: emu_api.h: `int oxide_emu_set_fault(const char*)`.
    unsafe { symbol::<SetFault>(b"oxide_emu_set_fault\0") }
}

/// A function that arms the emulator's fault plan with a spec (`"alloc:1+"`, `""` to
/// disarm) and asserts the emulator took it; `None` where the loaded libcuda has no
/// fault hook.
pub fn fault_arm() -> Option<impl Fn(&str)> {
    let set_fault = set_fault_hook()?;
    Some(move |spec: &str| {
        let text = std::ffi::CString::new(spec).unwrap();
        // SAFETY: `text` is a valid NUL-terminated string that outlives the call.
        assert_eq!(
            unsafe { set_fault(text.as_ptr()) },
            0,
            "fault spec {spec:?}"
        );
    })
}

/// Whether the loaded libcuda is the emulator with the trace and call counters.
pub fn has_trace() -> bool {
    // SAFETY: emu_api.h: `size_t oxide_emu_trace_text(char*, size_t)`.
    unsafe { symbol::<TraceText>(b"oxide_emu_trace_text\0") }.is_some()
}

/// Calls of a counted driver entry point ("cuMemAlloc", "cuMemHostAlloc",
/// "cuStreamCreate") so far; 0 without the emulator.
pub fn call_count(name: &str) -> u64 {
    // SAFETY: emu_api.h: `unsigned long long oxide_emu_call_count(const char*)`.
    let Some(count) = (unsafe { symbol::<CallCount>(b"oxide_emu_call_count\0") }) else {
        return 0;
    };
    let name = CString::new(name).unwrap();
    // SAFETY: `name` is NUL-terminated and outlives the call.
    unsafe { count(name.as_ptr()) }
}

/// Starts (clearing it) or stops the emulator's stream trace.
pub fn trace(on: bool) {
    // SAFETY: emu_api.h: `void oxide_emu_trace(int)`.
    if let Some(trace) = unsafe { symbol::<Trace>(b"oxide_emu_trace\0") } {
        // SAFETY: takes an int by value.
        unsafe { trace(c_int::from(on)) }
    }
}

/// The stream trace recorded so far: one `(stream, operation)` per finished operation.
pub fn trace_lines() -> Vec<(String, String)> {
    // SAFETY: emu_api.h: `size_t oxide_emu_trace_text(char*, size_t)`.
    let Some(text) = (unsafe { symbol::<TraceText>(b"oxide_emu_trace_text\0") }) else {
        return Vec::new();
    };
    // SAFETY: a null buffer asks only for the length.
    let len = unsafe { text(std::ptr::null_mut(), 0) };
    let mut buf = vec![0u8; len + 1];
    // SAFETY: `buf` holds len + 1 bytes, room for the text and its NUL.
    unsafe { text(buf.as_mut_ptr().cast(), buf.len()) };
    buf.truncate(len);
    String::from_utf8_lossy(&buf)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(s, op)| (s.to_string(), op.to_string()))
        .collect()
}
