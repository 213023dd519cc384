//! The command line: the same binary, headless. A subcommand never opens a window, so it needs no
//! display. Without a subcommand the window opens. `import` lives in `cli/import.rs`.
//!
//! Exit codes: 0 when everything succeeded, 1 when any file failed, 2 on a usage or config error.

mod catalog_password;
mod import;
mod key;
mod products;
mod serve;
pub(crate) mod usage;

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use pe_core::catalog::server::CatalogUrl;
use pe_core::catalog::{CostTotal, ExportFormat, ProductSummary};
use pe_core::config::Config;
use pe_core::import::{ClaimScope, EnqueueOptions, ImportOptions, ImportQueue, StopAdvice};
use pe_core::pricing::Usd;
use pe_core::stored_path::StoredPath;
use pe_core::ErrorReport;
use serde_json::{json, Value};

use crate::extraction::{outcome_of, Outcome};
use crate::state::{process_env, AppState, Paths};
use crate::terminal::{self, errln, outln};

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
/// `import --give-up-after`: Gemini kept failing with no progress for that long; the items wait.
pub const EXIT_GAVE_UP: i32 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "product-extractor",
    version,
    about = "Extract product data from photos with Gemini into a local catalog."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Photos or folders to open in the window and queue for extraction (what a file manager's
    /// "Open with" passes). A running window is handed them instead of a second one opening. A
    /// subcommand's name is always the subcommand.
    #[arg(value_name = "PHOTO")]
    pub open: Vec<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct Global {
    /// Where the catalog, config and logs live [env: PRODUCT_EXTRACTOR_DATA_DIR] [default: the platform data dir]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The config file (TOML) [default: <data-dir>/config.toml]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The catalog: a SQLite file's path or a postgres:// URL (over PRODUCT_EXTRACTOR_CATALOG_URL and
    /// [catalog] url). A server catalog works with the window and every command but `products
    /// backup` and `products restore` (a server has its own, e.g. pg_dump) and `import --batch`
    /// (`catalog copy` names its own ends).
    #[arg(long, global = true, value_name = "URL")]
    pub catalog: Option<String>,
    /// Passed by WebKit's WebDriver when it starts the window for automation; ignored.
    #[arg(long, hide = true)]
    pub automation: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Extract the product in each photo; one line per file.
    Extract(ExtractArgs),
    /// The saved catalog.
    #[command(subcommand)]
    Products(ProductsCommand),
    /// Import photos and folders through the resumable import queue; `import status` shows it.
    Import(import::ImportArgs),
    /// Tokens and cost of the Gemini calls, per day and model.
    Usage(usage::UsageArgs),
    /// The Gemini circuit breaker's state and metrics, in Spring Boot actuator's shape.
    Breaker {
        /// JSON (`{"circuitBreakers":{"gemini":{…}}}`) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The Gemini API key in the OS keyring: `key set` (from standard input), `key status`,
    /// `key delete`.
    #[command(subcommand)]
    Key(key::KeyCommand),
    /// Serve the HTTP API (`POST /api/products/extract`, the actuator, OpenAPI at
    /// /api/openapi.json) for other programs; `serve token set|status|delete` keeps its token.
    Serve(serve::ServeArgs),
    /// The catalog itself: `catalog check` connects to a server catalog and migrates it; `catalog
    /// copy` copies a whole catalog between SQLite files and servers.
    #[command(subcommand)]
    Catalog(CatalogCommand),
}

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Connect to the server catalog (--catalog, PRODUCT_EXTRACTOR_CATALOG_URL or [catalog] url),
    /// bring its schema up to date, and print the server's version, the schema version and the URL
    /// (password masked). Exit 1 when it cannot connect or migrate, 2 without a postgres:// URL.
    Check {
        /// One JSON object (`{"url", "server_version", "schema_version", "applied"}`) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Copy a whole catalog (photos, attempts, products, revisions, the import queue) into an empty
    /// one, ids kept, in one transaction, then check each table's row count and print it. Each end
    /// is a SQLite file's path or a postgres:// URL: a team starts by copying a desktop's catalog to
    /// the server. A destination that already holds a catalog is refused. Exit 1 when the copy
    /// fails (nothing is written), 2 on a malformed argument.
    Copy {
        /// The catalog to read: a SQLite file or a postgres:// URL.
        #[arg(long, value_name = "URL")]
        from: String,
        /// The catalog to fill: a new (or empty) SQLite file, or an empty database's postgres:// URL.
        #[arg(long, value_name = "URL")]
        to: String,
        /// One JSON object (`{"from", "to", "tables": [{"table", "rows"}…]}`) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The team catalog server's password in this computer's keyring, so that it is in no config
    /// file, URL or environment (the server is --catalog, PRODUCT_EXTRACTOR_CATALOG_URL or
    /// [catalog] url). It is used when the URL, PGPASSWORD and ~/.pgpass have none.
    #[command(subcommand)]
    Password(catalog_password::PasswordCommand),
}

#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// Save every valid extraction to the catalog without review.
    #[arg(long)]
    pub save: bool,
    /// Ask Gemini again even for photos whose bytes were extracted before (by default their stored
    /// proposal is printed and nothing is sent).
    #[arg(long)]
    pub force: bool,
    /// Photo files (folders are searched for photos).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum ProductsCommand {
    /// List the saved products, newest first.
    List {
        /// A JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Search the saved products by name, brand, category, description and attributes, best
    /// match first. Every word must match the start of a word; case and accents are ignored.
    Search {
        /// The words to search for (several arguments are joined with spaces).
        #[arg(required = true, value_name = "QUERY")]
        query: Vec<String>,
        /// A JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Export every saved product, ordered by id. CSV text cells that start with `=`, `+`, `-`,
    /// `@`, tab or CR (also behind whitespace or invisible characters, or as a look-alike such as
    /// the fullwidth `＝`) get a leading `'` so spreadsheets do not run them as formulas.
    Export {
        /// `shopify`: Shopify's product CSV import (drafts); `csv`: every saved field flattened;
        /// `json`: one array; `jsonl`: one object a line.
        #[arg(long, value_enum)]
        format: ExportFormatArg,
        /// Write to FILE (a new file beside it, renamed when complete) instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// One product: its saved fields and its history, each revision's changed fields.
    Show {
        id: i64,
        /// One JSON object (`{"product":…,"history":[…]}`) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Delete a product: it leaves lists, search and exports; `products undelete ID` undoes it.
    Delete {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Undo a delete.
    Undelete {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Write a consistent copy of the catalog to FILE while it stays in use (SQLite's online backup).
    Backup {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Replace the catalog with a backup. The file must pass `PRAGMA integrity_check` and be a
    /// catalog of this or an older version (it is migrated); the current catalog is kept in
    /// `<data-dir>/backups/` first.
    Restore {
        #[arg(value_name = "FILE")]
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

/// `products export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormatArg {
    Shopify,
    Csv,
    Json,
    Jsonl,
}

impl From<ExportFormatArg> for ExportFormat {
    fn from(format: ExportFormatArg) -> Self {
        match format {
            ExportFormatArg::Shopify => ExportFormat::Shopify,
            ExportFormatArg::Csv => ExportFormat::Csv,
            ExportFormatArg::Json => ExportFormat::Json,
            ExportFormatArg::Jsonl => ExportFormat::Jsonl,
        }
    }
}

impl Global {
    pub fn paths(&self) -> Paths {
        let data_dir = pe_core::config::data_dir(self.data_dir.as_deref(), |k| std::env::var(k).ok());
        Paths::new(&data_dir, self.config.as_deref())
    }

    /// The catalog chosen by `--catalog`, else `PRODUCT_EXTRACTOR_CATALOG_URL`, else the config
    /// file's `[catalog] url`; `None`: the SQLite file in the data dir.
    pub fn catalog_url(&self, paths: &Paths) -> Result<Option<CatalogUrl>, ErrorReport> {
        let config = Config::load(&paths.config_file, |k| std::env::var(k).ok())?;
        Ok(config.catalog_url(self.catalog.as_deref())?)
    }

    /// [`Global::paths`] with the catalog chosen ([`Global::catalog_url`]): another SQLite file
    /// takes the data dir's place; a server catalog is refused for `operation`, a command that
    /// needs the SQLite file itself (see `Command::works_on_a_server`).
    pub fn local_paths(&self, operation: &str) -> Result<Paths, ErrorReport> {
        let mut paths = self.paths();
        if let Some(url) = self.catalog_url(&paths)? {
            paths.database = url.require_local(operation)?.to_path_buf();
        }
        Ok(paths)
    }
}

/// Runs a subcommand and returns the exit code.
pub fn run(global: &Global, command: Command) -> i32 {
    let _log = crate::logging::init(&global.paths(), false);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return usage_error(&format!("cannot start the async runtime: {e}")),
    };
    let command = match command {
        Command::Catalog(CatalogCommand::Check { json }) => return runtime.block_on(catalog_check(global, json)),
        Command::Catalog(CatalogCommand::Password(command)) => {
            return runtime.block_on(catalog_password::run(global, command))
        }
        Command::Catalog(CatalogCommand::Copy { from, to, json }) => {
            return runtime.block_on(catalog_copy(&from, &to, json))
        }
        command => command,
    };
    let server = match global.catalog_url(&global.paths()) {
        Ok(Some(CatalogUrl::Server(url))) if command.works_on_a_server() => Some(url),
        Ok(_) => None,
        Err(e) => return usage_error(&e.message),
    };
    if let Some(url) = server {
        // The team catalog: connected (and migrated) before anything else.
        let keyring = crate::secrets::Keyring::from_env(&*process_env());
        let data_dir = global.paths().data_dir;
        let catalog = runtime.block_on(async {
            crate::team::Login::read(&keyring, &url, process_env()).await.in_data_dir(&data_dir).open(&url).await
        });
        let state = match catalog
            .map_err(ErrorReport::from)
            .and_then(|c| AppState::open_on(global.paths(), process_env(), c))
        {
            Ok(state) => state,
            Err(e) => return usage_error(&e.message),
        };
        return runtime.block_on(run_command(&state, command));
    }
    let paths = match global.local_paths(&format!("`{}`", command.name())) {
        Ok(paths) => paths,
        Err(e) => return usage_error(&e.message),
    };
    // Upgrading an existing catalog can take a while (minutes for a large one): say so on stderr,
    // so a script's log shows why nothing else happens yet.
    let mut tell = |step: &pe_core::catalog::MigrationStep| {
        if step.from > 0 {
            errln!("Updating the catalog from version {} to {}: {step}…", step.from, step.to);
        }
    };
    let state = match AppState::open_with_progress(paths, process_env(), &mut tell) {
        Ok(state) => state,
        Err(e) => return usage_error(&e.message),
    };
    runtime.block_on(run_command(&state, command))
}

/// Runs a subcommand on the opened state.
async fn run_command(state: &AppState, command: Command) -> i32 {
    match command {
        Command::Extract(args) => extract(state, args).await,
        Command::Products(ProductsCommand::List { json }) => list_products(state, json, None).await,
        Command::Products(ProductsCommand::Search { query, json }) => {
            list_products(state, json, Some(&query.join(" "))).await
        }
        Command::Products(ProductsCommand::Export { format, out }) => export_products(state, format.into(), out).await,
        Command::Products(ProductsCommand::Show { id, json }) => products::show(state, id, json).await,
        Command::Products(ProductsCommand::Delete { id, json }) => products::delete(state, id, json).await,
        Command::Products(ProductsCommand::Undelete { id, json }) => products::undelete(state, id, json).await,
        Command::Products(ProductsCommand::Backup { file, json }) => products::backup(state, &file, json).await,
        Command::Products(ProductsCommand::Restore { file, json }) => products::restore(state, &file, json).await,
        Command::Import(args) => import::run(state, args).await,
        Command::Usage(args) => usage::run(state, args).await,
        Command::Breaker { json } => breaker(state, json).await,
        Command::Key(command) => key::run(state, command).await,
        Command::Serve(args) => serve::run(state, args).await,
        Command::Catalog(_) => unreachable!("handled before the catalog opens"),
    }
}

impl Command {
    /// Whether the command works on a server catalog: all but the SQLite file's own backup and
    /// restore (a server has its own, e.g. `pg_dump`). (`import --batch` opens the server catalog
    /// and is refused by the queue, which names batch imports.)
    fn works_on_a_server(&self) -> bool {
        !matches!(self, Command::Products(ProductsCommand::Backup { .. } | ProductsCommand::Restore { .. }))
    }

    /// The subcommand as typed, for messages.
    fn name(&self) -> &'static str {
        match self {
            Command::Extract(_) => "extract",
            Command::Products(ProductsCommand::Backup { .. }) => "products backup",
            Command::Products(ProductsCommand::Restore { .. }) => "products restore",
            Command::Products(_) => "products",
            Command::Import(_) => "import",
            Command::Usage(_) => "usage",
            Command::Breaker { .. } => "breaker",
            Command::Key(_) => "key",
            Command::Serve(_) => "serve",
            Command::Catalog(_) => "catalog",
        }
    }
}

/// `catalog check`: connect to the server catalog, migrate it, report. Never opens the SQLite file.
async fn catalog_check(global: &Global, json: bool) -> i32 {
    let url = match global.catalog_url(&global.paths()) {
        Ok(Some(CatalogUrl::Server(url))) => url,
        Ok(_) => {
            return usage_error(
                "catalog check needs a server catalog: give --catalog postgres://user@host/db, or set \
                 PRODUCT_EXTRACTOR_CATALOG_URL or [catalog] url",
            )
        }
        Err(e) => return usage_error(&e.message),
    };
    let keyring = crate::secrets::Keyring::from_env(&*process_env());
    let checked = match crate::team::Login::read(&keyring, &url, process_env()).await.connect(&url).await {
        Ok(catalog) => catalog.check().await,
        Err(e) => Err(e),
    };
    match checked {
        Ok(check) => {
            if json {
                let _ = terminal::out_json(&json!(check));
            } else {
                outln!(
                    "{}: PostgreSQL {}, catalog schema version {}{}",
                    check.url,
                    check.server_version,
                    check.schema_version,
                    if check.applied.is_empty() {
                        String::new()
                    } else {
                        format!(" (migrated now: {:?})", check.applied)
                    }
                );
            }
            EXIT_OK
        }
        Err(e) => failed_with(e, json),
    }
}

/// A failed `catalog` command: the error on stderr, and as `{"error": …}` on stdout with `--json`.
fn failed_with(error: impl Into<ErrorReport>, json: bool) -> i32 {
    let report = error.into();
    if json {
        let _ = terminal::out_json(&json!({ "error": report }));
    }
    errln!("error: {}", report.message);
    EXIT_FAILED
}

/// `catalog copy --from SRC --to DST`: never opens the data dir's catalog (unless it is named).
async fn catalog_copy(from: &str, to: &str, json: bool) -> i32 {
    let parse = |text: &str, flag: &str| {
        CatalogUrl::parse(text).map_err(|e| usage_error(&format!("{flag}: {}", ErrorReport::from(e).message)))
    };
    let (from, to) = match (parse(from, "--from"), parse(to, "--to")) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    errln!("Copying the catalog {from} to {to}…");
    let env = |k: &str| std::env::var(k).ok();
    match pe_core::catalog::copy::copy_catalog(&from, &to, &env).await {
        Ok(report) => {
            if json {
                let _ = terminal::out_json(&json!(report));
            } else {
                let width = report.tables.iter().map(|t| t.table.len()).max().unwrap_or(0);
                for table in &report.tables {
                    outln!("{:<width$}  {:>9}", table.table, table.rows);
                }
                outln!("Copied {} to {}; every table's row count checked.", report.from, report.to);
            }
            EXIT_OK
        }
        Err(e) => failed_with(e, json),
    }
}

/// A secret from standard input, never from an argument (arguments end up in the shell's history
/// and in every process listing): typed at a hidden `prompt` when standard input is a terminal,
/// else what is piped in, at most 64 KiB whatever is sent. Each caller picks its line from it.
pub(crate) fn read_secret(prompt: &str) -> std::io::Result<String> {
    use std::io::{IsTerminal, Read};
    if std::io::stdin().is_terminal() {
        return rpassword::prompt_password(prompt);
    }
    let mut text = String::new();
    std::io::stdin().take(64 * 1024).read_to_string(&mut text)?;
    Ok(text)
}

fn usage_error(message: &str) -> i32 {
    errln!("error: {message}");
    EXIT_USAGE
}

/// `extract`: the files go through the import queue like every photo (interactive, ahead of any
/// bulk import), and each file's line waits for its item. The same bytes extracted before give
/// the stored proposal without a call (unless `--force`); without `--save` the results stay in
/// the queue as `ready`, for the window or `import status`. When another process (the window, or
/// a CLI import) works the catalog's queue, the files are handed to it.
async fn extract(state: &AppState, args: ExtractArgs) -> i32 {
    if state.effective_config().gemini.api_key.is_none() {
        return usage_error(
            "no Gemini API key: set GEMINI_API_KEY, or add api_key under [gemini] in the config file \
             (the window's Settings do that for you)",
        );
    }
    let pipeline = state.pipeline();
    // A line per file now, as a single call gives: failures end the item, they do not hold it.
    // No lookahead: the files are sent in the order given (K at a time), as before the queue.
    let options = ImportOptions {
        claims: ClaimScope::Interactive,
        fail_fast: true,
        lookahead: Some(0),
        stop_advice: StopAdvice::RunAgain,
        ..state.import_options()
    };
    let queue = match ImportQueue::open(pipeline.clone(), options).await {
        Ok(queue) => queue,
        Err(e) => return usage_error(&ErrorReport::from(e).message),
    };
    if !queue.is_working() {
        errln!("note: another product-extractor (the window, or an import) works this catalog's queue; the files are handed to it");
    }
    let given: HashMap<PathBuf, PathBuf> =
        args.files.iter().map(|f| (std::path::absolute(f).unwrap_or_else(|_| f.clone()), f.clone())).collect();
    let enqueue = EnqueueOptions { force: args.force, ..EnqueueOptions::interactive() };
    let enqueued = match queue.enqueue_files(args.files, enqueue).await {
        Ok(enqueued) => enqueued,
        Err(e) => {
            errln!("error: {}", ErrorReport::from(e));
            return EXIT_FAILED;
        }
    };
    let (mut ok, mut failed) = (0usize, 0usize);
    let mut cost = CostTotal::default();
    for file in &enqueued.files {
        let detail = tokio::select! {
            detail = queue.finished(file.result_of) => detail,
            message = import::disk_full(&queue) => {
                errln!("error: {message}");
                return EXIT_FAILED;
            }
            _ = tokio::signal::ctrl_c() => {
                errln!("interrupted: the files wait in the queue; run the same command again to get their results");
                return EXIT_FAILED;
            }
        };
        // What the item's last attempt was billed, for a failed line (a blocked or cut-off answer).
        let billed = detail.as_ref().ok().and_then(|d| d.attempt.as_ref()).and_then(|a| a.usage);
        // What its photo's barcode read, when it was prepared.
        let barcodes = detail.as_ref().ok().and_then(|d| d.barcodes.as_deref()).map(barcode_gtins);
        let outcome = match detail {
            Ok(detail) => outcome_of(&queue, state, detail, args.save).await,
            Err(e) => Err(ErrorReport::from(e)),
        };
        if outcome.is_ok() {
            ok += 1;
        } else {
            failed += 1;
        }
        if let Ok((answer, _)) = &outcome {
            if answer.billed_now {
                cost.add(Some(answer.usage.billed()), answer.cost);
            }
        }
        let stored = file.stored_path().to_path_buf();
        let shown = given.get(&stored).cloned().unwrap_or(stored);
        let written = if args.json {
            terminal::out_json(&json_line(&shown, &outcome, billed, barcodes))
        } else {
            terminal::out(&text_line(&shown, &outcome))
        };
        if written.is_err() {
            return EXIT_FAILED;
        }
    }
    queue.shutdown().await;
    let breaker = pipeline.stack().breaker().actuator_json();
    let written = if args.json {
        let cost = cost_json(&cost);
        terminal::out_json(
            &json!({"summary": {"files": ok + failed, "ok": ok, "failed": failed, "cost": cost, "breaker": breaker}}),
        )
    } else {
        terminal::out(&format!(
            "{ok} ok, {failed} failed; {}; Gemini circuit breaker {}",
            cost_text(&cost),
            breaker["state"].as_str().unwrap_or("?")
        ))
    };
    if written.is_err() {
        return EXIT_FAILED;
    }
    if failed == 0 {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

/// `breaker`: the Gemini breaker as the last run left it (restored from the catalog, as the next
/// import starts from it), in Spring's actuator shape plus `restoredFrom`, when the state was
/// saved by the last run.
async fn breaker(state: &AppState, json: bool) -> i32 {
    state.restore_breaker().await;
    let stack = state.stack();
    let breaker = stack.breaker();
    let all = breaker_json(state);
    let actuator = &all["circuitBreakers"][breaker.name()];
    let restored = actuator["restoredFrom"].as_str().map(str::to_owned);
    if json {
        let _ = terminal::out_json(&all);
    } else {
        let snap = stack.snapshot();
        let from = restored.map(|at| format!(" (restored from the last run, saved {at})")).unwrap_or_default();
        outln!("circuit breaker {}: {}{from}", breaker.name(), actuator["state"].as_str().unwrap_or("?"));
        for key in [
            "failureRate",
            "slowCallRate",
            "bufferedCalls",
            "failedCalls",
            "slowCalls",
            "slowFailedCalls",
            "notPermittedCalls",
        ] {
            let value = match &actuator[key] {
                serde_json::Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            outln!("  {key:<18} {value}");
        }
        outln!(
            "  bulkhead           {} of {} slots free; retry max_attempts {}",
            snap.bulkhead.available_concurrent_calls,
            snap.bulkhead.max_concurrent_calls,
            snap.retry.max_attempts
        );
    }
    EXIT_OK
}

/// The breaker in Spring Boot's `/actuator/circuitbreakers` shape, plus `restoredFrom` when its
/// state was saved by the last run: `breaker --json` and the HTTP API's actuator.
pub(crate) fn breaker_json(state: &AppState) -> Value {
    let stack = state.stack();
    let breaker = stack.breaker();
    let mut actuator = breaker.actuator_json();
    let restored = breaker
        .snapshot()
        .restored_from_ms
        .and_then(|ms| chrono::DateTime::from_timestamp_millis(i64::try_from(ms).ok()?))
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    if let Some(at) = restored {
        actuator["restoredFrom"] = json!(at);
    }
    json!({"circuitBreakers": {breaker.name(): actuator}})
}

/// A line's `"usage"`: Gemini's counts with `"cost_usd"` (null when the model has no price).
pub(crate) fn usage_json(usage: &pe_core::gemini::Usage, cost: Option<Usd>) -> serde_json::Value {
    let mut value = json!(usage);
    value["cost_usd"] = json!(cost);
    value
}

/// A summary's `"cost"`: what this run's calls were billed for (`usd` leaves out the calls whose
/// model has no price, counted in `unpriced_calls`).
pub(crate) fn cost_json(cost: &CostTotal) -> serde_json::Value {
    json!({
        "input_tokens": cost.input_tokens,
        "cached_tokens": cost.cached_tokens,
        "output_tokens": cost.output_tokens,
        "usd": cost.usd,
        "unpriced_calls": cost.unpriced_calls,
    })
}

/// `1,234 in / 56 out tokens, $0.0012` (with the calls whose price is unknown).
pub(crate) fn cost_text(cost: &CostTotal) -> String {
    let unknown = match cost.unpriced_calls {
        0 => String::new(),
        n => format!(" (+{n} calls at an unknown price)"),
    };
    format!("{} in / {} out tokens, {}{unknown}", cost.input_tokens, cost.output_tokens, cost.usd)
}

/// `billed`: the usage of a failed item's answer, when Gemini billed one; `barcodes`: what the
/// photo's barcode read (`barcode_gtins`), when it was prepared.
fn json_line(
    file: &std::path::Path,
    outcome: &Outcome,
    billed: Option<pe_core::gemini::Usage>,
    barcodes: Option<Value>,
) -> String {
    let mut value = match outcome {
        Ok((e, saved)) => {
            let mut v = json!({
                "ok": true,
                "product": e.product,
                "flags": e.flags,
                "usage": usage_json(&e.usage, e.cost),
                "model": e.model,
                "latency_ms": e.latency_ms,
                "photo_id": e.photo_id,
                "attempt_id": e.attempt_id,
            });
            if let Some(id) = saved {
                v["saved_product_id"] = json!(id);
            }
            v
        }
        Err(error) => {
            let mut v = json!({
                "ok": false,
                "error": {"kind": error.code, "message": error.message},
            });
            if let Some(usage) = billed {
                v["usage"] = json!(usage);
            }
            v
        }
    };
    put_file(&mut value, &StoredPath::new(file));
    if let Some(barcodes) = barcodes {
        value["barcodes"] = barcodes;
    }
    value.to_string()
}

/// A JSON line's `"barcodes"`: the GTINs read on the photo, in the order found.
pub(crate) fn barcode_gtins(barcodes: &[pe_core::barcode::Barcode]) -> Value {
    json!(barcodes.iter().map(|b| b.gtin.as_str()).collect::<Vec<_>>())
}

/// A JSON line's `"file"`, its first key: the path for display (lossy when it is not valid
/// UTF-8), and then `"file_bytes"`, the exact bytes in lowercase hex, only for such a path.
pub(crate) fn put_file(value: &mut Value, path: &StoredPath) {
    let mut line = serde_json::Map::new();
    line.insert("file".into(), json!(path.text()));
    if let Some(bytes) = path.bytes_hex() {
        line.insert("file_bytes".into(), json!(bytes));
    }
    if let Value::Object(rest) = std::mem::take(value) {
        line.extend(rest.into_iter().filter(|(k, _)| k != "file" && k != "file_bytes"));
    }
    *value = Value::Object(line);
}

/// `extract`'s line for a file: one line, whatever the file's name, the answer or the error hold
/// (each a [`terminal::field`]).
fn text_line(file: &std::path::Path, outcome: &Outcome) -> String {
    let file = terminal::path(file);
    match outcome {
        Ok((e, saved)) => {
            let p = &e.product;
            let brand = p.brand.as_deref().map(|b| format!(" ({})", terminal::field(b))).unwrap_or_default();
            let flags = if e.flags.is_empty() { String::new() } else { format!(", {} flagged", e.flags.len()) };
            let saved = saved.map(|id| format!(", saved as #{id}")).unwrap_or_default();
            format!(
                "ok    {file}: {}{brand} — {} ms, {} in / {} out tokens{flags}{saved}",
                terminal::field(&p.name),
                e.latency_ms,
                e.usage.prompt_tokens,
                e.usage.output_tokens
            )
        }
        Err(error) => format!("error {file}: [{}] {}", error.code, terminal::field(&error.message)),
    }
}

/// The CLI's view of a saved product: the summary's product fields.
fn summary_json(p: &ProductSummary) -> serde_json::Value {
    json!({
        "id": p.id,
        "name": p.name,
        "brand": p.brand,
        "category": p.category,
        "price": p.price,
        "gtin": p.gtin,
        "updated_at": p.updated_at,
    })
}

/// `products list`, or with a query `products search`: the same output either way.
async fn list_products(state: &AppState, json: bool, query: Option<&str>) -> i32 {
    const PAGE: u32 = 500;
    let mut all = Vec::new();
    loop {
        let offset = u32::try_from(all.len()).unwrap_or(u32::MAX);
        let page = match query {
            Some(query) => state.catalog().search_products(query, offset, PAGE).await,
            None => state.catalog().list_products(offset, PAGE).await,
        };
        match page {
            Ok(page) => {
                let done = page.len() < PAGE as usize;
                all.extend(page);
                if done {
                    break;
                }
            }
            Err(e) => {
                errln!("error: {}", ErrorReport::from(e));
                return EXIT_FAILED;
            }
        }
    }
    if json {
        let rows: Vec<_> = all.iter().map(summary_json).collect();
        let _ = terminal::out_json(&serde_json::Value::Array(rows));
    } else if all.is_empty() {
        outln!("{}", if query.is_some() { "No product matches." } else { "The catalog is empty." });
    } else {
        for p in &all {
            let price = p
                .price
                .as_ref()
                .map(|pr| format!("{:.2} {}", pr.amount, terminal::field(&pr.currency)))
                .unwrap_or_default();
            let written = terminal::out(&format!(
                "#{:<6} {:<40} {:<20} {:<14} {}",
                p.id,
                terminal::field(&p.name),
                terminal::field(p.brand.as_deref().unwrap_or("-")),
                terminal::field(p.gtin.as_deref().unwrap_or("-")),
                price
            ));
            if written.is_err() {
                return EXIT_FAILED;
            }
        }
    }
    EXIT_OK
}

/// `products export`: streams the catalog to stdout, or to `out` through a new file beside it, renamed only
/// once everything was written, so `out` is never a partial export.
async fn export_products(state: &AppState, format: ExportFormat, out: Option<PathBuf>) -> i32 {
    let Some(path) = out else {
        return match state.catalog().export(format, Box::new(std::io::stdout())).await {
            Ok(_) => EXIT_OK,
            Err(e) => {
                errln!("error: {}", ErrorReport::from(e));
                EXIT_FAILED
            }
        };
    };
    match state.catalog().export_to_file(format, &path).await {
        Ok(summary) => {
            errln!("exported {} products to {}", summary.rows, terminal::path(&path));
            EXIT_OK
        }
        Err(e) => {
            errln!("error: {}", ErrorReport::from(e));
            EXIT_FAILED
        }
    }
}
