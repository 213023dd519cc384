//! The installed package: `make test-package` builds the .deb, installs it with apt, runs this
//! test (ignored otherwise), and removes the package. The CLI runs from /usr/bin against the fake
//! Gemini, and the desktop entry says what "Open with" offers.

use std::path::Path;
use std::process::Command;

use fake_gemini::{FakeGemini, FakeOptions};

const INSTALLED: &str = "/usr/bin/product-extractor";
const DESKTOP: &str = "/usr/share/applications/product-extractor.desktop";

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the .deb installed: make test-package"]
async fn the_installed_cli_extracts_from_usr_bin() {
    assert!(Path::new(INSTALLED).exists(), "{INSTALLED} is missing: install the .deb first (make test-package)");
    let fake = FakeGemini::start(FakeOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let photo = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/product.jpg");
    let mut cmd = Command::new(INSTALLED);
    cmd.args(["extract", "--json"])
        .arg(&photo)
        .env_remove("DISPLAY")
        .env("PRODUCT_EXTRACTOR_DATA_DIR", dir.path())
        .env("PRODUCT_EXTRACTOR_KEYRING_SERVICE", format!("product-extractor-test:{}", dir.path().display()))
        .env("GEMINI_API_KEY", "test-key")
        .env("GEMINI_BASE_URL", fake.base_url());
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let first: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["ok"], true, "{first}");
    assert_eq!(fake.generate_count(), 1, "one call reached the fake from the installed binary");

    let version = Command::new(INSTALLED).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
#[ignore = "needs the .deb installed: make test-package"]
fn the_desktop_entry_opens_every_photo_type_we_read() {
    let entry = std::fs::read_to_string(DESKTOP).unwrap_or_else(|e| panic!("{DESKTOP}: {e}"));
    let exec = entry.lines().find_map(|l| l.strip_prefix("Exec=")).expect("an Exec line");
    assert!(exec.starts_with("product-extractor") && exec.ends_with("%F"), "{exec}");
    let mime: Vec<&str> = entry
        .lines()
        .find_map(|l| l.strip_prefix("MimeType="))
        .expect("a MimeType line")
        .split(';')
        .filter(|m| !m.is_empty())
        .collect();
    for wanted in pe_core::intake::PHOTO_MIME_TYPES {
        assert!(mime.contains(wanted), "{wanted} missing from {mime:?}");
    }
    assert!(mime.contains(&"inode/directory"), "folders open with it too: {mime:?}");
}
