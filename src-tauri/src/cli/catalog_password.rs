//! `catalog password set | status | delete`: the team catalog server's password in this
//! computer's keyring (see `crate::team`). `set` reads it from standard input (hidden when it is
//! a terminal), never from an argument; it connects with it first, so a wrong password is never
//! saved.

use clap::Subcommand;
use pe_core::catalog::server::{CatalogUrl, PasswordSource, ServerUrl};
use serde_json::json;

use super::{failed_with, usage_error, Global, EXIT_OK};
use crate::secrets::Keyring;
use crate::state::process_env;
use crate::team::Login;
use crate::terminal::{self, errln, outln};

#[derive(Debug, Subcommand)]
pub enum PasswordCommand {
    /// Read the password from standard input, check it against the server, and save it in the
    /// keyring.
    Set,
    /// Whether a password is saved, and where the one the app would use comes from (the URL,
    /// PGPASSWORD, ~/.pgpass, the keyring, or none).
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Remove the saved password from the keyring.
    Delete,
}

pub async fn run(global: &Global, command: PasswordCommand) -> i32 {
    let url = match global.catalog_url(&global.paths()) {
        Ok(Some(CatalogUrl::Server(url))) => url,
        Ok(_) => {
            return usage_error(
                "catalog password needs a server catalog: give --catalog postgres://user@host/db, or set \
                 PRODUCT_EXTRACTOR_CATALOG_URL or [catalog] url",
            )
        }
        Err(e) => return usage_error(&e.message),
    };
    let keyring = Keyring::from_env(&*process_env());
    match command {
        PasswordCommand::Set => set(&keyring, &url).await,
        PasswordCommand::Status { json } => status(&keyring, &url, json).await,
        PasswordCommand::Delete => delete(&keyring, &url).await,
    }
}

async fn set(keyring: &Keyring, url: &ServerUrl) -> i32 {
    let password = match read_password() {
        Ok(Some(password)) => password,
        Ok(None) => return usage_error("no password on standard input: type it, or pipe it in"),
        Err(e) => return usage_error(&format!("cannot read the password from standard input: {e}")),
    };
    let login = Login::read(keyring, url, process_env()).await;
    let key = login.key(url);
    // Checked before it is saved: the URL, PGPASSWORD and ~/.pgpass are left out of this check.
    if let Err(e) = login.connect(&url.with_password(&password)).await {
        return failed_with(e, false);
    }
    let keyring = keyring.clone();
    let saved_key = key.clone();
    match tokio::task::spawn_blocking(move || keyring.set_catalog_password(&saved_key, &password)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return failed_with(e, false),
        Err(e) => return usage_error(&format!("the keyring task failed: {e}")),
    }
    outln!("The password for {key} is saved in this computer's keyring.");
    if let Some(other) = login.source(url).filter(|s| *s != PasswordSource::Keyring) {
        errln!("note: {} holds a password for this server too, and is used first", other);
    }
    EXIT_OK
}

async fn status(keyring: &Keyring, url: &ServerUrl, json: bool) -> i32 {
    let login = Login::read(keyring, url, process_env()).await;
    let key = login.key(url);
    let lookup = (keyring.clone(), key.clone());
    let saved = tokio::task::spawn_blocking(move || lookup.0.catalog_password(&lookup.1)).await;
    let (saved, problem) = match saved {
        Ok(Ok(found)) => (found.is_some(), None),
        Ok(Err(e)) => (false, Some(e.to_string())),
        Err(e) => (false, Some(e.to_string())),
    };
    let source = login.source(url);
    let source_name = match &source {
        Some(PasswordSource::Url) => "url",
        Some(PasswordSource::Environment) => "environment",
        Some(PasswordSource::PasswordFile(_)) => "password_file",
        Some(PasswordSource::Keyring) => "keyring",
        None => "none",
    };
    if json {
        let _ = terminal::out_json(
            &json!({"server": url.to_string(), "key": key, "saved": saved, "source": source_name, "keyring_problem": problem}),
        );
        return EXIT_OK;
    }
    outln!("{key}: {}", if saved { "a password is saved in the keyring" } else { "no password saved in the keyring" });
    match source {
        Some(source) => outln!("The app uses the password from {source}."),
        None => outln!("The app has no password for this server (fine if the server asks for none)."),
    }
    if let Some(problem) = problem {
        outln!("keyring: {problem}");
    }
    EXIT_OK
}

async fn delete(keyring: &Keyring, url: &ServerUrl) -> i32 {
    let key = Login::read(keyring, url, process_env()).await.key(url);
    let (keyring, lookup) = (keyring.clone(), key.clone());
    match tokio::task::spawn_blocking(move || keyring.delete_catalog_password(&lookup)).await {
        Ok(Ok(true)) => outln!("The password for {key} is removed from the keyring."),
        Ok(Ok(false)) => outln!("No password for {key} was saved in the keyring."),
        Ok(Err(e)) => return failed_with(e, false),
        Err(e) => return usage_error(&format!("the keyring task failed: {e}")),
    }
    EXIT_OK
}

/// The password from standard input ([`super::read_secret`]): its first line, kept as typed (a
/// password may start or end with spaces).
fn read_password() -> std::io::Result<Option<String>> {
    let text = super::read_secret("Catalog server password (input hidden): ")?;
    Ok(text.lines().next().map(str::to_string).filter(|p| !p.is_empty()))
}
