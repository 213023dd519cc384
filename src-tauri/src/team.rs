//! Opening a team catalog from the app (the window, the CLI, Settings) with every place its
//! password may be: the URL, `PGPASSWORD`, `~/.pgpass`, and this computer's keyring
//! (`pe_core::catalog::server::resolve`'s order). The keyring may block on D-Bus, so the saved
//! password is read on the blocking pool before connecting.

use std::path::{Path, PathBuf};

use pe_core::catalog::desktop_key::DesktopKey;
use pe_core::catalog::server::{resolve, Credentials, PasswordSource, ServerCatalog, ServerError, ServerUrl};
use pe_core::catalog::{Catalog, CatalogError};

use crate::secrets::Keyring;
use crate::state::Env;

/// What a connection to one server may use: the process environment, the home directory and the
/// password this desktop saved for it.
pub struct Login {
    env: Env,
    home: Option<PathBuf>,
    /// The saved password's key (`user@host:port/db`) and the password.
    saved: Option<(String, String)>,
    /// The data dir whose `desktop.key` tags the paths this desktop queues (see
    /// `pe_core::catalog::desktop_key`); without one, a connection trusts only its own rows.
    data_dir: Option<PathBuf>,
}

impl Login {
    /// Reads the password saved for `url` in `keyring` (a keyring that cannot be used counts as
    /// none; the error that follows names the other places). `env` is the app's environment
    /// (`PGPASSWORD`, `HOME`, …).
    pub async fn read(keyring: &Keyring, url: &ServerUrl, env: Env) -> Self {
        let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).or_else(pe_core::catalog::server::home_dir);
        let key = url.password_key(&Credentials::of(&*env, home.as_deref()));
        let keyring = keyring.clone();
        let lookup = key.clone();
        let saved = tokio::task::spawn_blocking(move || keyring.catalog_password(&lookup)).await;
        let saved = match saved {
            Ok(Ok(Some(password))) => Some((key, password)),
            Ok(Ok(None)) => None,
            Ok(Err(e)) => {
                tracing::info!(error = %e, "no catalog password from the keyring");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the keyring failed");
                None
            }
        };
        Self { env, home, saved, data_dir: None }
    }

    /// Connections made with this login queue and open paths as the desktop of `data_dir`.
    pub fn in_data_dir(mut self, data_dir: &Path) -> Self {
        self.data_dir = Some(data_dir.to_path_buf());
        self
    }

    fn saved_for(&self, key: &str) -> Option<String> {
        self.saved.as_ref().filter(|(k, _)| k == key).map(|(_, password)| password.clone())
    }

    /// Connects to the server (nothing migrated).
    pub async fn connect(&self, url: &ServerUrl) -> Result<ServerCatalog, ServerError> {
        let saved = |key: &str| self.saved_for(key);
        let credentials = Credentials { env: &*self.env, home: self.home.as_deref(), saved: Some(&saved) };
        let server = ServerCatalog::connect_using(url, &credentials).await?;
        Ok(match &self.data_dir {
            Some(dir) => match DesktopKey::load_or_create(dir) {
                Ok(key) => server.with_desktop_key(key),
                Err(e) => {
                    // The queue still works: this process trusts the rows it queues itself.
                    tracing::warn!(error = %e, "no desktop key: photos queued before this run will be refused");
                    server
                }
            },
            None => server,
        })
    }

    /// Opens the catalog on the server: connected and migrated.
    pub async fn open(&self, url: &ServerUrl) -> Result<Catalog, CatalogError> {
        let server = self.connect(url).await?;
        server.migrate().await?;
        Ok(Catalog::on_server(server))
    }

    /// Where the password for `url` would come from now (`None`: nowhere).
    pub fn source(&self, url: &ServerUrl) -> Option<PasswordSource> {
        let saved = |key: &str| self.saved_for(key);
        let credentials = Credentials { env: &*self.env, home: self.home.as_deref(), saved: Some(&saved) };
        resolve(url, &credentials).password
    }

    /// The key the password of `url` is saved under (`user@host:port/db`).
    pub fn key(&self, url: &ServerUrl) -> String {
        url.password_key(&Credentials::of(&*self.env, self.home.as_deref()))
    }
}
