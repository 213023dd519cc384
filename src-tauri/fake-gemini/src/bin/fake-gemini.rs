//! The fake Gemini on its own, for checking it by hand or with another client (e.g. the
//! `google-genai` SDK in `tests/sdk`): `cargo run -p fake-gemini --bin fake-gemini [KEY]`.
//! Prints `http://127.0.0.1:PORT` on the first line of stdout, then serves until stdin closes
//! (or the process is killed). The accepted key is `test-key` unless one is given.

use std::io::{BufRead, Write};

use fake_gemini::{FakeGemini, FakeOptions};

fn main() -> std::io::Result<()> {
    let key = std::env::args().nth(1).unwrap_or_else(|| "test-key".into());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let fake = FakeGemini::start(FakeOptions { api_keys: vec![key], ..FakeOptions::default() }).await?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", fake.base_url())?;
        out.flush()?;
        drop(out);
        // Serve until stdin ends: whoever started us closes it (or kills us) to stop.
        tokio::task::spawn_blocking(|| for _ in std::io::stdin().lock().lines() {}).await.ok();
        fake.shutdown().await;
        Ok(())
    })
}
