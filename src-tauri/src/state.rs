//! The app's shared state: paths, the catalog, and the live pipeline, which Settings and demo
//! mode replace without a restart.
//!
//! `AppState` is a cheap handle (`Arc` inside); commands clone it into the tasks they spawn.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::catalog::{Catalog, MigrationStep};
use pe_core::config::{ApiKey, Config, KeyStorage, ENV_API_KEY};
use pe_core::gemini::GeminiClient;
use pe_core::import::{ImportOptions, ImportQueue};
use pe_core::intake::DecodeBudget;
use pe_core::pipeline::{system_clock, Pipeline, UnixClock};
use pe_core::resilience::ResilienceStack;
use pe_core::ErrorReport;

use crate::dto::{AppStatus, KeySource, KeyStatus};
use crate::secrets::{Keyring, KeyringError};

/// The name of the one resilience stack (and its breaker) around Gemini calls.
pub const STACK_NAME: &str = "gemini";

/// The key the built-in fake Gemini accepts in demo mode.
const DEMO_KEY: &str = "demo-mode-key-not-secret";
/// How long the demo's fake Gemini takes per answer, so the stages are visible.
const DEMO_LATENCY: Duration = Duration::from_millis(1200);

/// Where the app keeps its files.
#[derive(Debug, Clone)]
pub struct Paths {
    pub data_dir: PathBuf,
    pub config_file: PathBuf,
    pub log_dir: PathBuf,
    pub database: PathBuf,
}

impl Paths {
    /// `config` overrides the default `<data_dir>/config.toml`.
    pub fn new(data_dir: &Path, config: Option<&Path>) -> Self {
        Self {
            data_dir: data_dir.to_path_buf(),
            config_file: config.map_or_else(|| data_dir.join("config.toml"), Path::to_path_buf),
            log_dir: data_dir.join("logs"),
            database: Catalog::path_in(data_dir),
        }
    }
}

/// Reads an environment variable; injected so tests don't depend on the process environment.
pub type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

pub fn process_env() -> Env {
    Arc::new(|key| std::env::var(key).ok())
}

#[derive(Clone)]
pub struct AppState {
    shared: Arc<Shared>,
}

struct Shared {
    paths: Paths,
    env: Env,
    clock: UnixClock,
    catalog: Catalog,
    /// Replaced as a whole when Settings are saved or demo mode toggles; readers clone the
    /// pipeline out and never hold the lock across an `.await`.
    live: RwLock<Live>,
    /// Serializes Settings saves and demo toggles, which await (starting the fake server).
    reconfigure: tokio::sync::Mutex<()>,
    /// The one resilience stack named `gemini`; replaced (the breaker resets) only when its
    /// settings change. The panel's bridge watches this to follow a replacement.
    stack: tokio::sync::watch::Sender<ResilienceStack>,
    /// The OS keyring's entry for the API key, and what it held when last read or written.
    keyring: Keyring,
    keyring_state: RwLock<KeyringState>,
    /// The bulk-import queue, opened on first use: at startup, so that an import a previous
    /// session left unfinished resumes. It follows the live pipeline.
    import: tokio::sync::OnceCell<ImportQueue>,
    /// Whether the breaker started from what the last run saved, done once before the first
    /// call (every call goes through the import queue, which waits for it).
    breaker_restored: tokio::sync::OnceCell<bool>,
    /// The HTTP API served from the window's process, when Settings turn it on.
    window_api: crate::api::window::WindowServer,
}

/// What the keyring holds, as last read or written; `problem` when it could not be used.
#[derive(Debug, Clone, Default)]
struct KeyringState {
    key: Option<ApiKey>,
    problem: Option<KeyringError>,
}

struct Live {
    /// What the config file says (without environment overrides); Settings edits this.
    file_config: Config,
    /// What is in effect: file, then environment, then demo mode.
    effective: Config,
    key_source: KeySource,
    pipeline: Pipeline,
    /// The built-in fake Gemini while demo mode is on.
    demo: Option<Arc<FakeGemini>>,
}

impl AppState {
    /// Loads the config, opens the catalog and builds the pipeline. A missing API key is fine:
    /// the window opens and says how to add one.
    pub fn open(paths: Paths, env: Env) -> Result<Self, ErrorReport> {
        Self::open_with_progress(paths, env, &mut |_| {})
    }

    /// [`AppState::open`], telling `on_step` before each catalog migration runs (an upgrade of a
    /// large catalog can take a while: the window shows a progress window, the CLI a line).
    pub fn open_with_progress(
        paths: Paths,
        env: Env,
        on_step: &mut dyn FnMut(&MigrationStep),
    ) -> Result<Self, ErrorReport> {
        Self::open_inner(paths, env, system_clock(), on_step)
    }

    pub fn open_with_clock(paths: Paths, env: Env, clock: UnixClock) -> Result<Self, ErrorReport> {
        Self::open_inner(paths, env, clock, &mut |_| {})
    }

    /// The state on a catalog already open (a server catalog: see `Catalog::open_url`).
    pub fn open_on(paths: Paths, env: Env, catalog: Catalog) -> Result<Self, ErrorReport> {
        Self::open_with_catalog(paths, env, system_clock(), catalog)
    }

    fn open_inner(
        paths: Paths,
        env: Env,
        clock: UnixClock,
        on_step: &mut dyn FnMut(&MigrationStep),
    ) -> Result<Self, ErrorReport> {
        let catalog = Catalog::open_with(&paths.database, on_step)?;
        Self::open_with_catalog(paths, env, clock, catalog)
    }

    fn open_with_catalog(paths: Paths, env: Env, clock: UnixClock, catalog: Catalog) -> Result<Self, ErrorReport> {
        let mut file_config = Config::load(&paths.config_file, |_| None)?;
        let keyring = Keyring::from_env(&*env);
        let keyring_state = read_keyring(&keyring, &mut file_config, &paths.config_file, &*env);
        let stack = ResilienceStack::new(STACK_NAME, file_config.resilience.clone())?;
        let live = Live::build(file_config, &*env, keyring_state.key.as_ref(), None, &catalog, &stack, &clock)?;
        Ok(Self {
            shared: Arc::new(Shared {
                paths,
                env,
                clock,
                catalog,
                live: RwLock::new(live),
                keyring,
                keyring_state: RwLock::new(keyring_state),
                reconfigure: tokio::sync::Mutex::new(()),
                stack: tokio::sync::watch::channel(stack).0,
                import: tokio::sync::OnceCell::new(),
                breaker_restored: tokio::sync::OnceCell::new(),
                window_api: crate::api::window::WindowServer::default(),
            }),
        })
    }

    pub fn paths(&self) -> &Paths {
        &self.shared.paths
    }

    pub fn catalog(&self) -> &Catalog {
        &self.shared.catalog
    }

    /// The current time in unix ms, from the clock the state was opened with.
    pub fn now(&self) -> i64 {
        (self.shared.clock)()
    }

    /// The pipeline in effect now.
    pub fn pipeline(&self) -> Pipeline {
        self.read(|live| live.pipeline.clone())
    }

    pub fn file_config(&self) -> Config {
        self.read(|live| live.file_config.clone())
    }

    pub fn effective_config(&self) -> Config {
        self.read(|live| live.effective.clone())
    }

    /// The resilience stack in effect now.
    pub fn stack(&self) -> ResilienceStack {
        self.shared.stack.borrow().clone()
    }

    /// Follows the stack across replacements (a Settings change of its sections).
    pub fn stack_watch(&self) -> tokio::sync::watch::Receiver<ResilienceStack> {
        self.shared.stack.subscribe()
    }

    /// The HTTP API served from the window's process (`[server] with_window`).
    pub fn window_api(&self) -> &crate::api::window::WindowServer {
        &self.shared.window_api
    }

    /// The import queue, opened (and resumed) on first use. While another process (e.g. a CLI
    /// import) works this data dir's queue, it is handed the window's items and the window follows.
    pub async fn import_queue(&self) -> Result<ImportQueue, ErrorReport> {
        let queue = self.shared.import.get_or_try_init(|| async {
            // The breaker starts from where the last run left it before the queue's first call,
            // and is saved from then on.
            self.restore_breaker().await;
            tokio::spawn(self.clone().remember_breaker());
            ImportQueue::open(self.pipeline(), window_import_options(self.import_options())).await
        });
        Ok(queue.await?.clone())
    }

    /// Starts the breaker from what the last run saved, once (see `pe_core::breaker_memory`);
    /// true when it did.
    pub async fn restore_breaker(&self) -> bool {
        *self
            .shared
            .breaker_restored
            .get_or_init(|| async {
                let stack = self.stack();
                pe_core::breaker_memory::restore(&self.shared.catalog, &stack).await
            })
            .await
    }

    /// Saves the breaker after each change, following the stack across replacements (Settings
    /// give a fresh breaker, which is saved from then on). Runs until the process ends.
    async fn remember_breaker(self) {
        let mut stacks = self.stack_watch();
        loop {
            let stack = stacks.borrow_and_update().clone();
            tokio::select! {
                () = pe_core::breaker_memory::keep_saving(self.shared.catalog.clone(), stack) => {
                    // Not remembered (or gone): wait for a replacement that may be.
                    if stacks.changed().await.is_err() {
                        return;
                    }
                }
                changed = stacks.changed() => if changed.is_err() { return },
            }
        }
    }

    /// How this data dir's processes work the import queue (the settings in effect): on a team
    /// catalog, the processes of this data dir share one worker (the window, else the first
    /// terminal command), as they do on a SQLite catalog; its lock file is in the data dir, named
    /// after the server catalog (its location without the password).
    pub fn import_options(&self) -> ImportOptions {
        let mut options = self.effective_config().import_options();
        // Answers paid for wait here while a team catalog's server is away (see import::spool).
        options.spool_dir = Some(self.shared.paths.data_dir.join("spool"));
        if self.shared.catalog.server().is_some() {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            self.shared.catalog.location().hash(&mut hasher);
            let name = format!("team-{:016x}.import-lock", hasher.finish());
            options.worker_lock = Some(self.shared.paths.data_dir.join(name));
            // The catalog is on the server: the disk kept free is the data dir's (logs, locks).
            options.disk.dir = Some(self.shared.paths.data_dir.clone());
        }
        options
    }

    /// The import queue uses the pipeline in effect from its next item on.
    fn follow_pipeline(&self) {
        if let Some(queue) = self.shared.import.get() {
            queue.set_pipeline(self.pipeline());
        }
    }

    pub fn status(&self) -> AppStatus {
        let paths = &self.shared.paths;
        self.read(|live| AppStatus {
            version: env!("CARGO_PKG_VERSION").into(),
            data_dir: paths.data_dir.display().to_string(),
            config_path: paths.config_file.display().to_string(),
            log_dir: paths.log_dir.display().to_string(),
            model: live.effective.gemini.model.clone(),
            base_url: live.effective.gemini.base_url.clone(),
            api_key: live.key_status(),
            demo: live.demo.is_some(),
            catalog: self.shared.catalog.location(),
            catalog_on_server: self.shared.catalog.server().is_some(),
            catalog_setting: live.file_config.catalog.url.as_deref().map(pe_core::catalog::server::mask_url),
            catalog_env: (self.shared.env)(pe_core::config::ENV_CATALOG_URL)
                .filter(|v| !v.trim().is_empty())
                .map(|v| pe_core::catalog::server::mask_url(v.trim())),
        })
    }

    /// The app's environment (injected: tests give their own).
    pub fn env(&self) -> Env {
        self.shared.env.clone()
    }

    /// The OS keyring's entries of this app (the API key, team catalog passwords).
    pub fn keyring(&self) -> &Keyring {
        &self.shared.keyring
    }

    pub fn key_status(&self) -> KeyStatus {
        let problem = self.keyring_state().problem.map(|p| p.to_string());
        let mut status = self.read(Live::key_status);
        status.keyring_problem = problem;
        status
    }

    fn keyring_state(&self) -> KeyringState {
        self.shared.keyring_state.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Stores the key in the OS keyring (or removes it, `None`) and applies it. The file config's
    /// own key, if any, is removed: one place holds the key.
    pub async fn set_keyring_key(&self, key: Option<ApiKey>) -> Result<(), ErrorReport> {
        let keyring = self.shared.keyring.clone();
        let stored = key.clone();
        let result = tokio::task::spawn_blocking(move || match &stored {
            Some(key) => keyring.set(key),
            None => keyring.delete().map(|_| ()),
        })
        .await
        .map_err(|e| ErrorReport::new(pe_core::ErrorCode::Io, format!("the keyring task failed: {e}")))?;
        {
            let mut state = self.shared.keyring_state.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            match result {
                Ok(()) => *state = KeyringState { key, problem: None },
                // Nothing to remove from a keyring there is none of.
                Err(KeyringError::Unavailable(_)) if key.is_none() => state.key = None,
                Err(problem) => {
                    state.problem = Some(problem.clone());
                    return Err(problem.into());
                }
            }
        }
        let mut config = self.file_config();
        config.gemini.api_key = None;
        config.gemini.key_storage = KeyStorage::Keyring;
        self.apply_file_config(config).await
    }

    /// Validates and writes a new file config, then rebuilds the pipeline from it.
    pub async fn apply_file_config(&self, config: Config) -> Result<(), ErrorReport> {
        let _guard = self.shared.reconfigure.lock().await;
        config.validate()?;
        let demo = self.read(|live| live.demo.clone());
        let mut stack = self.stack();
        let replaced = stack.config() != &config.resilience;
        if replaced {
            stack = ResilienceStack::new(STACK_NAME, config.resilience.clone())?;
        }
        let keyring_key = self.keyring_state().key;
        // The decodes in flight keep their shares: the same budget unless its size changed.
        let budget = self.read(|live| live.pipeline.decode_budget().clone());
        let live = Live::build(
            config.clone(),
            &*self.shared.env,
            keyring_key.as_ref(),
            demo,
            &self.shared.catalog,
            &stack,
            &self.shared.clock,
        )?
        .keeping_budget(&budget);
        let path = self.shared.paths.config_file.clone();
        tokio::task::spawn_blocking(move || config.save(&path))
            .await
            .map_err(|e| ErrorReport::new(pe_core::ErrorCode::Io, format!("saving the settings failed: {e}")))??;
        self.write(live);
        self.follow_pipeline();
        if replaced {
            tracing::info!("resilience settings changed: the gemini breaker starts afresh");
            self.shared.stack.send_replace(stack);
        }
        tracing::info!("settings saved and applied");
        Ok(())
    }

    /// Starts or stops the built-in fake Gemini and points the pipeline at it.
    pub async fn set_demo(&self, enabled: bool) -> Result<AppStatus, ErrorReport> {
        let _guard = self.shared.reconfigure.lock().await;
        let (file_config, current) = self.read(|live| (live.file_config.clone(), live.demo.clone()));
        if enabled == current.is_some() {
            return Ok(self.status());
        }
        let demo = if enabled {
            let options = FakeOptions {
                api_keys: vec![DEMO_KEY.into()],
                models: vec![file_config.gemini.model.clone(), pe_core::config::DEFAULT_MODEL.into()],
                latency: DEMO_LATENCY,
                default_behavior: Behavior::Product,
            };
            let fake = FakeGemini::start(options).await.map_err(|e| {
                ErrorReport::new(pe_core::ErrorCode::Io, format!("The demo could not start its local server: {e}"))
            })?;
            tracing::info!(base_url = %fake.base_url(), "demo mode on");
            Some(Arc::new(fake))
        } else {
            tracing::info!("demo mode off");
            None
        };
        let keyring_key = self.keyring_state().key;
        // The decodes in flight keep their shares: the same budget unless its size changed.
        let budget = self.read(|live| live.pipeline.decode_budget().clone());
        let live = Live::build(
            file_config,
            &*self.shared.env,
            keyring_key.as_ref(),
            demo,
            &self.shared.catalog,
            &self.stack(),
            &self.shared.clock,
        )?
        .keeping_budget(&budget);
        self.write(live);
        self.follow_pipeline();
        Ok(self.status())
    }

    fn read<T>(&self, f: impl FnOnce(&Live) -> T) -> T {
        let live = self.shared.live.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&live)
    }

    fn write(&self, live: Live) {
        *self.shared.live.write().unwrap_or_else(std::sync::PoisonError::into_inner) = live;
    }
}

impl Live {
    fn build(
        file_config: Config,
        env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
        keyring_key: Option<&ApiKey>,
        demo: Option<Arc<FakeGemini>>,
        catalog: &Catalog,
        stack: &ResilienceStack,
        clock: &UnixClock,
    ) -> Result<Self, ErrorReport> {
        let mut effective = file_config.clone();
        effective.apply_env(env);
        // The environment, then the keyring, then the file.
        let mut key_source = if env(ENV_API_KEY).and_then(ApiKey::new).is_some() {
            KeySource::Environment
        } else if let Some(key) = keyring_key {
            effective.gemini.api_key = Some(key.clone());
            KeySource::Keyring
        } else if effective.gemini.api_key.is_some() {
            KeySource::ConfigFile
        } else {
            KeySource::None
        };
        if let Some(fake) = &demo {
            effective.gemini.base_url = fake.base_url();
            effective.gemini.api_key = ApiKey::new(DEMO_KEY);
            key_source = KeySource::Demo;
        }
        effective.validate()?;
        let client = GeminiClient::new(&effective.gemini)?;
        let pipeline = Pipeline::new(client, stack.clone(), catalog.clone(), effective.image.clone(), clock.clone())
            .with_pricing(effective.pricing.clone())
            .with_decode_budget(DecodeBudget::new(effective.intake.decode_budget_bytes));
        Ok(Self { file_config, effective, key_source, pipeline, demo })
    }

    /// The pipeline keeps `current`, the budget the decodes in flight hold shares of, unless the
    /// new settings changed its size (see `DecodeBudget::for_setting`).
    fn keeping_budget(mut self, current: &DecodeBudget) -> Self {
        let budget = DecodeBudget::for_setting(Some(current), self.effective.intake.decode_budget_bytes);
        self.pipeline = self.pipeline.with_decode_budget(budget);
        self
    }

    fn key_status(&self) -> KeyStatus {
        KeyStatus::of(self.effective.gemini.api_key.as_ref(), self.key_source)
    }
}

/// Reads the key from the OS keyring, unless the environment's key makes it moot or the user keeps
/// the key in the file. A key an earlier version wrote into the config file moves into the
/// keyring, and out of the file (written atomically), once the keyring has it.
fn read_keyring(
    keyring: &Keyring,
    file_config: &mut Config,
    config_path: &Path,
    env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
) -> KeyringState {
    if env(ENV_API_KEY).and_then(ApiKey::new).is_some() || file_config.gemini.key_storage == KeyStorage::ConfigFile {
        return KeyringState::default();
    }
    if let Some(old) = file_config.gemini.api_key.clone() {
        if let Err(problem) = keyring.set(&old) {
            tracing::warn!("the API key stays in the config file: {problem}");
            return KeyringState { key: None, problem: Some(problem) };
        }
        let mut moved = file_config.clone();
        moved.gemini.api_key = None;
        match moved.save(config_path) {
            Ok(()) => {
                tracing::info!("moved the API key from the config file into the OS keyring");
                *file_config = moved;
            }
            Err(e) => tracing::warn!("the API key is in the keyring, but the config file still holds it: {e}"),
        }
        return KeyringState { key: Some(old), problem: None };
    }
    match keyring.get() {
        Ok(key) => KeyringState { key, problem: None },
        Err(problem) => {
            tracing::info!("no API key from the keyring: {problem}");
            KeyringState { key: None, problem: Some(problem) }
        }
    }
}

/// The window's import prepares photos on all cores but one, so the window itself stays
/// responsive while hundreds of photos are decoded (the CLI uses them all).
fn window_import_options(options: ImportOptions) -> ImportOptions {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    ImportOptions { prepare_concurrency: cores.saturating_sub(1).max(1), ..options }
}
