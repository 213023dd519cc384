//! Configuration: defaults, then the TOML file, then the environment (env wins).
//!
//! ```toml
//! [gemini]
//! base_url = "https://generativelanguage.googleapis.com"
//! model = "gemini-flash-latest"
//! # the key lives in the OS keyring (Settings or `key set`); GEMINI_API_KEY overrides it
//! key_storage = "keyring"  # or "config_file": then api_key = "..." here, plain text
//! timeout = "60s"          # the whole call
//! connect_timeout = "10s"  # TCP + TLS
//! read_timeout = "45s"     # connected, but no bytes arrive
//! thinking = "off"         # off | minimal | low | medium | high | model_default
//! max_output_tokens = 8192 # thinking counts against it
//! # temperature = 0.2      # unset: 0.2, except Gemini 3 keeps its own default
//! media_resolution = "model_default"  # low | medium | high | model_default
//! max_response_bytes = 10000000  # a longer answer is refused unread (response_too_large)
//!
//! [image]
//! max_long_edge = 1536
//! jpeg_quality = 85
//! max_file_bytes = 20000000
//! max_pixels = 50000000
//!
//! [pricing]                # see `pricing`: the daily budget, prices per model
//! daily_budget_usd = 5.0
//! [batch]                  # batch imports (`import --batch`, "Overnight" in the window)
//! poll_interval = "30s"    # how often a batch's state is looked at (backing off on errors)
//! max_requests = 500       # photos per batch at most (each batch also stays under 20 MB)
//! [intake]
//! decode_budget_bytes = 1073741824   # the memory concurrent decodes share (1 GiB)
//! [import]                 # which photos are one product (`import::grouping`; not yet applied)
//! group_by = "stem"        # stem | folder | none
//! max_photos_per_product = 6   # a larger group is split (and the review says so)
//! min_free_disk_bytes = 1073741824  # the import pauses below the smaller of this and
//! min_free_disk_percent = 5.0       # this share of the catalog's disk
//! follow_links_outside = false      # a link in a dropped folder to a file outside it is skipped
//!
//! [circuit_breaker]        # and [bulkhead], [time_limiter], [retry], [rate_limiter]:
//! wait_duration_in_open_state = "15s"   # the resilience stack's sections, see `resilience`
//! ```
//! Unknown keys are an error naming the key. The API key is a [`ApiKey`], whose `Debug` and
//! `Display` never show it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::catalog::server::CatalogUrl;
use crate::error::{Coded, ErrorCode};
use crate::files::{self, Access, Exposure, StagedFile};
pub use crate::gemini::config::{
    ApiKey, GeminiConfig, KeyStorage, MediaResolution, Thinking, DEFAULT_BASE_URL, DEFAULT_MODEL,
};
pub use crate::import::config::{BatchConfig, ImportConfig, MAX_PHOTOS_PER_PRODUCT_LIMIT};
pub use crate::intake::config::{ImageConfig, IntakeConfig};
use crate::pricing::PricingConfig;
use crate::resilience::{
    BulkheadConfig, CircuitBreakerConfig, InvalidSetting, RateLimiterConfig, ResilienceConfig, RetryConfig,
    TimeLimiterConfig,
};

/// Everything configurable. In the file the resilience stack's five sections are top-level, next
/// to `[gemini]` and `[image]` (`ConfigFile`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(from = "ConfigFile", into = "ConfigFile")]
pub struct Config {
    pub gemini: GeminiConfig,
    pub image: ImageConfig,
    pub intake: IntakeConfig,
    /// The resilience stack around every Gemini call (see `resilience`), as the stack takes it.
    pub resilience: ResilienceConfig,
    /// Prices per model and the daily budget (`[pricing]`).
    pub pricing: PricingConfig,
    /// Batch imports.
    pub batch: BatchConfig,
    /// How an import groups its photos into products (`[import]`).
    pub import: ImportConfig,
    /// Which catalog to open (`[catalog]`).
    pub catalog: CatalogConfig,
    /// The HTTP API (`[server]`): `serve`, or the window's "Serve the HTTP API".
    pub server: ServerConfig,
}

/// The HTTP API that other programs call (`serve`, or the window's process when `with_window`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Where it listens (`serve --listen` wins). Anything but a loopback address is refused until
    /// a token is set (`serve token set`, or `token_file`).
    pub listen: std::net::SocketAddr,
    /// A file whose first line is the bearer token every request must carry, instead of the one
    /// `serve token set` keeps in the OS keyring.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// Serve the API from the window's process while the window is open (Settings).
    pub with_window: bool,
    /// Origins a web page may call the API from (CORS); none by default.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cors_allow_origins: Vec<String>,
    /// Connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers.
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body (its photos), from the headers on.
    #[serde(with = "humantime_serde")]
    pub body_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 8080)),
            token_file: None,
            with_window: false,
            cors_allow_origins: Vec::new(),
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
        }
    }
}

/// Which catalog to open: the SQLite file in the data dir (no URL), another SQLite file, or a
/// PostgreSQL server (`postgres://…`, a team catalog). The command
/// line's `--catalog` wins over `PRODUCT_EXTRACTOR_CATALOG_URL`, which wins over this.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CatalogConfig {
    /// A SQLite file's path or a `postgres://user@host:port/db` URL. Leave the password out: it is
    /// read from `PGPASSWORD` or `~/.pgpass` (a password written here is kept in this file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// On a team catalog: how long a photo this desktop took from the shared queue stays its own
    /// without a renewal (renewed every third of it while the desktop runs). When a desktop dies,
    /// its photos go to the others after this.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        Self { url: None, lease: crate::import::DEFAULT_LEASE }
    }
}

impl Config {
    /// The import queue's settings this configuration gives (batch mode's chunks and polling, the
    /// team queue's lease); the window and the CLI add their own.
    pub fn import_options(&self) -> crate::import::ImportOptions {
        crate::import::ImportOptions {
            batch: self.batch.import_options(),
            lease: self.catalog.lease,
            disk: crate::disk::DiskCheck {
                min_free_bytes: self.import.min_free_disk_bytes,
                min_free_percent: self.import.min_free_disk_percent,
                ..crate::disk::DiskCheck::default()
            },
            follow_links_outside: self.import.follow_links_outside,
            ..crate::import::ImportOptions::default()
        }
    }
}

/// The file's layout: every section top-level, unknown keys refused by name. (With the resilience
/// sections `#[serde(flatten)]`ed into [`Config`] instead, toml still names an unknown key, but
/// reports errors inside those sections without their line and key path, and an unknown section
/// without the list of known ones.)
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ConfigFile {
    gemini: GeminiConfig,
    image: ImageConfig,
    intake: IntakeConfig,
    circuit_breaker: CircuitBreakerConfig,
    bulkhead: BulkheadConfig,
    time_limiter: TimeLimiterConfig,
    retry: RetryConfig,
    rate_limiter: RateLimiterConfig,
    pricing: PricingConfig,
    batch: BatchConfig,
    import: ImportConfig,
    catalog: CatalogConfig,
    server: ServerConfig,
}

impl From<ConfigFile> for Config {
    fn from(file: ConfigFile) -> Self {
        let ConfigFile {
            gemini,
            image,
            intake,
            circuit_breaker,
            bulkhead,
            time_limiter,
            retry,
            rate_limiter,
            pricing,
            batch,
            import,
            catalog,
            server,
        } = file;
        let resilience = ResilienceConfig { circuit_breaker, bulkhead, time_limiter, retry, rate_limiter };
        Self { gemini, image, intake, resilience, pricing, batch, import, catalog, server }
    }
}

impl From<Config> for ConfigFile {
    fn from(config: Config) -> Self {
        let Config { gemini, image, intake, resilience, pricing, batch, import, catalog, server } = config;
        let ResilienceConfig { circuit_breaker, bulkhead, time_limiter, retry, rate_limiter } = resilience;
        Self {
            gemini,
            image,
            intake,
            circuit_breaker,
            bulkhead,
            time_limiter,
            retry,
            rate_limiter,
            pricing,
            batch,
            import,
            catalog,
            server,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot write the config file {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid setting {key}: {message}")]
    Invalid { key: String, message: String },
    /// Another user owns the file, or others may change it: it is not used (its `base_url` would
    /// receive the key), as ssh refuses such a config.
    #[error(
        "the config file {path} {exposure}, so it is not used (it may hold the API key and says where \
         it is sent): {}",
        exposure.fix(path)
    )]
    Exposed { path: PathBuf, exposure: Exposure },
    /// A resilience setting out of range; its key names the section (`retry.max_attempts`).
    #[error(transparent)]
    Resilience(#[from] InvalidSetting),
}

impl Coded for ConfigError {
    fn code(&self) -> ErrorCode {
        ErrorCode::Config
    }
}

/// The environment variables that override the file.
pub const ENV_API_KEY: &str = "GEMINI_API_KEY";
pub const ENV_BASE_URL: &str = "GEMINI_BASE_URL";
pub const ENV_MODEL: &str = "GEMINI_MODEL";
pub const ENV_DATA_DIR: &str = "PRODUCT_EXTRACTOR_DATA_DIR";
pub use crate::catalog::server::ENV_CATALOG_URL;

impl Config {
    /// Parses TOML text. Unknown keys are an error that names the key.
    pub fn from_toml(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Config =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.into(), message: e.to_string() })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads the file if it exists (a missing file means defaults), then applies the environment.
    /// `env` is passed in so tests do not depend on the process environment.
    pub fn load(path: &Path, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut config = match read_private(path) {
            Ok(Some(text)) => Self::from_toml(&text, path)?,
            Ok(None) => Config::default(),
            Err(e) => return Err(e),
        };
        config.apply_env(env);
        config.validate()?;
        Ok(config)
    }

    /// Environment overrides: `GEMINI_API_KEY`, `GEMINI_BASE_URL`, `GEMINI_MODEL`,
    /// `PRODUCT_EXTRACTOR_CATALOG_URL`.
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) {
        if let Some(url) = env(ENV_CATALOG_URL).filter(|v| !v.trim().is_empty()) {
            self.catalog.url = Some(url.trim().to_string());
        }
        if let Some(key) = env(ENV_API_KEY).and_then(ApiKey::new) {
            self.gemini.api_key = Some(key);
        }
        if let Some(url) = env(ENV_BASE_URL).filter(|v| !v.trim().is_empty()) {
            self.gemini.base_url = url.trim().to_string();
        }
        if let Some(model) = env(ENV_MODEL).filter(|v| !v.trim().is_empty()) {
            self.gemini.model = model.trim().to_string();
        }
    }

    /// Checks ranges; the error names the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.resilience.validate()?;
        let invalid = |key: &str, message: &str| Err(ConfigError::Invalid { key: key.into(), message: message.into() });
        if self.catalog.lease < Duration::from_secs(1) || self.catalog.lease > Duration::from_secs(3600) {
            return invalid("catalog.lease", "must be between 1s and 1h");
        }
        let url = self.gemini.base_url.trim();
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return invalid("gemini.base_url", "must start with https:// or http://");
        }
        if self.gemini.model.trim().is_empty() || self.gemini.model.contains(['/', '?', '#', ' ']) {
            return invalid("gemini.model", "must be a model id such as gemini-flash-latest");
        }
        for (key, d) in [
            ("gemini.timeout", self.gemini.timeout),
            ("gemini.connect_timeout", self.gemini.connect_timeout),
            ("gemini.read_timeout", self.gemini.read_timeout),
        ] {
            if d.is_zero() {
                return invalid(key, "must be longer than zero");
            }
        }
        if self.gemini.max_output_tokens == 0 {
            return invalid("gemini.max_output_tokens", "must be more than zero");
        }
        if let Some(t) = self.gemini.temperature {
            if !(0.0..=2.0).contains(&t) {
                return invalid("gemini.temperature", "must be between 0 and 2");
            }
        }
        if self.gemini.max_response_bytes < 1024 {
            return invalid("gemini.max_response_bytes", "must be at least 1024");
        }
        if !(64..=8192).contains(&self.image.max_long_edge) {
            return invalid("image.max_long_edge", "must be between 64 and 8192");
        }
        if !(1..=100).contains(&self.image.jpeg_quality) {
            return invalid("image.jpeg_quality", "must be between 1 and 100");
        }
        if self.image.max_file_bytes == 0 {
            return invalid("image.max_file_bytes", "must be more than zero");
        }
        if self.image.max_pixels == 0 {
            return invalid("image.max_pixels", "must be more than zero");
        }
        self.pricing.validate().map_err(|(key, message)| ConfigError::Invalid { key, message })?;
        if self.intake.decode_budget_bytes < 16 << 20 {
            return invalid("intake.decode_budget_bytes", "must be at least 16777216 (16 MiB)");
        }
        if !(1..=MAX_PHOTOS_PER_PRODUCT_LIMIT).contains(&self.import.max_photos_per_product) {
            return invalid("import.max_photos_per_product", "must be between 1 and 16");
        }
        if !(0.0..=100.0).contains(&self.import.min_free_disk_percent) {
            return invalid("import.min_free_disk_percent", "must be between 0 and 100");
        }
        self.catalog_url(None)?;
        Ok(())
    }

    /// The catalog to open: `flag` (the command line's `--catalog`), else `[catalog] url` (which
    /// `PRODUCT_EXTRACTOR_CATALOG_URL` overrides, see [`Config::apply_env`]); `None`: the SQLite
    /// file in the data dir. The error never shows a password.
    pub fn catalog_url(&self, flag: Option<&str>) -> Result<Option<CatalogUrl>, ConfigError> {
        let (key, text) = match (flag, &self.catalog.url) {
            (Some(flag), _) => ("--catalog", flag),
            (None, Some(url)) => ("catalog.url", url.as_str()),
            (None, None) => return Ok(None),
        };
        CatalogUrl::parse(text).map(Some).map_err(|e| ConfigError::Invalid { key: key.into(), message: e.to_string() })
    }

    /// Writes the config as TOML, readable only by the user (it may hold the API key).
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let write_err = |source| ConfigError::Write { path: path.into(), source };
        let text = toml::to_string_pretty(self)
            .map_err(|e| ConfigError::Invalid { key: "config".into(), message: e.to_string() })?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            files::create_private_dir(dir).map_err(write_err)?;
        }
        let (staged, mut file) = StagedFile::create(path, Access::Private).map_err(write_err)?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(write_err)?;
        drop(file);
        staged.commit().map_err(write_err)
    }
}

/// The config file's text (`None`: there is none), read from the file whose owner and mode were
/// checked ([`files::exposure`]).
fn read_private(path: &Path) -> Result<Option<String>, ConfigError> {
    let read_err = |source| ConfigError::Read { path: path.into(), source };
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(read_err(source)),
    };
    if let Some(exposure) = files::exposure(&file.metadata().map_err(read_err)?) {
        return Err(ConfigError::Exposed { path: path.into(), exposure });
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text).map_err(read_err)?;
    Ok(Some(text))
}

/// Where data lives: `--data-dir`, else `PRODUCT_EXTRACTOR_DATA_DIR`, else the platform data dir
/// (`~/.local/share/product-extractor` on Linux).
pub fn data_dir(cli: Option<&Path>, env: impl Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(dir) = cli {
        return dir.to_path_buf();
    }
    if let Some(dir) = env(ENV_DATA_DIR).filter(|v| !v.trim().is_empty()) {
        return PathBuf::from(dir);
    }
    directories::ProjectDirs::from("com", "example", "product-extractor")
        .map(|d| d.data_dir().to_path_buf())
        .unwrap_or_else(|| PathBuf::from(".product-extractor"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::GroupBy;

    /// Modules own their settings: `config` reads the file and composes the sections each module
    /// defines (`gemini::config`, `intake::config`, `import::config`, `resilience::config`,
    /// `pricing`), so no module of the core names `crate::config` in its code, and there is no
    /// cycle between `config` and a module.
    #[test]
    fn no_module_reads_its_settings_from_config() {
        fn walk(dir: &Path, found: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let composer = ["src/config.rs", "src/lib.rs"].iter().any(|f| path.ends_with(f));
                if path.is_dir() {
                    walk(&path, found);
                } else if path.extension().is_some_and(|e| e == "rs") && !composer {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for (n, line) in text.lines().enumerate() {
                        let code = line.trim_start();
                        if !code.starts_with("//") && code.contains("crate::config") {
                            found.push(format!("{}:{}: {code}", path.display(), n + 1));
                        }
                    }
                }
            }
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        walk(&src, &mut found);
        assert!(found.is_empty(), "modules that read config: {found:#?}");
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn defaults_when_file_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let c = Config::load(&dir.path().join("none.toml"), no_env).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.gemini.model, "gemini-flash-latest");
        assert_eq!(c.image.max_long_edge, 1536);
    }

    #[test]
    fn file_then_env() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "[gemini]\nmodel = \"from-file\"\ntimeout = \"5s\"\nread_timeout = \"250ms\"\n[image]\njpeg_quality = 70\n",
        )
        .unwrap();
        let c = Config::load(&path, no_env).unwrap();
        assert_eq!(c.gemini.model, "from-file");
        assert_eq!(c.gemini.timeout, Duration::from_secs(5));
        assert_eq!(c.gemini.read_timeout, Duration::from_millis(250));
        assert_eq!(c.image.jpeg_quality, 70);
        let c2 = Config::from_toml("[intake]\ndecode_budget_bytes = 268435456\n", &path).unwrap();
        assert_eq!(c2.intake.decode_budget_bytes, 256 << 20);
        assert!(Config::from_toml("[intake]\ndecode_budget_bytes = 1000\n", &path).is_err());
        let env = |k: &str| match k {
            ENV_MODEL => Some("from-env".to_string()),
            ENV_API_KEY => Some("  secret-key-123456 ".to_string()),
            _ => None,
        };
        let c = Config::load(&path, env).unwrap();
        assert_eq!(c.gemini.model, "from-env");
        assert_eq!(c.gemini.api_key.unwrap().expose(), "secret-key-123456");
    }

    #[test]
    fn gemini_request_settings() {
        let c = Config::default();
        assert_eq!(
            (c.gemini.thinking, c.gemini.max_output_tokens, c.gemini.temperature, c.gemini.media_resolution),
            (Thinking::Off, 8192, None, MediaResolution::ModelDefault)
        );
        let text = "[gemini]\nthinking = \"model_default\"\nmax_output_tokens = 4096\ntemperature = 1.0\n\
                    media_resolution = \"low\"\n";
        let c = Config::from_toml(text, Path::new("c.toml")).unwrap();
        assert_eq!(
            (c.gemini.thinking, c.gemini.max_output_tokens, c.gemini.temperature, c.gemini.media_resolution),
            (Thinking::ModelDefault, 4096, Some(1.0), MediaResolution::Low)
        );
        assert_eq!(Config::from_toml(&toml::to_string_pretty(&c).unwrap(), Path::new("c.toml")).unwrap(), c);
        let err = Config::from_toml("[gemini]\nthinking = \"lots\"\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("minimal"), "the error lists the values: {err}");
        let mut c = Config::default();
        c.gemini.temperature = Some(0.7);
        assert!(toml::to_string_pretty(&c).unwrap().contains("temperature = 0.7\n"), "written as typed");
        let err = Config::from_toml("[gemini]\ntemperature = 3.0\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("gemini.temperature"), "{err}");
        let err = Config::from_toml("[gemini]\nmax_output_tokens = 0\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("gemini.max_output_tokens"), "{err}");
    }

    #[test]
    fn import_grouping_settings() {
        let c = Config::default();
        assert_eq!((c.import.group_by, c.import.max_photos_per_product), (GroupBy::Stem, 6));
        let path = Path::new("c.toml");
        let c = Config::from_toml("[import]\ngroup_by = \"folder\"\nmax_photos_per_product = 3\n", path).unwrap();
        assert_eq!((c.import.group_by, c.import.max_photos_per_product), (GroupBy::Folder, 3));
        assert_eq!(Config::from_toml(&toml::to_string_pretty(&c).unwrap(), path).unwrap(), c);
        assert_eq!(Config::from_toml("[import]\ngroup_by = \"none\"\n", path).unwrap().import.group_by, GroupBy::None);
        let err = Config::from_toml("[import]\ngroup_by = \"name\"\n", path).unwrap_err();
        assert!(err.to_string().contains("stem"), "the error lists the values: {err}");
        for n in [0, 17] {
            let err = Config::from_toml(&format!("[import]\nmax_photos_per_product = {n}\n"), path).unwrap_err();
            assert!(err.to_string().contains("import.max_photos_per_product"), "{err}");
        }
        let err = Config::from_toml("[import]\ngroupby = \"stem\"\n", path).unwrap_err();
        assert!(err.to_string().contains("groupby"), "{err}");
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::from_toml("[gemini]\nmodle = \"x\"\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("modle"), "{err}");
        let err = Config::from_toml("[imagee]\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("imagee"), "{err}");
    }

    #[test]
    fn invalid_values_name_the_key() {
        let err = Config::from_toml("[image]\njpeg_quality = 0\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("image.jpeg_quality"), "{err}");
        let err = Config::from_toml("[gemini]\ntimeout = \"0s\"\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("gemini.timeout"), "{err}");
        let err = Config::from_toml("[gemini]\ntimeout = \"soon\"\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("timeout"), "{err}");
    }

    #[test]
    fn resilience_sections_stay_top_level_in_the_file() {
        let text = "[circuit_breaker]\nwait_duration_in_open_state = \"30s\"\nfailure_rate_threshold = 25\n\
                    [bulkhead]\nmax_concurrent_calls = 3\n[time_limiter]\ntimeout_duration = \"5s\"\n\
                    [retry]\nmax_attempts = 2\n[rate_limiter]\nenabled = true\n";
        let c = Config::from_toml(text, Path::new("c.toml")).unwrap();
        let r = &c.resilience;
        assert_eq!(r.circuit_breaker.wait_duration_in_open_state, Duration::from_secs(30));
        assert_eq!(r.circuit_breaker.failure_rate_threshold, 25.0);
        assert_eq!(r.bulkhead.max_concurrent_calls, 3);
        assert_eq!(r.time_limiter.timeout_duration, Duration::from_secs(5));
        assert_eq!(r.retry.max_attempts, 2);
        assert!(r.rate_limiter.enabled);
        assert_eq!(r.retry.wait_duration, RetryConfig::default().wait_duration, "unset keys keep their defaults");

        let written = toml::to_string_pretty(&c).unwrap();
        for section in [
            "[gemini]",
            "[image]",
            "[intake]",
            "[circuit_breaker]",
            "[bulkhead]",
            "[time_limiter]",
            "[retry]",
            "[rate_limiter]",
        ] {
            assert!(
                written.contains(&format!("\n{section}\n")) || written.starts_with(&format!("{section}\n")),
                "{section} in {written}"
            );
        }
        assert!(!written.contains("resilience"), "{written}");
        assert_eq!(Config::from_toml(&written, Path::new("c.toml")).unwrap(), c);
        assert!(Config::from_toml("[resilience.retry]\nmax_attempts = 2\n", Path::new("c.toml")).is_err());
    }

    #[test]
    fn unknown_resilience_key_is_named() {
        let err = Config::from_toml("[circuit_breaker]\nfailure_rate = 50\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("failure_rate"), "{err}");
        assert!(err.to_string().contains("line 2"), "the error points at the line: {err}");
        let err = Config::from_toml("[retry]\nmax_attempts = 2\nbackoff = \"1s\"\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("backoff"), "{err}");
        let err = Config::from_toml("[bulkhead]\nmax_wait_duration = \"later\"\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("max_wait_duration"), "{err}");
    }

    #[test]
    fn invalid_resilience_values_name_the_section_and_key() {
        let err =
            Config::from_toml("[circuit_breaker]\nfailure_rate_threshold = 0\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("circuit_breaker.failure_rate_threshold"), "{err}");
        assert!(matches!(err, ConfigError::Resilience(InvalidSetting { .. })), "{err:?}");
        let err = Config::from_toml("[retry]\nmax_attempts = 0\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("retry.max_attempts"), "{err}");
        assert_eq!(err.code(), ErrorCode::Config);
    }

    #[test]
    fn key_is_never_printed() {
        let key = ApiKey::new("AIzaSyTOTALLYSECRETx9Q2").unwrap();
        let mut c = Config::default();
        c.gemini.api_key = Some(key.clone());
        let debug = format!("{c:?} {key}");
        assert!(!debug.contains("TOTALLYSECRET"), "{debug}");
        assert!(debug.contains("••••x9Q2"));
        assert_eq!(ApiKey::new("short").unwrap().masked(), "••••");
        assert_eq!(ApiKey::new("   "), None);
    }

    #[test]
    fn save_round_trips_with_private_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/config.toml");
        let mut c = Config::default();
        c.gemini.api_key = ApiKey::new("abcdefghijkl");
        c.gemini.connect_timeout = Duration::from_millis(1500);
        c.save(&path).unwrap();
        assert_eq!(Config::load(&path, no_env).unwrap(), c);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
    }

    /// A folder other users write to (sticky, like /tmp): what they made there beforehand under
    /// the old temporary name is neither followed nor used.
    #[cfg(unix)]
    #[test]
    fn save_ignores_links_and_files_made_beforehand_in_a_shared_folder() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let path = dir.path().join("config.toml");
        let tmp = dir.path().join("config.toml.tmp");
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let mut c = Config::default();
        c.gemini.api_key = ApiKey::new("abcdefghijkl");
        c.save(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "the link's target is untouched");
        assert!(std::fs::symlink_metadata(&tmp).unwrap().file_type().is_symlink());
        let is_private_config = |path: &Path| {
            let meta = std::fs::symlink_metadata(path).unwrap();
            assert!(meta.file_type().is_file());
            assert_eq!(meta.mode() & 0o7777, 0o600);
            assert_eq!(meta.uid(), rustix::process::geteuid().as_raw());
            assert_eq!(Config::load(path, no_env).unwrap().gemini.api_key, c.gemini.api_key);
        };
        is_private_config(&path);

        // A file anyone may write, owned by another user, under the temporary name.
        std::fs::remove_file(&tmp).unwrap();
        std::fs::write(&tmp, "theirs").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::os::unix::fs::chown(&tmp, Some(65534), None).unwrap();
        c.save(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&tmp).unwrap(), "theirs", "their file did not become the config");
        is_private_config(&path);
    }

    #[cfg(unix)]
    #[test]
    fn a_config_others_may_change_or_own_is_refused_naming_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[gemini]\nbase_url = \"https://attacker.example\"\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
        let err = Config::load(&path, no_env).unwrap_err();
        assert!(
            matches!(err, ConfigError::Exposed { exposure: Exposure::WritableByOthers { mode: 0o664 }, .. }),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains(&format!("chmod 600 {}", path.display())), "{message}");
        assert!(message.contains("can be changed by other users (mode 0664)"), "{message}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o646)).unwrap();
        assert!(matches!(Config::load(&path, no_env), Err(ConfigError::Exposed { .. })));

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Config::load(&path, no_env).unwrap().gemini.base_url, "https://attacker.example");
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        let err = Config::load(&path, no_env).unwrap_err();
        assert!(
            matches!(err, ConfigError::Exposed { exposure: Exposure::OwnedByAnother { owner: 65534 }, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("belongs to another user (uid 65534)"), "{err}");
    }

    #[test]
    fn data_dir_precedence() {
        let env = |k: &str| (k == ENV_DATA_DIR).then(|| "/from/env".to_string());
        assert_eq!(data_dir(Some(Path::new("/cli")), env), PathBuf::from("/cli"));
        assert_eq!(data_dir(None, env), PathBuf::from("/from/env"));
        assert!(data_dir(None, no_env).ends_with("product-extractor"));
    }
}
