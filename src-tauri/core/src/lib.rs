//! product-extractor's core: everything the app does, without a window.
//!
//! A tour, in the order a photo travels:
//! - [`intake`] checks a photo file and prepares it for upload: format from magic bytes, size and
//!   pixel caps before decoding, EXIF orientation, downscale, JPEG re-encode without metadata,
//!   SHA-256 and thumbnail. CPU work; callers run it on a blocking thread.
//! - [`barcode`] reads EAN/UPC barcodes from a photo's pixels on the machine (rxing): the GTIN, its
//!   check digit verified, and where the symbol is.
//! - [`gemini`] is the HTTP client for `generateContent` (reqwest + rustls) with tolerant response
//!   parsing and a typed error for every failure.
//! - [`product`] is the field table: one entry per field of the product, from which the JSON
//!   Schema and the system instruction Gemini gets, validation and cleaning (GTIN check digit,
//!   ISO 4217, maximums), the review diff, the CSV columns and the UI's form all come.
//! - [`catalog`] is the store, a SQLite file on its own thread or a team's PostgreSQL server behind
//!   the same handle: photos, extraction attempts (the audit trail with every billed token),
//!   products (proposal and saved) with their revisions, and the import queue's rows.
//! - [`pipeline`] is the steps one photo is made of: intake, recording the photo, the call through
//!   the resilience stack, the attempt with the barcode applied. It has no path of its own.
//! - [`import`] is the one engine: every photo — a drop on the window, `extract`, a folder, a
//!   re-extract, the HTTP API — is an item of the persistent queue, which runs the pipeline's
//!   steps with K calls in flight, resumes after a crash, pauses while the breaker is open or the
//!   team server is away, and saves what the reviewer approves (or Gemini's Batch API at half
//!   price).
//! - [`resilience`] is the circuit breaker for calls to Gemini, with Resilience4j's semantics;
//!   [`breaker_memory`] saves it in the catalog so a restart starts from where it was.
//! - [`pricing`] is what a call costs: the price table, the one cost rule, the daily budget.
//! - [`text`] makes untrusted text safe where it goes: a terminal (visible escapes), the catalog
//!   (control characters removed), a spreadsheet cell (the formula guard's look-alikes).
//! - [`config`] and [`error`] are shared by all of them; [`memory`] is the allocator setting the
//!   app applies at startup so that a long import's memory stays flat; [`disk`] is the free space
//!   the import keeps on the catalog's disk; [`files`] is how the app writes its files and checks
//!   its config where other users may write too (a shared data dir or export folder).
//!
//! This crate never depends on tauri, nor carries the fake Gemini server: that is the `fake-gemini`
//! crate (src-tauri/fake-gemini), which the tests, the benchmarks and the app's demo mode use.

pub mod barcode;
pub mod breaker_memory;
pub mod catalog;
pub mod config;
pub mod disk;
pub mod error;
pub mod files;
pub mod gemini;
pub mod import;
pub mod intake;
pub mod memory;
pub mod pipeline;
pub mod pricing;
pub mod product;
pub mod resilience;
pub mod stored_path;
pub mod text;

pub use error::{Coded, ErrorCode, ErrorReport};
