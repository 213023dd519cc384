//! Untrusted text made safe for where it goes: a terminal, the catalog, a spreadsheet cell.
//!
//! Text from a model's answer, a file name, a shared folder or a server's message can hold
//! characters that act instead of showing: a terminal runs ESC sequences (ESC[2J clears the
//! screen, OSC 0 sets the title, OSC 8 makes links) and the C1 controls some terminals read as
//! such; BS, CR and DEL redraw what was printed; the bidirectional overrides (U+202E …) make
//! `gpj.exe` read as `exe.jpg`; zero-width characters hide inside a word. Three rules, one home:
//!
//! - [`for_terminal`] / [`for_terminal_lines`]: text for a person reading a terminal, every such
//!   character shown as a visible escape (`\x1b`, `\u{202e}`), the rest unchanged.
//! - [`strip_controls`]: what the catalog keeps of a model's answer: control characters other
//!   than tab and newline removed (NUL included: PostgreSQL's text cannot hold it).
//! - [`is_invisible`]: the characters a spreadsheet (or a reader) does not see, which the CSV
//!   formula guard skips before it looks at a cell's first character.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is a control character: C0 (U+0000–U+001F), DEL (U+007F) or C1 (U+0080–U+009F).
pub fn is_control(c: char) -> bool {
    c.is_control()
}

/// Whether `c` changes how the text around it is laid out or shows nothing itself: the
/// bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F,
/// U+202A–U+202E, U+2066–U+2069), the zero-width characters (U+200B–U+200D, the word joiner
/// U+2060 and the invisible operators U+2061–U+2064, the BOM U+FEFF), and the line and paragraph
/// separators (U+2028, U+2029).
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// `text` for a terminal, as one field of a line: every control character (tab and newline
/// too), every [`is_invisible`] character shown as a visible escape — `\t`, `\n`, `\r`, `\x1b`
/// for C0 and DEL, `\u{9b}`, `\u{202e}` for the others — and everything else as it is. Borrowed
/// when nothing needed escaping (the usual case). A backslash is left as it is: the escapes are
/// for a person to see, not to be read back.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    escaped(text, |_| false)
}

/// [`for_terminal`] for text of several lines (an error message, a description): a newline is
/// kept, everything else is escaped the same way.
pub fn for_terminal_lines(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c == '\n')
}

fn escaped(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let acts = |c: char| (is_control(c) || is_invisible(c)) && !keep(c);
    let Some(first) = text.find(acts) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if !acts(c) {
            out.push(c);
            continue;
        }
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

/// `text` without its control characters, but for tab and newline (C0 including NUL, DEL and
/// C1 are removed); `None` when there was none to remove.
pub fn strip_controls(text: &str) -> Option<String> {
    let removed = |c: char| is_control(c) && c != '\t' && c != '\n';
    text.contains(removed).then(|| text.chars().filter(|&c| !removed(c)).collect())
}

/// `text` cut to at most `max` characters (Unicode scalar values, never inside one); `None`
/// when it was not longer.
pub fn cut_to_chars(text: &str, max: usize) -> Option<String> {
    let (at, _) = text.char_indices().nth(max)?;
    Some(text[..at].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a terminal would act on comes out as escapes; the rest (accents, CJK, emoji,
    /// backslashes) as it is.
    #[test]
    fn for_terminal_escapes_what_a_terminal_acts_on() {
        let cases: &[(&str, &str)] = &[
            ("Oat Drink 1 l", "Oat Drink 1 l"),
            ("Crème brûlée 無印 🥛 C:\\x", "Crème brûlée 無印 🥛 C:\\x"),
            ("\u{1b}[2Jwiped", "\\x1b[2Jwiped"),
            ("\u{1b}]0;owned\u{7}title", "\\x1b]0;owned\\x07title"),
            (
                "\u{1b}]8;;https://evil.example\u{1b}\\link\u{1b}]8;;\u{1b}\\",
                "\\x1b]8;;https://evil.example\\x1b\\link\\x1b]8;;\\x1b\\",
            ),
            ("a\u{8}b\rc\0d\u{7f}", "a\\x08b\\rc\\x00d\\x7f"),
            ("tab\there\nline", "tab\\there\\nline"),
            ("\u{9b}31m", "\\u{9b}31m"),
            ("photo\u{202e}gpj.exe", "photo\\u{202e}gpj.exe"),
            ("\u{2066}\u{2069}\u{200e}\u{200f}\u{61c}", "\\u{2066}\\u{2069}\\u{200e}\\u{200f}\\u{61c}"),
            ("zero\u{200b}width\u{200d}\u{2060}\u{feff}", "zero\\u{200b}width\\u{200d}\\u{2060}\\u{feff}"),
            ("line\u{2028}sep", "line\\u{2028}sep"),
        ];
        for (input, shown) in cases {
            assert_eq!(for_terminal(input), *shown, "{input:?}");
            let out = for_terminal(input);
            assert!(!out.chars().any(|c| c.is_control() || is_invisible(c)), "{out:?}");
        }
        assert!(matches!(for_terminal("plain"), Cow::Borrowed("plain")), "nothing to escape: no copy");
    }

    #[test]
    fn for_terminal_lines_keeps_newlines_only() {
        assert_eq!(for_terminal_lines("one\ntwo\r\n\tthree\u{1b}[K"), "one\ntwo\\r\n\\tthree\\x1b[K");
        assert_eq!(for_terminal_lines("a\u{202e}b"), "a\\u{202e}b");
    }

    /// Every character from U+0000 to U+00A0 and the invisible ones: either shown as itself
    /// (printable) or escaped, never passed through acting.
    #[test]
    fn every_control_and_invisible_character_is_escaped() {
        let acting = (0u32..=0xa0).chain(0x2000..=0x2070).chain([0x61c, 0xfeff]).filter_map(char::from_u32);
        for c in acting {
            let shown = for_terminal(c.encode_utf8(&mut [0; 4])).into_owned();
            let acts = c.is_control() || is_invisible(c);
            assert_eq!(shown.starts_with('\\') && shown.len() > 1, acts, "{:?} → {shown:?}", c);
        }
    }

    #[test]
    fn strip_controls_keeps_tab_and_newline() {
        assert_eq!(strip_controls("plain\ttext\nhere"), None);
        assert_eq!(strip_controls("a\0b\u{1b}[2Jc\u{7f}d\u{85}e\u{9b}f\rg").as_deref(), Some("ab[2Jcdefg"));
        assert_eq!(strip_controls("\t\u{1}\n").as_deref(), Some("\t\n"));
    }

    #[test]
    fn cut_to_chars_never_splits_a_character() {
        assert_eq!(cut_to_chars("abc", 3), None);
        assert_eq!(cut_to_chars("abcd", 3).as_deref(), Some("abc"));
        assert_eq!(cut_to_chars("ééé", 2).as_deref(), Some("éé"));
        assert_eq!(cut_to_chars("🥛🥛", 1).as_deref(), Some("🥛"));
        assert_eq!(cut_to_chars("", 0), None);
    }
}
