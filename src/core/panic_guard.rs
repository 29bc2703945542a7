//! The panic guard every native entry point runs under (both native modules: the core's
//! `stoker._native` and the media part's `stoker._media.ffmpegN._media`).
//!
//! A Rust panic that reaches PyO3 becomes `pyo3_runtime.PanicException`, a `BaseException`:
//! `except Exception` does not catch it, so one bad sample ended a training job whatever its
//! `on_error` said. Under the guard a panic becomes `stoker.errors.NativePanicError` (a
//! `StokerError` and a `RuntimeError`) naming the call and, where the call has one, the sample or
//! file, so the failure policy can name what failed and go on.
//!
//! The guard needs unwinding: a `panic = "abort"` profile would end the process before it runs
//! (the workspace's Cargo.toml sets `panic = "unwind"` for that reason). It cannot catch an abort
//! either (a failed allocation aborts in Rust): sizes read from input are checked before they are
//! allocated, at each place that reads them.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The text a panic carried (`panic!("...")` gives a `&str` or a `String`; anything else is
/// named by its absence).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// A panic caught in one sample's work (a batch decoder's slot), with its message: that
/// sample's error, as the codecs' own errors are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Panicked(pub String);

impl Panicked {
    /// What a person reads for a caught panic with `message`.
    pub fn describe(message: &str) -> String {
        format!(
            "stoker's native code failed on it: {message} (a bug in stoker or a library it uses, caught before it could end the \
             process; please report it with the input that caused it)"
        )
    }
}

/// Run `work`, returning its value, or the message of the panic that ended it.
///
/// `work` is taken as unwind-safe: what it may leave half-changed behind a panic is either its
/// own (dropped on the way out) or behind a `Mutex`/`RwLock` that the panic poisons, and every
/// lock of the bindings is taken with the poisoned case mapped to an error.
pub fn catch_panic<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(work)).map_err(|payload| panic_message(payload.as_ref()))
}

#[cfg(feature = "guard")]
mod python {
    use super::*;
    use pyo3::PyResult;
    use std::fmt::Display;

    pyo3::import_exception!(stoker.errors, NativePanicError);

    /// The one panic guard of the bindings: run `work`, and turn a panic in it into
    /// `stoker.errors.NativePanicError` naming `call` and `subject` (the sample or file the call
    /// is about; None where it has none).
    ///
    /// # Errors
    /// `work`'s own error, or `NativePanicError` after a panic.
    pub fn guard<T>(call: &str, subject: Option<&dyn Display>, work: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
        catch_panic(work).unwrap_or_else(|message| {
            let about = subject.map(|subject| format!(" on {subject}")).unwrap_or_default();
            Err(NativePanicError::new_err(format!(
                "stoker's native code failed in {call}{about}: {message} (a bug in stoker or a library it uses, caught before it \
                 could end the process; please report it with the input that caused it)"
            )))
        })
    }
}

#[cfg(feature = "guard")]
pub use python::{guard, NativePanicError};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message_and_a_value_passes_through() {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {})); // no panic report on the test's output
        assert_eq!(catch_panic(|| -> u32 { panic!("index {} out of range", 7) }), Err("index 7 out of range".to_string()));
        assert_eq!(catch_panic(|| -> u32 { panic!("fixed text") }), Err("fixed text".to_string()));
        assert_eq!(catch_panic(|| -> u32 { std::panic::panic_any(5_u8) }), Err("a panic without a message".to_string()));
        std::panic::set_hook(previous);
        assert_eq!(catch_panic(|| 3), Ok(3));
    }
}
