//! The app's shared state: paths, the catalog, and the live pipeline, which Settings and demo
//! mode replace without a restart.
//!
//! `AppState` is a cheap handle (`Arc` inside); commands clone it into the tasks they spawn.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use fake_gemini::{Behavior, FakeGemini, FakeOptions};
use pe_core::catalog::Catalog;
use pe_core::config::{ApiKey, Config, ENV_API_KEY};
use pe_core::gemini::GeminiClient;
use pe_core::import::{ImportOptions, ImportQueue};
use pe_core::intake::DecodeBudget;
use pe_core::pipeline::{system_clock, Pipeline, UnixClock};
use pe_core::resilience::ResilienceStack;
use pe_core::ErrorReport;

use crate::dto::{AppStatus, KeySource, KeyStatus};

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
    /// The bulk-import queue, opened on first use: at startup, so that an import a previous
    /// session left unfinished resumes. It follows the live pipeline.
    import: tokio::sync::OnceCell<ImportQueue>,
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
        Self::open_with_clock(paths, env, system_clock())
    }

    pub fn open_with_clock(paths: Paths, env: Env, clock: UnixClock) -> Result<Self, ErrorReport> {
        let file_config = Config::load(&paths.config_file, |_| None)?;
        let catalog = Catalog::open(&paths.database)?;
        let stack = ResilienceStack::new(STACK_NAME, file_config.resilience.clone())?;
        let live = Live::build(file_config, &*env, None, &catalog, &stack, &clock)?;
        Ok(Self {
            shared: Arc::new(Shared {
                paths,
                env,
                clock,
                catalog,
                live: RwLock::new(live),
                reconfigure: tokio::sync::Mutex::new(()),
                stack: tokio::sync::watch::channel(stack).0,
                import: tokio::sync::OnceCell::new(),
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

    /// The import queue, opened (and resumed) on first use. While another process (e.g. a CLI
    /// import) works this data dir's queue, it is handed the window's items and the window follows.
    pub async fn import_queue(&self) -> Result<ImportQueue, ErrorReport> {
        let queue = self.shared.import.get_or_try_init(|| ImportQueue::open(self.pipeline(), window_import_options()));
        Ok(queue.await?.clone())
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
        })
    }

    pub fn key_status(&self) -> KeyStatus {
        self.read(Live::key_status)
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
        let live =
            Live::build(config.clone(), &*self.shared.env, demo, &self.shared.catalog, &stack, &self.shared.clock)?;
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
        let live =
            Live::build(file_config, &*self.shared.env, demo, &self.shared.catalog, &self.stack(), &self.shared.clock)?;
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
        demo: Option<Arc<FakeGemini>>,
        catalog: &Catalog,
        stack: &ResilienceStack,
        clock: &UnixClock,
    ) -> Result<Self, ErrorReport> {
        let mut effective = file_config.clone();
        effective.apply_env(env);
        let mut key_source = match (&effective.gemini.api_key, env(ENV_API_KEY).and_then(ApiKey::new)) {
            (None, _) => KeySource::None,
            (Some(_), Some(_)) => KeySource::Environment,
            (Some(_), None) => KeySource::ConfigFile,
        };
        if let Some(fake) = &demo {
            effective.gemini.base_url = fake.base_url();
            effective.gemini.api_key = ApiKey::new(DEMO_KEY);
            key_source = KeySource::Demo;
        }
        effective.validate()?;
        let client = GeminiClient::new(&effective.gemini)?;
        let pipeline = Pipeline::new(client, stack.clone(), catalog.clone(), effective.image.clone(), clock.clone())
            .with_decode_budget(DecodeBudget::new(effective.intake.decode_budget_bytes));
        Ok(Self { file_config, effective, key_source, pipeline, demo })
    }

    fn key_status(&self) -> KeyStatus {
        KeyStatus::of(self.effective.gemini.api_key.as_ref(), self.key_source)
    }
}

/// The window's import prepares photos on all cores but one, so the window itself stays
/// responsive while hundreds of photos are decoded (the CLI uses them all).
fn window_import_options() -> ImportOptions {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    ImportOptions { prepare_concurrency: cores.saturating_sub(1).max(1), ..ImportOptions::default() }
}
