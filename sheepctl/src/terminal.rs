//! What sheepctl writes to a terminal: text from the cluster (names, labels, annotations,
//! messages, events) may hold control characters that a terminal would obey, clearing the
//! screen or hiding a line. kubectl shows ESC as `^[` and CR as `\r`; sheepctl does the same
//! and writes every other control character, but newline and tab, as `\u{…}`.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with its control characters made visible; unchanged, and not copied, when it has none.
pub fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\u{1b}' => out.push_str("^["),
            '\r' => out.push_str("\\r"),
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// C0 and C1 controls and DEL, but line feed and tab. A terminal reads U+009B as CSI, as it
/// reads ESC `[`.
fn is_unsafe(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(safe("\u{1b}[2J\u{1b}]0;owned\u{7}"), "^[[2J^[]0;owned\\u{7}");
        assert_eq!(safe("ok\rHIDDEN"), "ok\\rHIDDEN");
        assert_eq!(safe("a\u{9b}31mb\u{7f}\u{8}"), "a\\u{9b}31mb\\u{7f}\\u{8}");
    }

    #[test]
    fn plain_text_lines_and_tabs_pass_unchanged_and_uncopied() {
        for text in ["NAME   STATUS\nweb    Running\n", "a\tb", "Größe: 5 🐑", ""] {
            assert!(matches!(safe(text), Cow::Borrowed(t) if t == text), "{text:?}");
        }
    }
}
