//! `key set | status | delete`: the Gemini API key in the OS keyring. `key set` reads the key from
//! standard input (hidden when it is a terminal), never from an argument: arguments end up in the
//! shell's history and in every process listing.

use clap::Subcommand;
use pe_core::config::ApiKey;
use serde_json::json;

use super::{usage_error, EXIT_OK, EXIT_USAGE};
use crate::dto::KeySource;
use crate::state::AppState;
use crate::terminal::{self, errln, outln};

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Store the key read from standard input in the OS keyring (or, with --in-config-file, in
    /// the config file as plain text).
    Set {
        /// Keep the key in the config file instead, as plain text readable by your account only:
        /// for sessions without a keyring. GEMINI_API_KEY is the other way.
        #[arg(long)]
        in_config_file: bool,
    },
    /// Where the key comes from (environment, keyring, config file or none) and its last four
    /// characters.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Remove the key from the keyring and the config file.
    Delete,
}

pub async fn run(state: &AppState, command: KeyCommand) -> i32 {
    match command {
        KeyCommand::Set { in_config_file } => set(state, in_config_file).await,
        KeyCommand::Status { json } => status(state, json),
        KeyCommand::Delete => delete(state).await,
    }
}

async fn set(state: &AppState, in_config_file: bool) -> i32 {
    let key = match read_key() {
        Ok(Some(key)) => key,
        Ok(None) => return usage_error("no key on standard input: paste it, or pipe it in (`key set < file`)"),
        Err(e) => return usage_error(&format!("cannot read the key from standard input: {e}")),
    };
    let result = if in_config_file {
        let mut config = state.file_config();
        config.gemini.api_key = Some(key.clone());
        config.gemini.key_storage = pe_core::config::KeyStorage::ConfigFile;
        state.apply_file_config(config).await
    } else {
        state.set_keyring_key(Some(key.clone())).await
    };
    if let Err(e) = result {
        return usage_error(&e.message);
    }
    if in_config_file {
        errln!(
            "warning: the key ({}) is stored in plain text in {} (readable by your account only)",
            key.masked(),
            state.paths().config_file.display()
        );
    } else {
        outln!("The key ({}) is stored in the OS keyring.", key.masked());
    }
    if matches!(state.key_status().source, KeySource::Environment) {
        errln!("note: GEMINI_API_KEY is set in this environment and overrides the stored key");
    }
    EXIT_OK
}

/// The key from standard input ([`super::read_secret`]): the first line that is a key.
fn read_key() -> std::io::Result<Option<ApiKey>> {
    Ok(super::read_secret("Gemini API key (input hidden): ")?.lines().find_map(ApiKey::new))
}

fn status(state: &AppState, json: bool) -> i32 {
    let status = state.key_status();
    let source = match status.source {
        KeySource::Environment => "environment",
        KeySource::Keyring => "keyring",
        KeySource::ConfigFile => "config_file",
        KeySource::Demo => "demo",
        KeySource::None => "none",
    };
    if json {
        let _ = terminal::out_json(
            &json!({"source": source, "hint": status.hint, "keyring_problem": status.keyring_problem}),
        );
        return EXIT_OK;
    }
    let hint = status.hint.as_deref().unwrap_or("");
    match status.source {
        KeySource::Environment => outln!("key: {hint}, from GEMINI_API_KEY (it overrides a stored key)"),
        KeySource::Keyring => outln!("key: {hint}, from the OS keyring"),
        KeySource::ConfigFile => {
            outln!("key: {hint}, from the config file {} (plain text)", state.paths().config_file.display())
        }
        KeySource::Demo | KeySource::None => {
            outln!("key: none — `product-extractor key set` stores one, or set GEMINI_API_KEY")
        }
    }
    if let Some(problem) = status.keyring_problem {
        outln!("keyring: {problem}");
    }
    EXIT_OK
}

async fn delete(state: &AppState) -> i32 {
    let before = state.key_status();
    if let Err(e) = state.set_keyring_key(None).await {
        errln!("error: {}", e.message);
        return EXIT_USAGE;
    }
    match before.source {
        KeySource::Keyring | KeySource::ConfigFile => {
            outln!("The stored key ({}) is deleted.", before.hint.unwrap_or_default())
        }
        KeySource::Environment => outln!("Any stored key is deleted."),
        KeySource::Demo | KeySource::None => outln!("No key was stored."),
    }
    if matches!(state.key_status().source, KeySource::Environment) {
        errln!("note: GEMINI_API_KEY is still set in this environment");
    }
    EXIT_OK
}
