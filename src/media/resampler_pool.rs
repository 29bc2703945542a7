//! Idle swresample contexts, kept per thread for the next sample of the same shape.
//!
//! Making and freeing a context for every sample costs allocations and set-up that a reset used
//! context skips: `swr_init` on it resets its state (buffers, position) and keeps the rest.

use std::cell::RefCell;

use ffmpeg_next::ffi;

/// What a context was made for: input format, input rate, input channels, output channels (it
/// converts at the input's rate).
pub type Shape = (i32, i32, i32, usize);

/// Contexts kept per thread; more shapes than this at once are rare.
const KEEP: usize = 4;

struct Idle(Vec<(Shape, *mut ffi::SwrContext)>);

impl Drop for Idle {
    fn drop(&mut self) {
        for (_, mut context) in self.0.drain(..) {
            // SAFETY: each context came from swr_alloc_set_opts2, is owned by this list only,
            // and is freed once, here.
            unsafe { ffi::swr_free(&mut context) }
        }
    }
}

thread_local! {
    static IDLE: RefCell<Idle> = const { RefCell::new(Idle(Vec::new())) };
}

/// A context made for `shape`, reset and ready, if this thread has one idle.
pub fn take(shape: Shape) -> Option<*mut ffi::SwrContext> {
    let mut context = IDLE
        .try_with(|idle| {
            let mut idle = idle.borrow_mut();
            let at = idle.0.iter().position(|(kept, _)| *kept == shape)?;
            Some(idle.0.swap_remove(at).1)
        })
        .ok()
        .flatten()?;
    // SAFETY: the context was initialized for `shape` before it was given back, and is owned
    // by us now; a failed re-init frees it.
    unsafe {
        if ffi::swr_init(context) < 0 {
            ffi::swr_free(&mut context);
            return None;
        }
    }
    Some(context)
}

/// Keep `context` (initialized for `shape`, no longer used by its owner) for a later `take`, or
/// free it.
pub fn give_back(shape: Shape, mut context: *mut ffi::SwrContext) {
    let kept = IDLE
        .try_with(|idle| {
            let mut idle = idle.borrow_mut();
            if idle.0.len() < KEEP {
                idle.0.push((shape, context));
                true
            } else {
                false
            }
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: the caller gave up the context; nothing else holds it.
        unsafe { ffi::swr_free(&mut context) }
    }
}
