//! The Tauri commands, split by domain. Each one takes the state, calls the core, and converts
//! the error into an `ErrorReport` (`{code, message}` in the UI's `catch`). All are `async`, so
//! none runs on the main thread; blocking work inside them goes to `spawn_blocking` or the
//! catalog thread.
//!
//! [`registry!`] below is the one list of commands: each line names the implementation, the
//! arguments (names as the UI sends them, in snake_case) and the result. From that line come the
//! `#[tauri::command]` handler (whose parameters *are* the listed names, so the IPC keys cannot
//! drift from the list), its registration in [`invoke_handler`], and its typed TypeScript wrapper
//! in `ui/src/bindings/commands.ts` (written by `cargo test`, see [`crate::bindings`]). The
//! implementations are plain `async fn`s; the handler calls them, so the compiler checks every
//! listed type against them.
//!
//! A line is `module::name(state, arg: Type, ...) -> Result;` where `state` (first, optional)
//! passes `State<AppState>`, or `module::name(app, ...)`, which passes the `AppHandle`.
//!
//! (tauri-specta would derive the same from each command's signature, but only as a 2.0 release
//! candidate, and it needs `specta::Type` beside `ts_rs::TS` on every type that crosses: two
//! generators for one set of types. This list reuses the ts-rs types.)

pub mod breaker;
pub mod catalog;
pub mod extract;
pub mod import;
pub mod settings;
pub mod usage;

use pe_core::catalog::{
    BackupSummary, CostTotal, ExportFormat, ExportSummary, Facets, PhotoRef, ProductPage, ProductQuery, ProductRecord,
    RestoreSummary, RevisionRecord,
};
use pe_core::import::{
    EnqueueReport, ImportItemDetail, ImportPage, ImportProgress, ImportRow, ItemId, ItemState, UndoReport,
};
use pe_core::pipeline::PhotosEstimate;
use pe_core::product::{FieldFlag, Product};
use pe_core::resilience::ResilienceSnapshot;

use crate::bindings::{ArgSpec, CommandSpec, TsType};
use crate::dto::{
    AppStatus, CatalogCheck, ConnectionCheck, ImportControl, ReextractProposal, Settings, SettingsInput, UpdateInput,
    UsageReport,
};
use breaker::BreakerControl;

/// The handler for one registry line: a `#[tauri::command]` whose parameters are the listed ones.
macro_rules! command_handler {
    ($module:ident :: $name:ident (state $(, $arg:ident : $ty:ty)* $(,)?) -> $ret:ty) => {
        #[tauri::command]
        pub async fn $name(
            state: tauri::State<'_, crate::state::AppState>,
            $($arg: $ty),*
        ) -> Result<$ret, pe_core::ErrorReport> {
            super::$module::$name(state, $($arg),*).await
        }
    };
    ($module:ident :: $name:ident (app $(, $arg:ident : $ty:ty)* $(,)?) -> $ret:ty) => {
        #[tauri::command]
        pub async fn $name<R: tauri::Runtime>(
            app: tauri::AppHandle<R>,
            $($arg: $ty),*
        ) -> Result<$ret, pe_core::ErrorReport> {
            super::$module::$name(app, $($arg),*).await
        }
    };
    ($module:ident :: $name:ident ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty) => {
        #[tauri::command]
        pub async fn $name($($arg: $ty),*) -> Result<$ret, pe_core::ErrorReport> {
            super::$module::$name($($arg),*).await
        }
    };
}

/// The exported description of one registry line.
macro_rules! command_spec {
    ($cfg:ident, $name:ident (state $(, $arg:ident : $ty:ty)* $(,)?) -> $ret:ty) => {
        command_spec!(@args $cfg, $name ($($arg : $ty),*) -> $ret)
    };
    ($cfg:ident, $name:ident (app $(, $arg:ident : $ty:ty)* $(,)?) -> $ret:ty) => {
        command_spec!(@args $cfg, $name ($($arg : $ty),*) -> $ret)
    };
    ($cfg:ident, $name:ident ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty) => {
        command_spec!(@args $cfg, $name ($($arg : $ty),*) -> $ret)
    };
    (@args $cfg:ident, $name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty) => {
        CommandSpec {
            name: stringify!($name),
            args: vec![$(ArgSpec { name: stringify!($arg), ty: TsType::of::<$ty>($cfg) }),*],
            result: TsType::of::<$ret>($cfg),
        }
    };
}

macro_rules! registry {
    ($($module:ident :: $name:ident ($($params:tt)*) -> $ret:ty;)*) => {
        /// The `#[tauri::command]` handlers, one per registry line; each calls its implementation.
        pub mod handlers {
            use super::*;
            $(command_handler!($module :: $name ($($params)*) -> $ret);)*
        }

        /// Every command, for `tauri::Builder::invoke_handler`.
        pub fn invoke_handler<R: tauri::Runtime>() -> impl Fn(tauri::ipc::Invoke<R>) -> bool + Send + Sync + 'static {
            tauri::generate_handler![$(handlers::$name),*]
        }

        /// Every command as the TypeScript wrappers see it, in registry order.
        pub fn registry(cfg: &ts_rs::Config) -> Vec<CommandSpec> {
            vec![$(command_spec!(cfg, $name ($($params)*) -> $ret)),*]
        }
    };
}

registry! {
    settings::app_status(state) -> AppStatus;
    settings::get_settings(state) -> Settings;
    settings::save_settings(state, input: SettingsInput) -> Settings;
    settings::test_connection(state) -> ConnectionCheck;
    settings::test_catalog(state, url: String, password: Option<String>) -> CatalogCheck;
    settings::choose_catalog(state, url: Option<String>, password: Option<String>) -> AppStatus;
    settings::restart_app(app) -> ();
    settings::set_demo_mode(state, enabled: bool) -> AppStatus;
    extract::extract_photos(state, paths: Vec<String>) -> Vec<ImportRow>;
    extract::extract_pending(state) -> Vec<ImportRow>;
    extract::validate_product(product: Product) -> Vec<FieldFlag>;
    extract::preview_photo(state, file: String, file_bytes: Option<String>) -> String;
    extract::kept_photo(state, photo_id: i64) -> String;
    catalog::query_products(state, query: ProductQuery) -> ProductPage;
    catalog::catalog_facets(state) -> Facets;
    catalog::get_product(state, id: i64) -> ProductRecord;
    catalog::product_history(state, id: i64) -> Vec<RevisionRecord>;
    catalog::product_photos(state, id: i64) -> Vec<PhotoRef>;
    catalog::update_product(state, input: UpdateInput) -> ProductRecord;
    catalog::delete_product(state, id: i64) -> ProductRecord;
    catalog::undelete_product(state, id: i64) -> ProductRecord;
    catalog::duplicate_product(state, id: i64) -> ProductRecord;
    catalog::reextract_product(state, id: i64) -> ReextractProposal;
    catalog::take_fields(saved: Product, proposal: Product, fields: Vec<String>) -> Product;
    catalog::export_catalog(state, format: ExportFormat, path: String) -> ExportSummary;
    catalog::backup_catalog(state, path: String) -> BackupSummary;
    catalog::restore_catalog(state, path: String) -> RestoreSummary;
    import::contains_folder(paths: Vec<String>) -> bool;
    import::import_paths(state, paths: Vec<String>, batch: bool) -> EnqueueReport;
    import::import_progress(state) -> ImportProgress;
    import::import_items(state, offset: u32, limit: u32, states: Option<Vec<ItemState>>) -> ImportPage;
    import::import_item(state, id: ItemId) -> ImportItemDetail;
    import::import_move_photo(state, from: ItemId, index: u32, to: Option<ItemId>) -> Vec<ItemId>;
    import::import_control(state, action: ImportControl) -> ImportProgress;
    import::import_save_item(state, id: ItemId, product: Product) -> ProductRecord;
    import::import_discard_item(state, id: ItemId) -> ();
    import::import_save_all_ready(state) -> Vec<ItemId>;
    import::import_undo_save_all(state, ids: Vec<ItemId>) -> UndoReport;
    import::import_force(state, id: ItemId) -> ();
    usage::usage_report(state) -> UsageReport;
    usage::set_daily_budget(state, usd: Option<f64>) -> UsageReport;
    usage::photo_cost(state, photo_id: i64) -> CostTotal;
    usage::estimate_photos(state, photos: Option<u32>) -> PhotosEstimate;
    breaker::resilience_snapshot(state) -> ResilienceSnapshot;
    breaker::breaker_control(state, action: BreakerControl) -> ResilienceSnapshot;
}
