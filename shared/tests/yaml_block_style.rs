//! `shared::yaml` against libyaml (through serde_norway) on YAML written the many ways people write
//! Kubernetes manifests: random values rendered in block style with every scalar style,
//! compact and indented sequences, comments, blank lines, several documents and CRLF.

use proptest::prelude::*;
use serde::Deserialize;
use serde_json::{Map, Value};

fn ours(text: &str) -> Result<Vec<Value>, String> {
    shared::yaml::documents(text).map(|docs| docs.iter().map(|d| d.root.to_value()).collect()).map_err(|e| e.to_string())
}

fn libyaml(text: &str) -> Result<Vec<Value>, String> {
    serde_norway::Deserializer::from_str(text).map(|doc| Value::deserialize(doc).map_err(|e| e.to_string())).collect()
}

/// The style choices, drawn from a seed so that proptest shrinks the value and keeps the
/// styles.
struct Writer {
    state: u64,
    text: String,
    /// The last value written was a block scalar, which a blank line would extend.
    after_block_scalar: bool,
}

impl Writer {
    fn pick(&mut self, n: u64) -> u64 {
        // xorshift64: enough to vary styles.
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state % n
    }

    fn chance(&mut self, in_n: u64) -> bool {
        self.pick(in_n) == 0
    }

    fn spaces(&mut self, n: usize) {
        self.text.extend(std::iter::repeat_n(' ', n));
    }

    /// A comment or a blank line between two entries of a collection at `indent`.
    fn between(&mut self, indent: usize) {
        if self.chance(4) {
            let at = self.pick(indent as u64 + 1) as usize;
            self.spaces(at);
            self.text.push_str("# between, with: colons - and dashes\n");
        }
        if !self.after_block_scalar && self.chance(5) {
            self.text.push('\n');
        }
    }

    fn line_comment(&mut self) {
        if self.chance(4) {
            self.text.push_str(" # note: x");
        }
    }

    /// A mapping's entries, the first one's indentation already written.
    fn block_map(&mut self, map: &Map<String, Value>, indent: usize) {
        for (i, (key, value)) in map.iter().enumerate() {
            if i > 0 {
                self.between(indent);
                self.spaces(indent);
            }
            self.after_block_scalar = false;
            self.key(key);
            self.text.push(':');
            self.after_key(value, indent);
        }
    }

    fn key(&mut self, key: &str) {
        if plain_ok(key, false) && !self.chance(5) {
            self.text.push_str(key);
        } else {
            self.quoted(key, None);
        }
    }

    /// A sequence's items, the first one's indentation already written.
    fn block_seq(&mut self, items: &[Value], indent: usize) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.between(indent);
                self.spaces(indent);
            }
            self.after_block_scalar = false;
            self.text.push('-');
            self.after_dash(item, indent);
        }
    }

    /// The value of a key of a mapping at `indent`, the cursor after the `:`.
    fn after_key(&mut self, value: &Value, indent: usize) {
        match value {
            Value::Object(map) if !map.is_empty() && !self.chance(5) => {
                self.line_comment();
                self.text.push('\n');
                let inner = indent + 1 + self.pick(4) as usize;
                self.spaces(inner);
                self.block_map(map, inner);
            }
            Value::Array(items) if !items.is_empty() && !self.chance(5) => {
                self.line_comment();
                self.text.push('\n');
                // Kubernetes' own style puts `- ` at the key's column.
                let inner = if self.chance(2) { indent } else { indent + 1 + self.pick(3) as usize };
                self.spaces(inner);
                self.block_seq(items, inner);
            }
            Value::Null if self.chance(2) => {
                self.line_comment();
                self.text.push('\n');
            }
            _ => {
                let gap = 1 + self.pick(2) as usize;
                self.spaces(gap);
                self.inline(value, indent);
            }
        }
    }

    /// An item of a sequence at `indent`, the cursor after the `-`.
    fn after_dash(&mut self, value: &Value, indent: usize) {
        let compact = 1 + self.pick(3) as usize;
        match value {
            Value::Object(map) if !map.is_empty() => {
                if self.chance(3) {
                    self.line_comment();
                    self.text.push('\n');
                    let inner = indent + 1 + self.pick(4) as usize;
                    self.spaces(inner);
                    self.block_map(map, inner);
                } else {
                    self.spaces(compact);
                    self.block_map(map, indent + 1 + compact);
                }
            }
            Value::Array(items) if !items.is_empty() && !self.chance(4) => {
                if self.chance(3) {
                    self.text.push('\n');
                    let inner = indent + 1 + self.pick(4) as usize;
                    self.spaces(inner);
                    self.block_seq(items, inner);
                } else {
                    self.spaces(compact);
                    self.block_seq(items, indent + 1 + compact);
                }
            }
            Value::Null if self.chance(2) => self.text.push('\n'),
            _ => {
                self.spaces(compact);
                self.inline(value, indent);
            }
        }
    }

    /// A value on the line of its key or dash; `indent` is the column of the collection
    /// around it, which its continuation lines must go past.
    fn inline(&mut self, value: &Value, indent: usize) {
        match value {
            Value::String(s) => self.string(s, indent),
            Value::Object(_) | Value::Array(_) => {
                self.flow(value, indent);
                self.line_comment();
                self.text.push('\n');
            }
            scalar => {
                let text = match scalar {
                    Value::Null => ["~", "null", "Null", "NULL"][self.pick(4) as usize].to_string(),
                    Value::Bool(b) => [b.to_string(), if *b { "True" } else { "FALSE" }.to_string()][self.pick(2) as usize].clone(),
                    Value::Number(n) => self.number(n),
                    _ => unreachable!(),
                };
                self.text.push_str(&text);
                self.line_comment();
                self.text.push('\n');
            }
        }
    }

    fn number(&mut self, n: &serde_json::Number) -> String {
        match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => match self.pick(5) {
                0 => format!("{u:#x}"),
                1 => format!("0o{u:o}"),
                2 => format!("+{u}"),
                _ => u.to_string(),
            },
            (None, Some(i)) if self.chance(3) => format!("-{:#x}", i.unsigned_abs()),
            _ => n.to_string(),
        }
    }

    fn string(&mut self, s: &str, indent: usize) {
        let lines_ok = !s.contains(['\r', '\t']) && s.split('\n').all(|l| !l.ends_with(' ') && (l.is_empty() || !l.trim().is_empty()));
        let choice = self.pick(6);
        if s.contains('\n') && lines_ok && choice < 2 {
            self.block_scalar(s, indent, choice == 0);
        } else if plain_ok(s, false) && choice < 4 {
            // A single space may fold onto the next line, indented past `indent`.
            let text = match s.find(' ') {
                Some(i) if !s[i + 1..].starts_with(' ') && i > 0 && self.chance(3) => {
                    let continuation = indent + 1 + self.pick(3) as usize;
                    format!("{}\n{}{}", &s[..i], " ".repeat(continuation), &s[i + 1..])
                }
                _ => s.to_string(),
            };
            self.text.push_str(&text);
            self.line_comment();
            self.text.push('\n');
        } else {
            self.quoted(s, Some(indent));
            self.line_comment();
            self.text.push('\n');
        }
    }

    /// `|` or `>` with the chomping indicator the trailing line breaks need, and an
    /// indentation indicator when the first line starts with a space.
    fn block_scalar(&mut self, s: &str, indent: usize, literal: bool) {
        let body = s.trim_end_matches('\n');
        let trailing = s.len() - body.len();
        let more_indented = body.split('\n').any(|l| l.starts_with(' '));
        let literal = literal || more_indented;
        let step = 1 + self.pick(4) as usize;
        self.text.push(if literal { '|' } else { '>' });
        if body.trim_start_matches('\n').starts_with(' ') {
            self.text.push_str(&step.to_string());
        }
        self.text.push_str(match trailing {
            0 => "-",
            1 => "",
            _ => "+",
        });
        self.line_comment();
        self.text.push('\n');
        let content = if literal {
            body.to_string()
        } else {
            // Folding joins lines on a single break: each run of breaks gets one more.
            let mut out = String::new();
            let mut previous = '\n';
            for c in body.chars() {
                if c == '\n' && previous != '\n' {
                    out.push('\n');
                }
                out.push(c);
                previous = c;
            }
            out
        };
        for line in content.split('\n').chain(std::iter::repeat_n("", trailing.saturating_sub(1))) {
            if !line.is_empty() {
                self.spaces(indent + step);
                self.text.push_str(line);
            }
            self.text.push('\n');
        }
        self.after_block_scalar = true;
    }

    /// A single- or double-quoted scalar; with `Some(indent)`, a double-quoted one may
    /// break its line at a space.
    fn quoted(&mut self, s: &str, indent: Option<usize>) {
        if !s.contains(|c: char| c == '\n' || c.is_control()) && self.chance(2) {
            self.text.push('\'');
            self.text.push_str(&s.replace('\'', "''"));
            self.text.push('\'');
            return;
        }
        self.text.push('"');
        let chars: Vec<char> = s.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            // A line break folds into a space when no blank stands next to it.
            let blank = |k: Option<&char>| k.is_none_or(|c| matches!(c, ' ' | '\t'));
            let breakable = c == ' ' && !blank(i.checked_sub(1).and_then(|k| chars.get(k))) && !blank(chars.get(i + 1));
            match c {
                '"' => self.text.push_str("\\\""),
                '\\' => self.text.push_str("\\\\"),
                '\n' => self.text.push_str("\\n"),
                '\t' => self.text.push_str("\\t"),
                ' ' if breakable && indent.is_some() && self.chance(4) => {
                    self.text.push('\n');
                    self.spaces(indent.unwrap_or(0) + 1);
                }
                c if c.is_control() => self.text.push_str(&format!("\\x{:02x}", c as u32)),
                c => self.text.push(c),
            }
        }
        self.text.push('"');
    }

    /// Flow style, which may break lines after a comma (indented past `indent`).
    fn flow(&mut self, value: &Value, indent: usize) {
        let separator = |w: &mut Writer| {
            if w.chance(4) {
                w.text.push_str(",\n");
                w.spaces(indent + 1);
            } else {
                w.text.push_str(", ");
            }
        };
        match value {
            Value::Object(map) => {
                self.text.push('{');
                for (i, (key, value)) in map.iter().enumerate() {
                    if i > 0 {
                        separator(self);
                    }
                    if plain_ok(key, true) {
                        self.text.push_str(key);
                    } else {
                        self.quoted(key, None);
                    }
                    self.text.push_str(": ");
                    self.flow(value, indent);
                }
                self.text.push('}');
            }
            Value::Array(items) => {
                self.text.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        separator(self);
                    }
                    self.flow(item, indent);
                }
                self.text.push(']');
            }
            Value::String(s) if plain_ok(s, true) => self.text.push_str(s),
            Value::String(s) => self.quoted(s, None),
            Value::Number(n) => {
                let n = self.number(n);
                self.text.push_str(&n);
            }
            other => self.text.push_str(&other.to_string()),
        }
    }
}

/// Whether `s` reads back as itself when written plain: it must not look like another
/// type or start with an indicator, nor hold what would end it.
fn plain_ok(s: &str, flow: bool) -> bool {
    let Some(first) = s.chars().next() else { return false };
    let looks_typed = first.is_ascii_digit()
        || matches!(first, '+' | '.' | '-' | '~')
        || ["null", "true", "false"].contains(&s.to_ascii_lowercase().as_str());
    !looks_typed
        && !" ?:,[]{}#&*!|>'\"%@`".contains(first)
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.contains(|c: char| c.is_control())
        && !(flow && s.contains([',', '[', ']', '{', '}', ':']))
        // saphyr refuses a `-` just before a flow indicator (`[a -]`), which libyaml reads.
        && !(flow && s.ends_with('-'))
}

fn value() -> impl Strategy<Value = Value> {
    let key = "[a-z][a-z0-9./-]{0,8}|[ -~]{0,6}|app\\.kubernetes\\.io/name";
    let text = prop_oneof![
        "[a-zA-Z][a-zA-Z0-9 ./:_-]{0,14}",
        "[ -~\t\u{e9}\u{1f411}\u{4e2d}]{0,12}",
        "(\n|line|  indented| |x y)*",
        "(\n{0,2}([a-z]{1,5}( [a-z]{1,4})?|  [a-z]{1,3})){1,4}\n{0,3}",
        Just("http://example.com:8080/x?y=z#frag".to_string()),
        Just("yes".to_string()),
        Just("64Mi".to_string()),
    ];
    let leaf = prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(Value::from),
        1 => (-100_000i64..100_000, 0u32..100).prop_map(|(whole, cents)| serde_json::from_str(&format!("{whole}.{cents:02}")).unwrap()),
        4 => text.prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 5, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(key, inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A stream of one to three documents, each a mapping (as manifests are) or any value.
fn stream(documents: &[Value], seed: u64) -> String {
    let mut w = Writer { state: seed | 1, text: String::new(), after_block_scalar: false };
    if w.chance(3) {
        w.text.push_str("# leading comment\n");
    }
    for (i, document) in documents.iter().enumerate() {
        if i > 0 || w.chance(2) {
            let marker = if w.chance(3) { "--- # next\n" } else { "---\n" };
            w.text.push_str(marker);
        }
        match document {
            Value::Object(map) if !map.is_empty() => w.block_map(map, 0),
            Value::Array(items) if !items.is_empty() => w.block_seq(items, 0),
            // Without `---`, an empty first document would be no document at all.
            Value::Null if i == 0 && !w.text.contains("---") => w.text.push_str("---\n"),
            Value::Null => {}
            scalar => w.inline(scalar, 0),
        }
        if w.chance(4) {
            w.text.push_str("...\n");
        }
    }
    if w.chance(4) {
        w.text = w.text.replace('\n', "\r\n");
    }
    if w.chance(4) {
        // A text box's content often ends without a line break.
        let end = w.text.trim_end_matches(['\r', '\n']).len();
        if !w.after_block_scalar {
            w.text.truncate(end);
        }
    }
    w.text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn block_style_reads_as_libyaml_reads_it(documents in proptest::collection::vec(value(), 1..4), seed in any::<u64>()) {
        let text = stream(&documents, seed);
        let theirs = libyaml(&text);
        prop_assert!(theirs.is_ok(), "the generator wrote what libyaml refuses: {:?}\n{}\n{}", theirs, text.escape_debug(), text);
        prop_assert_eq!(ours(&text), theirs, "{}\n{}", text.escape_debug(), text);
    }
}

/// The documents that hold something: libyaml reads an empty text as one null document,
/// `shared::yaml` as none, and manifests skip null documents anyway.
fn not_null(documents: Vec<Value>) -> Vec<Value> {
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

/// Where an error points must be inside the text (or just past the end of a line).
fn points_inside(text: &str, e: &shared::yaml::YamlError) -> bool {
    // Lines end at `\r\n`, `\n` or a `\r` alone.
    let text = text.replace("\r\n", "\n");
    let lines: Vec<&str> = text.split(['\n', '\r']).collect();
    e.line >= 1 && e.line <= lines.len() && e.column >= 1 && e.column <= lines[e.line - 1].chars().count() + 2
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Near-valid YAML: a generated text with a few bytes removed, added or replaced by
    /// the characters YAML cares about. No panic; errors point inside the text; when both
    /// readers accept the text they agree.
    #[test]
    fn near_valid_yaml_reads_as_libyaml_reads_it_or_fails_cleanly(
        documents in proptest::collection::vec(value(), 1..3),
        seed in any::<u64>(),
        edits in proptest::collection::vec((any::<proptest::sample::Index>(), 0usize..15, 0u8..3), 1..4),
    ) {
        let mut text = stream(&documents, seed).into_bytes();
        for (at, what, how) in edits {
            let c = b" \t:-#\"'[{\n|>&*,\r"[what];
            if text.is_empty() {
                text.push(c);
                continue;
            }
            let i = at.index(text.len());
            match how {
                0 => drop(text.remove(i)),
                1 => text.insert(i, c),
                _ => text[i] = c,
            }
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        match shared::yaml::documents(&text) {
            Ok(docs) => {
                if let Ok(theirs) = libyaml(&text) {
                    let ours: Vec<Value> = docs.iter().map(|d| d.root.to_value()).collect();
                    prop_assert_eq!(not_null(ours), not_null(theirs), "{}", text.escape_debug());
                }
            }
            Err(e) => prop_assert!(points_inside(&text, &e), "{e} in {}", text.escape_debug()),
        }
    }

    /// Any text at all: an answer, never a panic, and errors that point inside the text.
    #[test]
    fn any_text_gets_an_answer(text in "[ -~\t\n\r\u{e9}\u{1f411}]{0,64}|[-:#\\[\\]{}&*|> \n\t'\"a1]{0,64}") {
        if let Err(e) = shared::yaml::documents(&text) {
            prop_assert!(points_inside(&text, &e), "{e} in {}", text.escape_debug());
        }
    }
}
