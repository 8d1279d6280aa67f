//! Text for an operator's terminal. A pod with CAP_NET_ADMIN names its
//! interfaces (and may rename podtap's TAPs in its netns), and the kernel
//! takes any bytes but '/', ':' and whitespace in a name: an escape
//! sequence (ESC, or the one-byte CSI U+009B) in an error, a warning or
//! `podtap show` would reach the terminal that reads it. JSON output escapes
//! them already, and so do log lines (tracing-subscriber); the lines podtap
//! prints itself go through here.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character but the tab written as an escape
/// (`\x1b`, `\n`, `\u{9b}`), so nothing in it acts on a terminal.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) && u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The one line of an error or a warning: its line breaks become spaces
/// (a message may quote a multi-line answer), the rest as [`printable`].
pub fn one_line(text: &str) -> String {
    printable(&text.replace(['\n', '\r'], " ")).into_owned()
}

fn needs_escape(c: char) -> bool {
    c.is_control() && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_as_escapes() {
        assert_eq!(printable("eth0 ü \t"), "eth0 ü \t");
        assert!(matches!(printable("eth0"), Cow::Borrowed(_)));
        assert_eq!(printable("\x1b[2Jx"), "\\x1b[2Jx");
        assert_eq!(printable("a\u{9b}31mb"), "a\\u{9b}31mb");
        assert_eq!(printable("bell\x07 del\x7f"), "bell\\x07 del\\x7f");
        assert_eq!(printable("two\nlines\r"), "two\\nlines\\r");
        assert_eq!(
            one_line("netns x:\nfailed\x1b]0;t\x07"),
            "netns x: failed\\x1b]0;t\\x07"
        );
    }
}
