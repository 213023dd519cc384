//! The Tauri commands, split by domain. Each one takes the state, calls the core, and converts
//! the error into an `ErrorReport` (`{code, message}` in the UI's `catch`). All are `async`, so
//! none runs on the main thread; blocking work inside them goes to `spawn_blocking` or the
//! catalog thread.

pub mod breaker;
pub mod catalog;
pub mod extract;
pub mod import;
pub mod settings;
