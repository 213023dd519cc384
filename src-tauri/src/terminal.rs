//! Everything the app prints for a person goes through here, so that untrusted text (a model's
//! answer, a file name, a server's or Gemini's message, a colleague's user name on a team
//! catalog) never acts on the terminal: [`outln!`] and [`errln!`] print a line with every control
//! character but the newline, and every bidi or zero-width character, shown as a visible escape
//! ([`pe_core::text::for_terminal_lines`]). A field inside a one-line format (a product's name in
//! `products list`, a file in `extract`'s line) goes through [`field`] first, so that a newline in
//! it cannot start a line of its own either.
//!
//! JSON goes out as serde wrote it ([`out_json`]): it is for programs, and its strings are already
//! escaped. The app's own control sequences (redrawing the progress line) are [`clear_line`] and
//! [`redraw`]. A test keeps the rest of the app from printing around this module.

use std::borrow::Cow;
use std::io::Write;

/// A line (or lines) of text for a person on stdout, as `println!` takes it, made safe. (A
/// closed stdout is ignored; [`out`] returns it, for a loop that should stop.)
macro_rules! outln {
    () => {{
        let _ = $crate::terminal::out("");
    }};
    ($($arg:tt)*) => {{
        let _ = $crate::terminal::out(&format!($($arg)*));
    }};
}

/// A line (or lines) of text for a person on stderr, as `eprintln!` takes it, made safe.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::terminal::err(&format!($($arg)*))
    };
}

pub(crate) use {errln, outln};

/// One field of a one-line format: every control character (newline and tab too) and every bidi
/// or zero-width character as a visible escape.
pub fn field(text: &str) -> Cow<'_, str> {
    pe_core::text::for_terminal(text)
}

/// A path as a [`field`] (lossy when it is not UTF-8, as `Path::display`).
pub fn path(path: &std::path::Path) -> String {
    field(&path.to_string_lossy()).into_owned()
}

/// Prints `text` and a newline on stdout, made safe; the error when stdout is gone (a closed pipe).
pub fn out(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", pe_core::text::for_terminal_lines(text)).and_then(|()| stdout.flush())
}

/// Prints `text` and a newline on stderr, made safe.
pub fn err(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", pe_core::text::for_terminal_lines(text));
}

/// Prints one JSON text and a newline on stdout as it is.
pub fn out_json(json: &impl std::fmt::Display) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{json}").and_then(|()| stdout.flush())
}

/// Erases stderr's current line (the progress line a terminal shows).
pub fn clear_line() {
    let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
}

/// Replaces stderr's current line with `line` (one line, made safe, no newline).
pub fn redraw(line: &str) {
    let _ = write!(std::io::stderr().lock(), "\r\x1b[K{}", field(line));
}

#[cfg(test)]
mod tests {
    /// Nothing else in the app prints: a `println!` elsewhere would put untrusted text on a
    /// terminal as it is. (The export's data stream is not text for a person and goes to stdout
    /// as bytes, through `Catalog::export`.)
    #[test]
    fn only_this_module_prints() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src-tauri/src");
        let mut files = vec![src.clone()];
        let mut offenders = Vec::new();
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("terminal.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (n, line) in text.lines().enumerate() {
                let prints = ["println!(", "print!(", "eprintln!(", "eprint!(", "io::stdout()", "io::stderr()"]
                    .iter()
                    .any(|m| line.contains(m));
                let allowed = line.contains("is_terminal()")
                    || line.contains("with_writer(std::io::stderr)")
                    || line.contains("export(format, Box::new(std::io::stdout()))");
                if prints && !allowed {
                    offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
        assert!(offenders.is_empty(), "print through crate::terminal instead:\n{}", offenders.join("\n"));
    }
}
