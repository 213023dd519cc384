//! Status, Settings, "Test connection" and demo mode.

use std::time::{Duration, Instant};

use pe_core::config::{ApiKey, Config, KeyStorage};
use pe_core::gemini::GeminiError;
use pe_core::pipeline::ExtractError;
use pe_core::resilience::{ResilienceConfig, SlotPolicy};
use pe_core::{ErrorCode, ErrorReport};
use tauri::State;

use crate::dto::{
    ApiKeyChange, AppStatus, CatalogCheck, ConnectionCheck, GeminiSettings, HttpApiSettings, PricingSettings, Settings,
    SettingsInput,
};
use crate::state::AppState;

pub async fn app_status(state: State<'_, AppState>) -> Result<AppStatus, ErrorReport> {
    Ok(state.status())
}

/// Connects to a team catalog's URL and reads its versions, changing nothing (no migration, no
/// password saved): whether this desktop could open it. The password is `password` when given
/// (typed in Settings), else the URL's, `PGPASSWORD`'s, `~/.pgpass`'s or the keyring's; errors
/// say what to check and never show it.
pub async fn test_catalog(
    state: State<'_, AppState>,
    url: String,
    password: Option<String>,
) -> Result<CatalogCheck, ErrorReport> {
    use pe_core::catalog::server::SERVER_SCHEMA_VERSION;
    let url = server_url(&url)?;
    let (server, typed) = connect_team(&state, &url, password).await?;
    Ok(CatalogCheck {
        url: url.to_string(),
        server_version: server.server_version().await?,
        schema_version: server.schema_version().await?,
        supported_version: SERVER_SCHEMA_VERSION,
        password_source: if typed {
            Some("the password typed here".into())
        } else {
            server.password_source().map(ToString::to_string)
        },
    })
}

/// Chooses the catalog the app opens at its next start: a team catalog's URL (`url`), or this
/// computer's catalog file (`None`). A team catalog is connected to first (with `password` when
/// given), and refused when it cannot be reached or is newer than this app; then the password
/// typed is saved in the keyring (never in the config file: a URL with a password in it is
/// refused) and `[catalog] url` is written.
pub async fn choose_catalog(
    state: State<'_, AppState>,
    url: Option<String>,
    password: Option<String>,
) -> Result<AppStatus, ErrorReport> {
    use pe_core::catalog::server::SERVER_SCHEMA_VERSION;
    let mut config = state.file_config();
    let Some(text) = url.map(|u| u.trim().to_string()).filter(|u| !u.is_empty()) else {
        config.catalog.url = None;
        state.apply_file_config(config).await?;
        return Ok(state.status());
    };
    let url = server_url(&text)?;
    if url.has_password() {
        return Err(ErrorReport::new(
            ErrorCode::Config,
            "take the password out of the URL and type it in the Password field: it is kept in this \
             computer's keyring, never in the config file",
        ));
    }
    let (server, typed) = connect_team(&state, &url, password.clone()).await?;
    let found = server.schema_version().await?;
    if found > SERVER_SCHEMA_VERSION {
        return Err(pe_core::catalog::server::ServerError::SchemaTooNew {
            url: url.to_string(),
            found,
            supported: SERVER_SCHEMA_VERSION,
        }
        .into());
    }
    drop(server);
    if let Some(password) = password.filter(|_| typed) {
        let key = crate::team::Login::read(state.keyring(), &url, state.env()).await.key(&url);
        let keyring = state.keyring().clone();
        tokio::task::spawn_blocking(move || keyring.set_catalog_password(&key, &password))
            .await
            .map_err(|e| ErrorReport::new(ErrorCode::Io, format!("the keyring task failed: {e}")))??;
    }
    config.catalog.url = Some(text);
    state.apply_file_config(config).await?;
    Ok(state.status())
}

/// Restarts the app (after choosing another catalog).
pub async fn restart_app<R: tauri::Runtime>(app: tauri::AppHandle<R>) -> Result<(), ErrorReport> {
    tracing::info!("restarting to open another catalog");
    app.restart()
}

/// A team catalog's URL, or the error that says what one looks like.
fn server_url(text: &str) -> Result<pe_core::catalog::server::ServerUrl, ErrorReport> {
    use pe_core::catalog::server::CatalogUrl;
    match CatalogUrl::parse(text)? {
        CatalogUrl::Server(url) => Ok(url),
        CatalogUrl::Sqlite(_) => Err(ErrorReport::new(
            ErrorCode::Config,
            "a team catalog's URL starts with postgres:// (e.g. postgres://alice@db.example:5432/catalog)",
        )),
    }
}

/// Connects to a team catalog with the password typed (`true` when it was used), else with the
/// places the app looks for one.
async fn connect_team(
    state: &AppState,
    url: &pe_core::catalog::server::ServerUrl,
    password: Option<String>,
) -> Result<(pe_core::catalog::server::ServerCatalog, bool), ErrorReport> {
    let login = crate::team::Login::read(state.keyring(), url, state.env()).await.in_data_dir(&state.paths().data_dir);
    match password.filter(|p| !p.is_empty()) {
        Some(password) => Ok((login.connect(&url.with_password(&password)).await?, true)),
        None => Ok((login.connect(url).await?, false)),
    }
}

pub async fn get_settings(state: State<'_, AppState>) -> Result<Settings, ErrorReport> {
    Ok(settings_of(&state).await)
}

pub async fn save_settings(state: State<'_, AppState>, input: SettingsInput) -> Result<Settings, ErrorReport> {
    let change = input.api_key.clone();
    let config = apply_input(state.file_config(), input)?;
    state.apply_file_config(config).await?;
    match change {
        ApiKeyChange::Set { key } => state.set_keyring_key(api_key(key)?.into()).await?,
        ApiKeyChange::Clear => state.set_keyring_key(None).await?,
        ApiKeyChange::Keep | ApiKeyChange::SetInConfigFile { .. } => {}
    }
    state.window_api().reconcile(&state).await;
    Ok(settings_of(&state).await)
}

pub async fn test_connection(state: State<'_, AppState>) -> Result<ConnectionCheck, ErrorReport> {
    let pipeline = state.pipeline();
    let started = Instant::now();
    // A Gemini call like any other: through the shared stack, so an open breaker answers at once.
    let gemini = pipeline.gemini();
    let models = pipeline
        .stack()
        .call(SlotPolicy::Configured, GeminiError::verdict, || gemini.list_models())
        .await
        .map_err(ExtractError::from)?;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(ConnectionCheck { models, latency_ms })
}

pub async fn set_demo_mode(state: State<'_, AppState>, enabled: bool) -> Result<AppStatus, ErrorReport> {
    state.set_demo(enabled).await
}

async fn settings_of(state: &AppState) -> Settings {
    let file = state.file_config();
    let answered_by = answered_by(state, &file.gemini.model).await;
    Settings {
        gemini: GeminiSettings::of(&file),
        image: file.image.clone(),
        resilience: file.resilience.clone(),
        pricing: PricingSettings::of(&file, answered_by.as_deref()),
        api_key: state.key_status(),
        config_path: state.paths().config_file.display().to_string(),
        http_api: HttpApiSettings {
            with_window: file.server.with_window,
            listen: file.server.listen.to_string(),
            token_set: matches!(crate::api::configured_token(state, &file.server).await, Ok(Some(_))),
            status: state.window_api().status(),
        },
    }
}

/// The model `model`'s calls are answered by, as they are priced: the alias's model the client
/// looked up, else the one its newest answer in this catalog named; `None` when neither is known.
async fn answered_by(state: &AppState, model: &str) -> Option<String> {
    let pipeline = state.pipeline();
    if pipeline.gemini().model() == model {
        if let Some(resolved) = pipeline.gemini().resolved_model() {
            return Some(resolved.to_string());
        }
    }
    match state.catalog().measured_call(model).await {
        Ok(measured) => measured.and_then(|m| m.model_version),
        Err(e) => {
            tracing::debug!("no answered model for the price in Settings: {e}");
            None
        }
    }
}

/// The form's values applied to the file config. A bad duration names its key.
pub fn apply_input(mut config: Config, input: SettingsInput) -> Result<Config, ErrorReport> {
    let g = input.gemini;
    config.gemini.base_url = g.base_url.trim().to_string();
    config.gemini.model = g.model.trim().to_string();
    config.gemini.timeout = duration("gemini.timeout", &g.timeout)?;
    config.gemini.connect_timeout = duration("gemini.connect_timeout", &g.connect_timeout)?;
    config.gemini.read_timeout = duration("gemini.read_timeout", &g.read_timeout)?;
    config.gemini.thinking = g.thinking;
    config.gemini.max_output_tokens = g.max_output_tokens;
    config.gemini.temperature = g.temperature;
    config.gemini.media_resolution = g.media_resolution;
    config.image = input.image;
    if let Some(http_api) = input.http_api {
        config.server.with_window = http_api.with_window;
        config.server.listen = http_api.listen.trim().parse().map_err(|_| {
            ErrorReport::new(
                ErrorCode::Config,
                format!(
                    "invalid setting server.listen: {:?} is not an address and port like 127.0.0.1:8080",
                    http_api.listen.trim()
                ),
            )
        })?;
    }
    // The price rows replace the user's; the daily budget stays as it is.
    config.pricing.models.clear();
    for row in input.prices {
        let model = row.model.trim().to_string();
        if config.pricing.models.insert(model.clone(), row.price).is_some() {
            return Err(ErrorReport::new(
                ErrorCode::Config,
                format!("invalid setting pricing.\"{model}\": the model has two price rows; keep one"),
            ));
        }
    }
    config.resilience = serde_path_to_error::deserialize::<_, ResilienceConfig>(input.resilience)
        .map_err(|e| ErrorReport::new(ErrorCode::Config, format!("invalid setting {}: {}", e.path(), e.inner())))?;
    // A key for the keyring is stored by `save_settings` once the rest is valid; here only the
    // file's part of the change.
    match input.api_key {
        ApiKeyChange::Keep => {}
        ApiKeyChange::Clear => config.gemini.api_key = None,
        ApiKeyChange::Set { key } => {
            api_key(key)?;
        }
        ApiKeyChange::SetInConfigFile { key } => {
            config.gemini.api_key = Some(api_key(key)?);
            config.gemini.key_storage = KeyStorage::ConfigFile;
        }
    }
    config.validate()?;
    Ok(config)
}

fn api_key(key: String) -> Result<ApiKey, ErrorReport> {
    ApiKey::new(key).ok_or_else(|| {
        ErrorReport::new(ErrorCode::Config, "The API key is empty — paste the key from Google AI Studio.")
    })
}

/// A duration typed in Settings; the message names the key (the form finds its field by it) and
/// says what a duration looks like, not where the parser stopped.
fn duration(key: &str, text: &str) -> Result<Duration, ErrorReport> {
    humantime::parse_duration(text.trim()).map_err(|_| {
        ErrorReport::new(
            ErrorCode::Config,
            format!("invalid setting {key}: \"{}\" is not a duration such as 30s, 2m or 1h30m", text.trim()),
        )
    })
}
