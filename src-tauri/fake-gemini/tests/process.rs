//! The `fake-gemini` binary as the non-Rust clients use it (`tests/sdk/`, Google's Python SDK):
//! its first stdout line is the base URL, it answers there with the key it was given, it refuses
//! a bad command line with its usage, and it exits when its stdin closes, so a parent that dies
//! never leaves a server behind.
//!
//! `make test-sdk` runs this test to build the binary with the same features as `cargo test
//! --workspace` (so nothing is compiled twice) before the SDK scripts start it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_fake-gemini");

/// A `GET` on the fake with `key` in the `x-goog-api-key` header: the status line and the body.
fn get(base: &str, path: &str, key: &str) -> (String, String) {
    let address = base.strip_prefix("http://").expect("an http base URL").trim_end_matches('/');
    let mut stream = TcpStream::connect(address).expect("the fake accepts connections");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nx-goog-api-key: {key}\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("a whole answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("headers, then a body");
    (head.lines().next().unwrap_or_default().to_string(), body.to_string())
}

fn started(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("fake-gemini starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("the base URL line");
    (child, line.trim().to_string())
}

/// Waits up to 10 s for the process to exit on its own.
fn exits(child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    false
}

#[test]
fn prints_its_url_answers_with_its_key_and_exits_when_stdin_closes() {
    let (mut child, base) = started(&["--key", "sdk-key"]);
    assert!(base.starts_with("http://127.0.0.1:"), "first line is the base URL on loopback: {base:?}");

    let (status, body) = get(&base, "/v1beta/models/gemini-2.5-flash", "sdk-key");
    assert!(status.contains(" 200 "), "{status}: {body}");
    assert!(body.contains("\"models/gemini-2.5-flash\""), "{body}");

    let (status, body) = get(&base, "/v1beta/models/gemini-2.5-flash", "another-key");
    assert!(status.contains(" 400 "), "{status}: {body}");
    assert!(body.contains("API_KEY_INVALID"), "{body}");

    drop(child.stdin.take());
    assert!(exits(&mut child), "the fake exits once its stdin closes");
}

#[test]
fn refuses_a_bad_command_line_with_its_usage() {
    for args in [&["--nonsense"][..], &["--script", "product,nonsense"], &["--key"]] {
        let out = Command::new(BIN).args(args).stdin(Stdio::null()).output().expect("fake-gemini runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("fake-gemini: "), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: no URL is printed");
    }
}
