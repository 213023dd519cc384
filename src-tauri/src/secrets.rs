//! The API key in the OS keyring (the Secret Service on Linux, Keychain on macOS, the Credential
//! Manager on Windows), through the `keyring` crate: service `product-extractor`, user
//! `gemini-api-key`; beside it a team catalog's password and the HTTP API's token. `PRODUCT_EXTRACTOR_KEYRING_SERVICE` names another service, so that two setups
//! (or parallel tests) on one account keep separate keys.
//!
//! Every call may block on D-Bus: async callers run it on the blocking pool.

use pe_core::config::ApiKey;
use pe_core::{ErrorCode, ErrorReport};

pub const DEFAULT_SERVICE: &str = "product-extractor";
pub const ENV_SERVICE: &str = "PRODUCT_EXTRACTOR_KEYRING_SERVICE";
const USER: &str = "gemini-api-key";
/// The keyring user of a team catalog server's password, before its `user@host:port/db`.
const CATALOG_USER_PREFIX: &str = "catalog-password ";
/// The HTTP API's bearer token (`serve token set`).
const API_TOKEN_USER: &str = "http-api-token";

/// Why the keyring could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    /// No keyring to talk to (no Secret Service on the session bus, no session bus, locked and
    /// no one to unlock it).
    #[error("no OS keyring is available ({0})")]
    Unavailable(String),
    /// The keyring answered with an error.
    #[error("the OS keyring failed: {0}")]
    Failed(String),
}

impl From<KeyringError> for ErrorReport {
    fn from(e: KeyringError) -> Self {
        let hint = match e {
            KeyringError::Unavailable(_) => {
                " Set GEMINI_API_KEY in the environment instead, or choose to keep the key in the config \
                 file (plain text, readable by your account only)."
            }
            KeyringError::Failed(_) => " Try again; if it persists, set GEMINI_API_KEY in the environment.",
        };
        ErrorReport::new(ErrorCode::Config, format!("{e}.{hint}"))
    }
}

/// The key's entry in the keyring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyring {
    service: String,
}

impl Keyring {
    /// The entry the environment names (`PRODUCT_EXTRACTOR_KEYRING_SERVICE`), else the default.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let service = env(ENV_SERVICE).filter(|s| !s.trim().is_empty()).unwrap_or_else(|| DEFAULT_SERVICE.into());
        Self { service: service.trim().to_string() }
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    /// The password saved for the catalog server `key` (entry `catalog-password user@host:port/db`;
    /// the key is `pe_core::catalog::server::password_key`), `None` when there is none.
    pub fn catalog_password(&self, key: &str) -> Result<Option<String>, KeyringError> {
        self.secret(&format!("{CATALOG_USER_PREFIX}{key}"))
    }

    /// Saves the password of the catalog server `key`, replacing any other, and reads it back.
    pub fn set_catalog_password(&self, key: &str, password: &str) -> Result<(), KeyringError> {
        self.set_secret(&format!("{CATALOG_USER_PREFIX}{key}"), password)
    }

    /// Removes the password of the catalog server `key`; `false` when there was none.
    pub fn delete_catalog_password(&self, key: &str) -> Result<bool, KeyringError> {
        self.delete_secret(&format!("{CATALOG_USER_PREFIX}{key}"))
    }

    /// The HTTP API's bearer token (`serve token set`), `None` when there is none.
    pub fn api_token(&self) -> Result<Option<String>, KeyringError> {
        self.secret(API_TOKEN_USER)
    }

    /// Saves the HTTP API's bearer token, replacing any other, and reads it back.
    pub fn set_api_token(&self, token: &str) -> Result<(), KeyringError> {
        self.set_secret(API_TOKEN_USER, token)
    }

    /// Removes the HTTP API's bearer token; `false` when there was none.
    pub fn delete_api_token(&self) -> Result<bool, KeyringError> {
        self.delete_secret(API_TOKEN_USER)
    }

    fn secret(&self, user: &str) -> Result<Option<String>, KeyringError> {
        match keyring::Entry::new(&self.service, user).map_err(classify)?.get_password() {
            Ok(secret) => Ok(Some(secret)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(classify(e)),
        }
    }

    /// Saves a secret and reads it back: a keyring that accepts a write and loses it is not one
    /// to rely on.
    fn set_secret(&self, user: &str, secret: &str) -> Result<(), KeyringError> {
        let entry = keyring::Entry::new(&self.service, user).map_err(classify)?;
        entry.set_password(secret).map_err(classify)?;
        match entry.get_password() {
            Ok(stored) if stored == secret => Ok(()),
            Ok(_) => Err(KeyringError::Failed("the secret read back differs from the one stored".into())),
            Err(e) => Err(classify(e)),
        }
    }

    fn delete_secret(&self, user: &str) -> Result<bool, KeyringError> {
        match keyring::Entry::new(&self.service, user).map_err(classify)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(e) => Err(classify(e)),
        }
    }

    /// The stored key, `None` when there is none.
    pub fn get(&self) -> Result<Option<ApiKey>, KeyringError> {
        Ok(self.secret(USER)?.and_then(ApiKey::new))
    }

    /// Stores the key, replacing any other, and reads it back.
    pub fn set(&self, key: &ApiKey) -> Result<(), KeyringError> {
        self.set_secret(USER, key.expose())
    }

    /// Removes the key; `false` when there was none.
    pub fn delete(&self) -> Result<bool, KeyringError> {
        self.delete_secret(USER)
    }
}

fn classify(e: keyring::Error) -> KeyringError {
    match e {
        keyring::Error::NoDefaultStore | keyring::Error::NoStorageAccess(_) => KeyringError::Unavailable(e.to_string()),
        // zbus reports a missing session bus or Secret Service as a platform failure.
        keyring::Error::PlatformFailure(ref inner) => {
            let text = inner.to_string();
            if looks_unavailable(&text) {
                KeyringError::Unavailable(text)
            } else {
                KeyringError::Failed(text)
            }
        }
        other => KeyringError::Failed(other.to_string()),
    }
}

fn looks_unavailable(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    [
        "dbus_session_bus_address",
        "session bus",
        "no such file",
        "connection refused",
        "serviceunknown",
        "service unknown",
        "was not provided by any .service files",
        "locked",
    ]
    .iter()
    .any(|needle| text.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_comes_from_the_environment_or_defaults() {
        assert_eq!(Keyring::from_env(&|_| None).service(), DEFAULT_SERVICE);
        assert_eq!(Keyring::from_env(&|_| Some("  ".into())).service(), DEFAULT_SERVICE);
        assert_eq!(Keyring::from_env(&|k| (k == ENV_SERVICE).then(|| "pe-test".into())).service(), "pe-test");
    }

    #[test]
    fn a_missing_bus_is_unavailable_not_a_failure() {
        assert!(looks_unavailable("I/O error: No such file or directory (os error 2)"));
        assert!(looks_unavailable(
            "org.freedesktop.DBus.Error.ServiceUnknown: The name org.freedesktop.secrets was not provided by any .service files"
        ));
        assert!(!looks_unavailable("the item has an unexpected attribute"));
    }

    #[test]
    fn the_user_is_told_what_to_do() {
        let report = ErrorReport::from(KeyringError::Unavailable("no session bus".into()));
        assert!(report.message.contains("GEMINI_API_KEY"), "{}", report.message);
        assert!(report.message.contains("config file"), "{}", report.message);
    }
}
