//! What sheepctl writes to a terminal: text from the cluster (names, labels, annotations,
//! messages, events) may hold control characters that a terminal would obey, clearing the
//! screen or hiding a line, and bidirectional overrides that reorder what is shown. kubectl
//! shows ESC as `^[` and CR as `\r`; sheepctl does the same and writes every other control
//! or override character, but newline and tab, as `\uXXXX`: JSON's own escape, so that
//! `-o json`, where serde_json leaves DEL and C1 controls raw, stays valid JSON.

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
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// C0 and C1 controls and DEL, but line feed and tab (a terminal reads U+009B as CSI, as it
/// reads ESC `[`), and the invisible characters that change how a line reads: zero-width
/// ones, directional marks, embeddings, overrides and isolates.
fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(safe("\u{1b}[2J\u{1b}]0;owned\u{7}"), "^[[2J^[]0;owned\\u0007");
        assert_eq!(safe("ok\rHIDDEN"), "ok\\rHIDDEN");
        assert_eq!(safe("a\u{9b}31mb\u{7f}\u{8}"), "a\\u009b31mb\\u007f\\u0008");
        assert_eq!(safe("admin\u{202e}gnp.exe\u{200b}"), "admin\\u202egnp.exe\\u200b");
    }

    #[test]
    fn json_with_raw_del_and_c1_controls_stays_json_with_the_same_text() {
        let text = "del\u{7f} c1\u{85} csi\u{9b} bidi\u{202e} esc\u{1b}";
        let json = serde_json::to_string(&serde_json::json!({"note": text})).unwrap();
        let shown = safe(&json);
        let read: serde_json::Value = serde_json::from_str(&shown).expect("valid JSON");
        assert_eq!(read["note"], text);
    }

    #[test]
    fn plain_text_lines_and_tabs_pass_unchanged_and_uncopied() {
        for text in ["NAME   STATUS\nweb    Running\n", "a\tb", "Größe: 5 🐑", ""] {
            assert!(matches!(safe(text), Cow::Borrowed(t) if t == text), "{text:?}");
        }
    }
}
