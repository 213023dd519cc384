//! `fake-gemini`: the fake Gemini server as a process, for clients that are not Rust (Google's
//! Python SDK in `tests/sdk/`). It binds 127.0.0.1 on a free port, prints its base URL as the
//! first line of stdout, and serves until its stdin closes (the parent exited) or it is killed.
//!
//! ```text
//! fake-gemini [--key KEY] [--script BEHAVIOR,BEHAVIOR,...]
//! ```
//! `--script` queues behaviors for the next `generateContent` requests, in order, then the
//! default (a product) answers: `product`, `daily_quota`, `quota`, `unavailable`,
//! `failed_precondition`, `request_timeout`, `thinking_exhausted`, `max_tokens`, `finish:REASON`,
//! `blocked:REASON`, `garbage`.

use std::io::{BufRead, Write};
use std::time::Duration;

use fake_gemini::{Behavior, FakeGemini, FakeOptions};

fn behavior(name: &str) -> Result<Behavior, String> {
    Ok(match name.trim() {
        "product" => Behavior::Product,
        "daily_quota" => Behavior::DailyQuota,
        "quota" => Behavior::Quota { retry_delay: Duration::from_secs(26) },
        "unavailable" => Behavior::Unavailable,
        "failed_precondition" => Behavior::FailedPrecondition,
        "request_timeout" => Behavior::RequestTimeout,
        "thinking_exhausted" => Behavior::ThinkingExhausted,
        "max_tokens" => Behavior::MaxTokensTruncated,
        "garbage" => Behavior::Garbage,
        other => match other.split_once(':') {
            Some(("finish", reason)) => Behavior::FinishReason(reason.to_string()),
            Some(("blocked", reason)) => Behavior::NoCandidatesBlocked(reason.to_string()),
            _ => return Err(format!("unknown behavior \"{other}\"")),
        },
    })
}

fn main() {
    let mut options = FakeOptions::default();
    let mut script = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next();
        let parsed = match (arg.as_str(), value) {
            ("--key", Some(key)) => {
                options.api_keys = vec![key];
                Ok(())
            }
            ("--script", Some(list)) => list.split(',').filter(|s| !s.trim().is_empty()).try_for_each(|name| {
                script.push(behavior(name)?);
                Ok(())
            }),
            _ => Err(format!("usage: fake-gemini [--key KEY] [--script BEHAVIOR,...] (got \"{arg}\")")),
        };
        if let Err(message) = parsed {
            eprintln!("fake-gemini: {message}");
            std::process::exit(2);
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    runtime.block_on(async move {
        let fake = FakeGemini::start(options).await.expect("the fake binds 127.0.0.1");
        for b in script {
            fake.push(b);
        }
        println!("{}", fake.base_url());
        let _ = std::io::stdout().flush();
        // Serve until stdin closes: a parent that dies never leaves the server behind.
        let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                if line.is_err() {
                    break;
                }
            }
            let _ = closed_tx.send(());
        });
        let _ = closed_rx.await;
        fake.shutdown().await;
    });
}
