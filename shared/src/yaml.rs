//! Manifests' YAML: saphyr-parser (a maintained YAML 1.2 parser whose every event has a span)
//! reads the text, and this module builds its events into [`Node`]s that keep their line and
//! column, several documents per text.
//!
//! What a parser leaves to its user is decided here: plain scalars resolve as YAML 1.2's core
//! schema does (`null`, `~`, `true`, `42`, `0x1f`, `1.5`; `yes` and `on` stay strings;
//! `.inf` and `.nan` become `null`, JSON having neither), plus libyaml's `0b101`; keys are kept
//! as written. Tags (`!…`), keys that are not scalars, duplicate keys, plain values such as
//! `010` (octal 8 to YAML 1.1, 10 to 1.2), values nested more than 128 deep and aliases that
//! copy more than 100,000 values or 1 MiB are refused with where.

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span};
use serde_json::{Number, Value};

/// One value of a YAML text and where it starts (1-based line and column, in characters).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub line: usize,
    pub column: usize,
    pub data: Data,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Seq(Vec<Node>),
    /// Entries in the order written; keys are unique.
    Map(Vec<(String, Node)>),
}

/// One step into a value: a mapping key or a sequence index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// One document of a YAML stream. `number` counts from 1 and goes up at every `---` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub number: usize,
    /// `Data::Null` for a document with no content.
    pub root: Node,
}

/// Text that is not YAML, or YAML a manifest may not hold, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct YamlError {
    pub document: usize,
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// Aliases would copy more than [`ALIAS_BYTES`]: the document's JSON would be larger
    /// than that, which a server refuses as it refuses a body too large.
    pub too_large: bool,
}

impl Node {
    /// The node as JSON.
    pub fn to_value(&self) -> Value {
        match &self.data {
            Data::Null => Value::Null,
            Data::Bool(b) => Value::Bool(*b),
            Data::Number(n) => Value::Number(n.clone()),
            Data::String(s) => Value::String(s.clone()),
            Data::Seq(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Data::Map(entries) => {
                // Inserted one by one: collecting would sort first, with a copy of the sort
                // code of its own.
                let mut map = serde_json::Map::new();
                for (key, value) in entries {
                    map.insert(key.clone(), value.to_value());
                }
                Value::Object(map)
            }
        }
    }

    /// The node at `path`, or the deepest node on the way there that exists.
    pub fn find(&self, path: &[Step]) -> &Node {
        let mut node = self;
        for step in path {
            let next = match (step, &node.data) {
                (Step::Key(key), Data::Map(entries)) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
                (Step::Index(i), Data::Seq(items)) => items.get(*i),
                _ => None,
            };
            match next {
                Some(next) => node = next,
                None => break,
            }
        }
        node
    }

    /// How many nodes this one holds, itself included, how many levels go below it, and
    /// how many bytes its JSON takes at least: one a node, plus its strings' and keys' lengths.
    fn measure(&self) -> Measure {
        let add = |total: Measure, (key, child): (usize, &Node)| {
            let m = child.measure();
            Measure { nodes: total.nodes + m.nodes, depth: total.depth.max(m.depth + 1), bytes: total.bytes + key + m.bytes }
        };
        let one = Measure { nodes: 1, depth: 0, bytes: 1 };
        match &self.data {
            Data::Seq(items) => items.iter().map(|item| (0, item)).fold(one, add),
            Data::Map(entries) => entries.iter().map(|(k, v)| (k.len(), v)).fold(one, add),
            Data::String(s) => Measure { bytes: 1 + s.len(), ..one },
            _ => one,
        }
    }
}

/// What [`Node::measure`] finds.
struct Measure {
    nodes: usize,
    depth: usize,
    bytes: usize,
}

/// Reads every document of `text`.
pub fn documents(text: &str) -> Result<Vec<Document>, YamlError> {
    let mut builder = Builder::new(text);
    let mut documents = Vec::new();
    while let Some((event, span)) = builder.next()? {
        match event {
            Event::DocumentStart(explicit) => builder.document += usize::from(explicit),
            Event::DocumentEnd => {
                let root = builder.root.take().unwrap_or(Node { line: span.start.line(), column: span.start.col() + 1, data: Data::Null });
                documents.push(Document { number: builder.document, root });
            }
            event => builder.event(event, span)?,
        }
    }
    Ok(documents)
}

/// Reads the flow value (`{…}`, `[…]` or a scalar) that starts at byte `start` of `text`,
/// after any blank space: positions inside JSON, which is YAML's flow style. What follows
/// the value is not read.
pub fn value_at(text: &str, start: usize) -> Result<Node, YamlError> {
    let start = start.min(text.len());
    let before = &text[..start];
    let lines = before.matches('\n').count();
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count());
    let mut builder = Builder::new(&text[start..]);
    (builder.lines_before, builder.columns_before) = (lines, column);
    while builder.root.is_none() {
        match builder.next()? {
            Some((Event::DocumentStart(_) | Event::DocumentEnd, _)) => {}
            Some((event, span)) => builder.event(event, span)?,
            None => break,
        }
    }
    builder.root.take().ok_or_else(|| builder.error_at(Span::default(), "no value"))
}

/// The most nodes that aliases may copy in one text, so a few lines cannot expand into
/// millions of values.
const ALIAS_BUDGET: usize = 100_000;

/// The most bytes of values (as [`Node::measure`] counts them, never more than their JSON)
/// that aliases may copy in one text. 3 MiB is the server's body limit: past it, the JSON
/// the text stands for is too large to send, and one long scalar copied 50,000 times would
/// otherwise fill gigabytes.
pub const ALIAS_BYTES: usize = 3 << 20;

/// How deep values may nest (as serde_yaml allows): each level is a level of recursion when
/// the value is turned into JSON or dropped, and the browser's stack is small.
const MAX_DEPTH: usize = 128;

/// A collection being read: its start, its anchor, and its items or entries so far.
struct Open {
    /// Written in `[ ]` or `{ }`.
    flow: bool,
    line: usize,
    column: usize,
    anchor: usize,
    collection: Collection,
}

enum Collection {
    Seq(Vec<Node>),
    /// `keys` finds a duplicate without a quadratic search; `key` waits for its value.
    Map {
        entries: Vec<(String, Node)>,
        keys: serde_json::Map<String, Value>,
        key: Option<String>,
    },
}

/// Turns saphyr's events into nodes.
struct Builder<'t> {
    text: &'t str,
    parser: Parser<'t, saphyr_parser::StrInput<'t>>,
    /// Where the text read starts in the caller's (for [`value_at`]): lines before it, and
    /// characters before it on its first line.
    lines_before: usize,
    columns_before: usize,
    document: usize,
    open: Vec<Open>,
    /// The finished top-level value of the document being read.
    root: Option<Node>,
    /// Anchored values by saphyr's anchor id.
    anchors: Vec<(usize, Node)>,
    /// What aliases copied so far: nodes, and bytes as [`Node::measure`] counts them.
    copied: usize,
    copied_bytes: usize,
    /// The last character index looked up and its byte, so that lookups in text order stay
    /// linear: saphyr's markers count characters.
    cursor: (usize, usize),
}

impl<'t> Builder<'t> {
    fn new(text: &'t str) -> Self {
        Builder {
            text,
            parser: Parser::new_from_str(text),
            lines_before: 0,
            columns_before: 0,
            document: 1,
            open: Vec::new(),
            root: None,
            anchors: Vec::new(),
            copied: 0,
            copied_bytes: 0,
            cursor: (0, 0),
        }
    }

    /// The text from character index `index` on.
    fn text_from(&mut self, index: usize) -> &'t str {
        if index < self.cursor.0 {
            self.cursor = (0, 0);
        }
        let text = self.text;
        let (mut at, mut byte) = self.cursor;
        let mut chars = text[byte..].chars();
        while at < index {
            let Some(c) = chars.next() else { break };
            byte += c.len_utf8();
            at += 1;
        }
        self.cursor = (at, byte);
        &text[byte..]
    }

    fn char_at(&mut self, index: usize) -> Option<char> {
        self.text_from(index).chars().next()
    }

    /// Refuses an anchor name libyaml would end sooner (`&a.b` is the anchor `a` there, and
    /// `.b` the value): letters, digits, `-` and `_` mean the same to both.
    fn check_anchor(&mut self, anchor: usize, span: Span) -> Result<(), YamlError> {
        if anchor == 0 {
            return Ok(());
        }
        let text = self.text_from(span.start.index());
        let name = text.strip_prefix('&').unwrap_or("");
        let name = name.split([' ', '\t', '\r', '\n', ',', '[', ']', '{', '}']).next().unwrap_or("");
        if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            Ok(())
        } else {
            Err(self.error_at(span, format!("the anchor name {name:?} may hold only letters, digits, `-` and `_`")))
        }
    }

    /// The next event that says something about the documents.
    fn next(&mut self) -> Result<Option<(Event<'t>, Span)>, YamlError> {
        loop {
            match self.parser.next_event() {
                None => return Ok(None),
                Some(Ok((Event::StreamStart | Event::StreamEnd | Event::Nothing, _))) => {}
                Some(Ok(event)) => return Ok(Some(event)),
                Some(Err(e)) => return Err(self.scan_error(&e)),
            }
        }
    }

    /// 1-based line and column in the caller's text.
    fn position(&self, marker: saphyr_parser::Marker) -> (usize, usize) {
        let shift = if marker.line() == 1 { self.columns_before } else { 0 };
        (marker.line() + self.lines_before, marker.col() + 1 + shift)
    }

    fn error_at(&self, span: Span, message: impl Into<String>) -> YamlError {
        let (line, column) = self.position(span.start);
        YamlError { document: self.document, line, column, message: message.into(), too_large: false }
    }

    fn error_at_node(&self, line: usize, column: usize, message: String) -> YamlError {
        YamlError { document: self.document, line, column, message, too_large: false }
    }

    /// saphyr's error, said in a manifest writer's words where it means something left open.
    fn scan_error(&self, e: &ScanError) -> YamlError {
        let (info, at) = (e.info(), *e.marker());
        let rest = self.text.char_indices().nth(at.index()).map_or("", |(i, _)| &self.text[i..]);
        let line = rest.split(['\n', '\r']).next().unwrap_or("");
        // Where a value left open ends: the text's end, or a `---` or `...` line.
        let ended = rest.trim().is_empty() || (at.col() == 0 && (line.starts_with("---") || line.starts_with("...")));
        let open_flow = self.open.iter().rev().find(|open| open.flow);
        if info == "recursion limit exceeded" {
            self.nests_too_deep(Span::empty(at))
        } else if let (true, Some(open)) = (ended, open_flow) {
            let bracket = if matches!(open.collection, Collection::Seq(_)) { '[' } else { '{' };
            self.error_at_node(open.line, open.column, format!("this {bracket} is never closed"))
        } else if info.contains("quoted scalar") && (info.contains("end of stream") || info.contains("document indicator")) {
            let quote = if rest.starts_with('\'') { "single" } else { "double" };
            self.error_at(Span::empty(at), format!("this {quote}-quoted string is never closed"))
        } else if rest.is_empty() {
            // saphyr may place the end of a text without a final line break on a line after it.
            let lines = self.text.replace("\r\n", "\n");
            let last = lines.split(['\n', '\r']).next_back().unwrap_or("");
            let line = lines.split(['\n', '\r']).count();
            let column = last.chars().count() + 1 + if line == 1 { self.columns_before } else { 0 };
            self.error_at_node(line + self.lines_before, column, info.to_string())
        } else {
            self.error_at(Span::empty(at), info)
        }
    }

    fn event(&mut self, event: Event<'t>, span: Span) -> Result<(), YamlError> {
        let (line, column) = self.position(span.start);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                if tag.is_some() {
                    return Err(self.error_at(span, "tags (`!…`) are not supported in a manifest"));
                }
                self.check_anchor(anchor, span)?;
                let written = text.into_owned();
                let data = match style {
                    // A key is kept as written, so `010:` means what it says.
                    ScalarStyle::Plain if !self.at_key() && leading_zero(&written) => {
                        return Err(self.error_at(
                            span,
                            format!(
                                "{written} is ambiguous (YAML 1.1 reads a leading 0 as octal, YAML 1.2 does not): quote it (\"{written}\") for a string, or drop the leading zeros for a number"
                            ),
                        ));
                    }
                    ScalarStyle::Plain => resolve(&written),
                    // saphyr ends a block scalar at the end of the text with a line break even
                    // where the text has none (a text box's content often ends without one).
                    ScalarStyle::Literal | ScalarStyle::Folded
                        if written.ends_with('\n') && !self.text.ends_with(['\n', '\r']) && self.char_at(span.end.index()).is_none() =>
                    {
                        Data::String(written[..written.len() - 1].to_string())
                    }
                    _ => Data::String(written.clone()),
                };
                let node = Node { line, column, data };
                if anchor > 0 {
                    self.anchors.push((anchor, node.clone()));
                }
                self.add(node, Some(written))
            }
            Event::Alias(id) => {
                let Some((_, node)) = self.anchors.iter().rev().find(|(a, _)| *a == id) else {
                    return Err(self.error_at(span, "found unknown anchor"));
                };
                let Measure { nodes, depth, bytes } = node.measure();
                self.copied += nodes;
                self.copied_bytes += bytes;
                if self.copied > ALIAS_BUDGET {
                    return Err(self.error_at(span, format!("aliases copy too many values (over {ALIAS_BUDGET}) in this text")));
                }
                if self.copied_bytes > ALIAS_BYTES {
                    let message = format!(
                        "with this alias, aliases copy more than {} MiB of values in this text: write the values out, or alias less",
                        ALIAS_BYTES >> 20
                    );
                    return Err(YamlError { too_large: true, ..self.error_at(span, message) });
                }
                if self.open.len() + depth >= MAX_DEPTH {
                    return Err(self.nests_too_deep(span));
                }
                // Where the alias stands, with the anchored value's content.
                let node = Node { line, column, data: node.data.clone() };
                self.add(node, None)
            }
            Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                if tag.is_some() {
                    return Err(self.error_at(span, "tags (`!…`) are not supported in a manifest"));
                }
                if self.open.len() >= MAX_DEPTH {
                    return Err(self.nests_too_deep(span));
                }
                self.check_anchor(anchor, span)?;
                let collection = if matches!(event, Event::SequenceStart(..)) {
                    Collection::Seq(Vec::new())
                } else {
                    Collection::Map { entries: Vec::new(), keys: serde_json::Map::new(), key: None }
                };
                // A flow collection's span is its bracket; a block one's is empty or its first token.
                let head = self.text_from(span.start.index());
                // After the anchor, if any: `&a [1]`'s span starts at the `&`.
                let head = if anchor > 0 { head.trim_start_matches(|c: char| !c.is_whitespace() && c != '[' && c != '{') } else { head };
                let flow = head.trim_start().starts_with(['[', '{']);
                self.open.push(Open { flow, line, column, anchor, collection });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(open) = self.open.pop() else { return Ok(()) };
                let data = match open.collection {
                    Collection::Seq(items) => Data::Seq(items),
                    Collection::Map { entries, .. } => Data::Map(entries),
                };
                let node = Node { line: open.line, column: open.column, data };
                if open.anchor > 0 {
                    self.anchors.push((open.anchor, node.clone()));
                }
                self.add(node, None)
            }
            _ => Ok(()),
        }
    }

    /// Whether the next value read is a mapping's key.
    fn at_key(&self) -> bool {
        self.open.last().is_some_and(|open| matches!(open.collection, Collection::Map { key: None, .. }))
    }

    fn nests_too_deep(&self, span: Span) -> YamlError {
        self.error_at(span, format!("values nest more than {MAX_DEPTH} deep here"))
    }

    /// Puts a finished node where it belongs: the document's root, a sequence's next item,
    /// or a mapping's next key or value. `written` is a scalar's text as written, which a
    /// key keeps (`1: x` has the key "1").
    fn add(&mut self, node: Node, written: Option<String>) -> Result<(), YamlError> {
        let Some(open) = self.open.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        match &mut open.collection {
            Collection::Seq(items) => items.push(node),
            Collection::Map { entries, keys, key } => match key.take() {
                Some(name) => entries.push((name, node)),
                None => {
                    let name = match (written, node.data) {
                        (Some(text), Data::Null | Data::Bool(_) | Data::Number(_) | Data::String(_)) => text,
                        (None, Data::String(text)) => text,
                        _ => return Err(self.error_at_node(node.line, node.column, "a key must be a plain or quoted scalar".into())),
                    };
                    if keys.insert(name.clone(), Value::Null).is_some() {
                        return Err(self.error_at_node(node.line, node.column, format!("duplicate key {name:?}")));
                    }
                    *key = Some(name);
                }
            },
        }
        Ok(())
    }
}

/// Digits after a leading zero, optionally signed (`010`, `-07`): octal to YAML 1.1, decimal
/// to 1.2, a string to libyaml. `0`, `0.5` and `0o17` say what they mean.
fn leading_zero(text: &str) -> bool {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    unsigned.len() > 1 && unsigned.starts_with('0') && unsigned.bytes().all(|b| b.is_ascii_digit())
}

/// The value a plain scalar stands for.
fn resolve(text: &str) -> Data {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Data::Null,
        "true" | "True" | "TRUE" => return Data::Bool(true),
        "false" | "False" | "FALSE" => return Data::Bool(false),
        _ => {}
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let negative = text.starts_with('-');
    // A sign may come before `0x` (`-0x10` is -16, as serde_yaml reads it), not after it:
    // `from_str_radix` would take one there.
    let integer = |digits: &str, radix: u32| match u64::from_str_radix(digits, radix) {
        Ok(_) if digits.starts_with('+') => None,
        Ok(n) if !negative => Some(Number::from(n)),
        Ok(n) if n <= i64::MAX as u64 + 1 => Some(Number::from((n as i64).wrapping_neg())),
        _ => None,
    };
    let number = if let Some(hex) = unsigned.strip_prefix("0x") {
        integer(hex, 16)
    } else if let Some(octal) = unsigned.strip_prefix("0o") {
        integer(octal, 8)
    } else if let Some(binary) = unsigned.strip_prefix("0b") {
        integer(binary, 2)
    } else if leading_zero(text) {
        // A key such as `007:`, refused as a value: a string, as libyaml reads it.
        None
    } else if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        integer(unsigned, 10).or_else(|| float(text))
    } else if matches!(unsigned, ".inf" | ".Inf" | ".INF") || matches!(text, ".nan" | ".NaN" | ".NAN") {
        return Data::Null;
    } else {
        float(text)
    };
    match number {
        Some(n) => Data::Number(n),
        None => Data::String(text.to_string()),
    }
}

/// `1.5`, `-.5`, `2e3`, `6.02E+23`: the core schema's floats, rewritten as JSON (`-0.5`)
/// and read by serde_json's number reader, so a float means the same in a YAML manifest as
/// in a JSON one; `f64`'s `FromStr` would also add its tables (about 10 KB gzipped) to the
/// browser bundle.
fn float(text: &str) -> Option<Number> {
    let negative = text.starts_with('-');
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let exponent_digits = exponent.map(|e| e.strip_prefix(['-', '+']).unwrap_or(e));
    let valid = digits(whole)
        && digits(fraction)
        && !(whole.is_empty() && fraction.is_empty())
        && exponent_digits.is_none_or(|e| !e.is_empty() && digits(e));
    if !valid {
        return None;
    }
    let whole = whole.trim_start_matches('0');
    let json = format!(
        "{}{}.{}{}",
        if negative { "-" } else { "" },
        if whole.is_empty() { "0" } else { whole },
        if fraction.is_empty() { "0" } else { fraction },
        exponent.map(|e| format!("e{e}")).unwrap_or_default()
    );
    json.parse::<Number>().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(text: &str) -> Value {
        let docs = documents(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(docs.len(), 1, "{text:?}");
        docs[0].root.to_value()
    }

    fn fails(text: &str) -> YamlError {
        match documents(text) {
            Ok(docs) => panic!("{text:?} was read as {:?}", docs.iter().map(|d| d.root.to_value()).collect::<Vec<_>>()),
            Err(e) => e,
        }
    }

    /// What libyaml (through serde_norway) reads from `text`, document by document.
    fn libyaml(text: &str) -> Vec<Value> {
        use serde::Deserialize;
        serde_norway::Deserializer::from_str(text)
            .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("libyaml refused {text:?}: {e}")))
            .collect()
    }

    #[test]
    fn reads_what_libyaml_reads() {
        let corpus = [
            include_str!("../../examples/shop.yaml"),
            "kind: Pod\nmetadata: {name: a, labels: {app: web}}\nspec:\n  containers:\n    - name: c\n      image: minimal\n      resources: {memory: 64Mi, cpu: 250m}\n",
            "a:\n- 1\n- two\n-   - nested\n    - list\nb: {x: [1, {y: z}], 'q': \"w\"}\n",
            "- a: 1\n  b: 2\n- c: 3\n-\n  - d\n",
            "text: |\n  first\n   second\n\n  third\nfolded: >-\n  a\n  b\n\n  c\nkeep: |+\n  k\n\nend: 1\n",
            "numbers: [0, -1, +2, 3.25, -4e2, 0x10, 0o7, 0b101, .5, 1., -0, 0.0]\nzeros: {007: a, -01: b}\nwords: [yes, no, on, off, y, n, ~, null, Null, TRUE, False]\n",
            "quoted: ['a''b', \"c\\\"d\\\\\", \"\\u00e9\\t\\n\", '', \"\"]\nplain: a b  c\nurl: http://x:1/y?z#w\ncolon: a:b\n",
            "multi: one\n  two\n\n  three\nsq: 'x\n  y'\ndq: \"p\n\n  q\"\n",
            "---\na: 1\n...\n---\n- b\n--- c\n",
            "base: &b {cpu: 1}\nuse: *b\nlist: &l [1, 2]\nagain: *l\n",
            "# only a comment\nkey: value # trailing\n'#not': comment\nhash: a#b\n",
            "empty_map: {}\nempty_seq: []\nnull_value:\nnested:\n  deeper:\n    deepest: [ ]\n",
            "{\"kind\": \"Pod\", \"metadata\": {\"name\": \"j\"},\n \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"m\", \"command\": [\"/bin/sh\", \"-c\", \"echo 'hi' && sleep 1\"]}]}}\n",
            // The dashboard's text box rarely ends with a line break.
            "a: |\n  x",
            "a: >\n  x\n  y\n\n  z",
            "a: |+\n  x\n  ",
            "signed: [+0x10, -0x10, -0o17, +0o17, -0b11, +0b11, 0x+5, -0x8000000000000000]\n",
            "- &x name: a\n  b: 1\n- *x\n",
            "&x a: 1\nb: 2\nc: *x\n",
            "a: 1\n&y b: 2\nc: *y\n",
            "a:\n  - &z \"q\": 1\n    r: 2\n  - *z\n",
            // A carriage return alone breaks a line too.
            "a: 1\rb: |\r  x\r\r  y\rc: \"p\r  q\"\rd: [1,\r 2]\r",
            "a: &x-1_y [1]\nb: *x-1_y\n",
            "- &a # a comment, not a key: x\n- &b\n  c: 1\n",
        ];
        for text in corpus {
            let ours: Vec<Value> = documents(text).unwrap_or_else(|e| panic!("{text:?}: {e}")).iter().map(|d| d.root.to_value()).collect();
            assert_eq!(ours, libyaml(text), "{text}");
        }
    }

    fn any_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let text =
            "[ -~\t\n\u{e9}\u{1f411}\u{4e2d}]{0,12}|(null|true|no|~|-|- x|: |#|1\\.5|0x1f|007|-3|\\.inf|'|\"|\\||>|&a|\\*a|!t|%|@|`)";
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e9f64..1e9).prop_map(Value::from),
            text.prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 5, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::btree_map("[ -~\\u{e9}]{0,10}", inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever libyaml writes (through serde_norway, serde_yaml's maintained fork), and
        /// whatever serde_json writes (JSON is YAML), reads back as the value serde_json reads from its own text (floats included, which
        /// serde_json may round one bit differently from `f64::from_str`).
        #[test]
        fn reads_back_what_libyaml_and_serde_json_write(value in any_value()) {
            let value: Value = serde_json::from_str(&serde_json::to_string(&value).unwrap()).unwrap();
            let yaml = serde_norway::to_string(&value).unwrap();
            let docs = documents(&yaml).map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{yaml:?}: {e}")))?;
            proptest::prop_assert_eq!(docs.len(), 1);
            proptest::prop_assert_eq!(docs[0].root.to_value(), value.clone(), "{}", yaml);
            for json in [serde_json::to_string(&value).unwrap(), serde_json::to_string_pretty(&value).unwrap()] {
                let node = value_at(&json, 0).map_err(|e| proptest::test_runner::TestCaseError::fail(format!("{json:?}: {e}")))?;
                proptest::prop_assert_eq!(node.to_value(), value.clone(), "{}", json);
            }
        }
    }

    #[test]
    fn block_mappings_and_sequences() {
        let text = "kind: Pod\nmetadata:\n  name: a\n  labels:\n    app: web\nspec:\n  containers:\n  - name: c\n    image: minimal\n    command:\n      - /bin/sh\n      - -c\n  -   name: d\n      ports: []\n";
        assert_eq!(
            one(text),
            json!({"kind": "Pod", "metadata": {"name": "a", "labels": {"app": "web"}},
                   "spec": {"containers": [{"name": "c", "image": "minimal", "command": ["/bin/sh", "-c"]}, {"name": "d", "ports": []}]}})
        );
        assert_eq!(one("- - a\n  - b\n- c\n-\n  d: 1\n-\n"), json!([["a", "b"], "c", {"d": 1}, null]));
        assert_eq!(one("a:\nb: \nc: ~\n"), json!({"a": null, "b": null, "c": null}));
    }

    #[test]
    fn flow_collections_and_json() {
        assert_eq!(
            one("command: [\"/bin/sh\", '-c', echo hi]\nresources: {memory: 64Mi, cpu: 250m}\n"),
            json!({"command": ["/bin/sh", "-c", "echo hi"], "resources": {"memory": "64Mi", "cpu": "250m"}})
        );
        assert_eq!(
            one("{\"a\":1,\"b\":[true,null,-2.5e3,{}],\n \"c\": \"\\u00e9\\U0001f411\"}"),
            json!({"a": 1, "b": [true, null, -2500.0, {}], "c": "é🐑"})
        );
        assert_eq!(one("[a: 1, {b, c: }, [ ] ,]"), json!([{"a": 1}, {"b": null, "c": null}, []]));
        assert_eq!(one("x: [1,\n  2, # two\n  3]\n"), json!({"x": [1, 2, 3]}));
    }

    #[test]
    fn scalars_resolve_as_the_core_schema() {
        let value = one(
            "a: 1\nb: -7\nc: 0x1f\nd: 0o17\ne: 1.5\nf: .5\ng: 1e3\nh: true\ni: False\nj: null\nk: yes\nl: 1.2.3\nm: '42'\nn: .inf\no: 64Mi\np: +3\nq: 18446744073709551616\n",
        );
        assert_eq!(
            value,
            json!({"a": 1, "b": -7, "c": 31, "d": 15, "e": 1.5, "f": 0.5, "g": 1000.0, "h": true, "i": false, "j": null,
                   "k": "yes", "l": "1.2.3", "m": "42", "n": null, "o": "64Mi", "p": 3, "q": 18446744073709551616.0})
        );
    }

    #[test]
    fn quoted_scalars() {
        assert_eq!(one(r#"a: "tab\there \"q\" \x41\u00e9 \\""#), json!({"a": "tab\there \"q\" Aé \\"}));
        assert_eq!(one("a: 'it''s # not a comment'"), json!({"a": "it's # not a comment"}));
        assert_eq!(one("a: \"one\n  two\n\n  three \\\n  four\"\n"), json!({"a": "one two\nthree four"}));
        assert_eq!(one("'quoted key': 1\n\"k2\": 2\n"), json!({"quoted key": 1, "k2": 2}));
    }

    #[test]
    fn plain_scalars_span_lines_and_stop_at_comments() {
        assert_eq!(
            one("a: one\n  two\n\n  three\nb: x # comment\nc: x#y\nd: http://h:80/p\n"),
            json!({"a": "one two\nthree", "b": "x", "c": "x#y", "d": "http://h:80/p"})
        );
    }

    #[test]
    fn block_scalars() {
        assert_eq!(one("a: |\n  line 1\n    indented\n\n  line 3\nb: x\n"), json!({"a": "line 1\n  indented\n\nline 3\n", "b": "x"}));
        assert_eq!(one("a: >\n  folded\n  text\n\n  para\n   more\n  end\n"), json!({"a": "folded text\npara\n more\nend\n"}));
        assert_eq!(one("a: |-\n  x\n\nb: |+\n  y\n\n\nc: >2\n   z\n"), json!({"a": "x", "b": "y\n\n\n", "c": " z\n"}));
        assert_eq!(one("- |\n  in a list\n- after\n"), json!(["in a list\n", "after"]));
        assert_eq!(one("a: |\nb: 1\n"), json!({"a": "", "b": 1}));
        assert_eq!(one("|2-\n\n  \u{e9}\n"), json!("\n\u{e9}"), "an indentation indicator at the top level");
    }

    #[test]
    fn documents_anchors_and_comments() {
        let docs = documents("# lead\n%YAML 1.2\n---\na: &x {n: 1}\nb: *x\n...\n---\n# empty\n--- [1]\n---\n").unwrap();
        let values: Vec<Value> = docs.iter().map(|d| d.root.to_value()).collect();
        assert_eq!(values, [json!({"a": {"n": 1}, "b": {"n": 1}}), Value::Null, json!([1]), Value::Null]);
        assert_eq!(docs.iter().map(|d| d.number).collect::<Vec<_>>(), [2, 3, 4, 5]);
        assert_eq!(documents("\n# nothing\n").unwrap(), []);
        assert_eq!(one("a: 1\r\nb:\r\n  - x\r\n"), json!({"a": 1, "b": ["x"]}));
        assert_eq!(one("\u{feff}a: 1\n"), json!({"a": 1}));
        assert_eq!(fails("\u{feff}a: [\n").column, 4);
    }

    #[test]
    fn nodes_know_their_line_and_column() {
        let docs = documents("a: 1\n---\nkind: Pod\nspec:\n  containers:\n    - name: c\n      image: \"m\"\n").unwrap();
        let root = &docs[1].root;
        let path = [Step::Key("spec".into()), Step::Key("containers".into()), Step::Index(0), Step::Key("image".into())];
        assert_eq!((root.find(&path).line, root.find(&path).column), (7, 14));
        let missing = [Step::Key("spec".into()), Step::Key("nope".into())];
        assert_eq!(root.find(&missing).line, 5, "the deepest node that exists");
        let json = "[1,\n {\"x\": [true, \"é\", 7]}]";
        let node = value_at(json, 0).unwrap();
        let seven = node.find(&[Step::Index(1), Step::Key("x".into()), Step::Index(2)]);
        assert_eq!((seven.line, seven.column), (2, 20));
        // Columns count characters, also after the reader looked ahead and came back.
        let docs = documents("a: \u{e9} b\n\nc: [x, \u{e9}, y]\n").unwrap();
        let e = docs[0].root.find(&[Step::Key("c".into()), Step::Index(1)]);
        assert_eq!((e.line, e.column), (3, 8));
    }

    #[test]
    fn errors_say_where() {
        let e = fails("kind: Pod\nmetadata:\n  name: x\n   labels: oops\n");
        assert_eq!((e.line, e.column), (4, 10), "{e}");
        let e = fails("a: 1\n  b: 2\n");
        assert_eq!(e.line, 2, "{e}");
        let e = fails("a: [1, 2\n");
        assert_eq!((e.line, e.column, e.message.as_str()), (1, 4, "this [ is never closed"));
        assert_eq!(fails("a: 1\na: 2\n").line, 2);
        assert_eq!(fails("a: b: c\n").line, 1);
        assert_eq!(fails("a: - b\n").line, 1);
        let e = fails("spec:\n  name: a\n  image:nginx\n");
        // saphyr finds the missing `:` where the next line starts.
        assert_eq!((e.line, e.column), (4, 1), "{e}");
        assert_eq!(fails("a: \"open\n").message, "this double-quoted string is never closed");
        assert!(fails("a: !!str x\n").message.contains("tags"));
        assert!(fails("a: *nope\n").message.contains("unknown anchor"));
        assert_eq!(fails("a: 1\n---\n- x\ny: 2\n").document, 2);
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n";
        assert!(fails(bomb).message.contains("too many"));
    }

    #[test]
    fn aliases_may_copy_at_most_a_mebibyte() {
        // One 10 KB scalar and 50,000 aliases of it: 500 MB, were every alias copied. The
        // 315th alias (on line 317) copies past 3 MiB, and reading stops there.
        let text = format!("s: &s {}\nl:\n{}", "x".repeat(10_000), "- *s\n".repeat(50_000));
        let e = fails(&text);
        assert_eq!((e.line, e.column, e.too_large), (317, 3, true), "{e}");
        assert!(e.message.contains("more than 3 MiB"), "{e}");
        // Aliases of aliases count what they copy, keys included.
        let nested = format!("a: &a {{{}: {}}}\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n", "k".repeat(120_000), "v".repeat(120_000));
        let e = fails(&nested);
        assert_eq!((e.line, e.too_large), (3, true), "{e}");
        // Up to the budget, aliases copy as before.
        let within = format!("s: &s {}\nl: [{}]\n", "x".repeat(1_000), ["*s"; 1_000].join(", "));
        assert_eq!(one(&within)["l"].as_array().map(Vec::len), Some(1_000));
    }

    #[test]
    fn plain_digits_with_a_leading_zero_are_refused() {
        for (text, column) in [("cpu: 010\n", 6), ("a: [1, -07]\n", 8), ("a: +00\n", 4), ("- 01\n", 3)] {
            let e = fails(text);
            assert_eq!((e.line, e.column), (1, column), "{text:?}: {e}");
            assert!(e.message.contains("quote it") && e.message.contains("drop the leading zero"), "{e}");
        }
        assert_eq!(
            one("a: 0\nb: 0.5\nc: 0o17\nd: 0x10\ne: 0b101\nf: \"010\"\ng: '07'\nh: 10\ni: -0\n007: key\n"),
            json!({"a": 0, "b": 0.5, "c": 15, "d": 16, "e": 5, "f": "010", "g": "07", "h": 10, "i": 0, "007": "key"})
        );
    }

    #[test]
    fn a_document_marker_ends_what_is_left_open() {
        for text in
            ["a: \"oops\n---\nb: \"x\"\n", "a: 'oops\n...\nb: 'x'\n", "a: [1,\n---\nb: 2\n", "a: {b: x\n---\n}\n", "a: [x\n...\n]\n"]
        {
            let e = fails(text);
            assert_eq!((e.line, e.column, e.message.contains("never closed")), (1, 4, true), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_quoted_key_fits_on_its_line() {
        // saphyr finds it where the key's line ends, not at the key's start.
        for (text, line) in [("'a\nb': 1\n", 2), ("x: 1\n\"a\n b\": 2\n", 3), ("x: {'a\n': 1}\n", 1)] {
            assert_eq!(fails(text).line, line, "{text:?}");
        }
    }

    #[test]
    fn anchor_names_are_letters_digits_dashes_and_underscores() {
        for text in ["a: &a.b 1\n", "a: &x 1\nb: *x.y\n", "a: [&x/y 1]\n"] {
            assert!(fails(text).message.contains("anchor"), "{text:?}");
        }
        assert_eq!(one("a: &x-1_y [1]\nb: *x-1_y\n"), json!({"a": [1], "b": [1]}));
    }

    #[test]
    fn tabs_may_not_indent_a_continuation_line() {
        // saphyr points at the scalar the tab would continue.
        for text in ["a: b\n\tc\n", "- b\n\tc\n", "a:\n  b: c\n  \td\n"] {
            let e = fails(text);
            assert!(e.message.contains("tab"), "{text:?}: {e}");
        }
        assert_eq!(one("a: b\n \tc\n"), json!({"a": "b c"}), "a tab after the indentation is a blank");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = |open: &str, n: usize| open.repeat(n) + "x\n";
        let block: String = (0..1000).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        for text in [deep("[", 100_000), deep("{a: ", 100_000), deep("- ", 100_000), block] {
            let e = fails(&text);
            assert!(e.message.contains("nest"), "{e}");
        }
        // Anchors on anchors are no nesting: saphyr refuses a second anchor on one value.
        for text in [deep("&a ", 100_000), "[".to_string() + &deep("&a ", 100_000) + "]"] {
            fails(&text);
        }
        let nested = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(documents(&nested).is_ok());
        // An alias copies its value's depth to where it stands.
        let half = MAX_DEPTH / 2 + 1;
        let text = format!("a: &a {}{}\nb: {}*a{}\n", "[".repeat(half), "]".repeat(half), "[".repeat(half), "]".repeat(half));
        assert!(fails(&text).message.contains("nest"));
    }
}
