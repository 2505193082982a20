//! A YAML reader for manifests, small enough for the browser bundle: block and flow mappings
//! and sequences, plain, quoted and block (`|`, `>`) scalars, comments, anchors and aliases,
//! and several documents separated by `---`. Every node keeps its line and column.
//!
//! Plain scalars resolve as YAML 1.2's core schema does (`null`, `~`, `true`, `42`, `0x1f`,
//! `1.5`, `.inf`), plus libyaml's `0b101`; keys are kept as written. Tags (`!…`), explicit keys (`? `), duplicate
//! keys and values nested more than 128 deep are refused with an error that says where.

use std::cell::Cell;

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

/// Text that is not YAML this reader understands, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct YamlError {
    pub document: usize,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl Node {
    /// The node as JSON. Infinite and not-a-number floats become `null`, as JSON has neither.
    pub fn to_value(&self) -> Value {
        match &self.data {
            Data::Null => Value::Null,
            Data::Bool(b) => Value::Bool(*b),
            Data::Number(n) => Value::Number(n.clone()),
            Data::String(s) => Value::String(s.clone()),
            Data::Seq(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            Data::Map(entries) => {
                // Inserted one by one: collecting would sort first, with a copy of the sort
                // code of its own in the browser bundle.
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

    /// How many nodes this one holds, itself included, and how many levels go below it.
    fn measure(&self) -> (usize, usize) {
        let add = |(nodes, depth): (usize, usize), child: &Node| {
            let (n, d) = child.measure();
            (nodes + n, depth.max(d + 1))
        };
        match &self.data {
            Data::Seq(items) => items.iter().fold((1, 0), add),
            Data::Map(entries) => entries.iter().map(|(_, v)| v).fold((1, 0), add),
            _ => (1, 0),
        }
    }
}

/// Reads every document of `text`.
pub fn documents(text: &str) -> Result<Vec<Document>, YamlError> {
    let mut pieces = text.split('\r');
    let mut normalized = String::new();
    if pieces.clone().skip(1).any(|piece| !piece.starts_with('\n')) {
        // A carriage return alone breaks a line as `\n` does; swapping one byte for the
        // other keeps every position.
        normalized.push_str(pieces.next().unwrap_or(""));
        for piece in pieces {
            normalized.push(if piece.starts_with('\n') { '\r' } else { '\n' });
            normalized.push_str(piece);
        }
    }
    let text = if normalized.is_empty() { text } else { &normalized };
    let mut r = Reader::new(text, 0);
    if text.starts_with('\u{feff}') {
        // A byte order mark, as some editors on Windows write, is neither content nor a
        // column.
        (r.pos, r.line_start) = (3, 3);
    }
    let mut documents = Vec::new();
    loop {
        r.skip_to_token();
        while r.pos == r.line_start && r.peek() == b'%' {
            // A directive (`%YAML 1.2`): nothing in a manifest depends on it.
            r.skip_line();
            r.skip_to_token();
        }
        if r.peek() == 0 {
            break;
        }
        if r.at_marker(b'.') {
            r.advance(3);
            r.end_of_line()?;
            continue;
        }
        if r.at_marker(b'-') {
            r.advance(3);
            r.document += 1;
        }
        let root = r.value(-1, false, true)?;
        documents.push(Document { number: r.document, root });
        r.skip_to_token();
        if !r.at_document_end() {
            return Err(r.error("more content after the document's top-level value; check the indentation"));
        }
    }
    Ok(documents)
}

/// Reads the flow value (`{…}`, `[…]` or a scalar) that starts at byte `start` of `text`,
/// after any blank space: positions inside JSON, which is YAML's flow style.
pub fn value_at(text: &str, start: usize) -> Result<Node, YamlError> {
    let mut r = Reader::new(text, start);
    r.skip_to_token();
    r.flow_node()
}

/// The most nodes that aliases may copy in one text, so a few lines cannot expand into
/// millions of values.
const ALIAS_BUDGET: usize = 100_000;

/// How deep values may nest (as serde_yaml allows): every level takes stack, and the
/// browser's is small; no manifest comes near.
const MAX_DEPTH: usize = 128;

struct Reader<'t> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
    /// 1-based line of `pos`, and the byte where that line starts.
    line: usize,
    line_start: usize,
    document: usize,
    anchors: Vec<(String, Node)>,
    copied: usize,
    /// How many values enclose the one being read.
    depth: usize,
    /// The last column worked out, as (byte, column): counting from the line's start for
    /// every value made a long line (minified JSON) quadratic.
    known_column: Cell<(usize, usize)>,
}

fn node((line, column): (usize, usize), data: Data) -> Node {
    Node { line, column, data }
}

fn is_flow_indicator(b: u8) -> bool {
    matches!(b, b',' | b'[' | b']' | b'{' | b'}')
}

impl<'t> Reader<'t> {
    fn new(text: &'t str, start: usize) -> Self {
        let start = start.min(text.len());
        let before = &text.as_bytes()[..start];
        let line = 1 + before.iter().filter(|b| **b == b'\n').count();
        let line_start = before.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        Reader {
            text,
            bytes: text.as_bytes(),
            pos: start,
            line,
            line_start,
            document: 1,
            anchors: Vec::new(),
            copied: 0,
            depth: 0,
            known_column: Cell::new((0, 1)),
        }
    }

    fn peek(&self) -> u8 {
        self.peek_at(0)
    }

    fn peek_at(&self, k: usize) -> u8 {
        self.bytes.get(self.pos + k).copied().unwrap_or(0)
    }

    fn bump(&mut self) {
        if let Some(&b) = self.bytes.get(self.pos) {
            self.pos += 1;
            if b == b'\n' {
                self.line += 1;
                self.line_start = self.pos;
            }
        }
    }

    fn advance(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    /// Whether the byte `k` ahead ends a token: a blank, a line break or the end.
    fn space_at(&self, k: usize) -> bool {
        matches!(self.peek_at(k), b' ' | b'\t' | b'\r' | b'\n' | 0)
    }

    /// 1-based column of the cursor, in characters.
    fn column(&self) -> usize {
        let (mut from, mut column) = self.known_column.get();
        if !(self.line_start..=self.pos).contains(&from) {
            (from, column) = (self.line_start, 1);
        }
        column += self.bytes[from..self.pos].iter().filter(|b| (**b & 0xC0) != 0x80).count();
        self.known_column.set((self.pos, column));
        column
    }

    /// The cursor's column as an indentation (0-based); tabs may not indent a line.
    fn indent(&self) -> Result<isize, YamlError> {
        let lead = &self.bytes[self.line_start..self.pos];
        if let Some(tab) = lead.iter().position(|b| *b == b'\t').filter(|_| lead.iter().all(|b| matches!(b, b' ' | b'\t'))) {
            return Err(self.error_at((self.line, tab + 1), "a tab indents this line; YAML indents with spaces only"));
        }
        Ok(self.column() as isize - 1)
    }

    /// Reads a value one level deeper than the one being read.
    fn nested(&mut self, read: impl FnOnce(&mut Self) -> Result<Node, YamlError>) -> Result<Node, YamlError> {
        if self.depth + 1 >= MAX_DEPTH {
            return Err(self.error(format!("values nest more than {MAX_DEPTH} deep here")));
        }
        self.depth += 1;
        let node = read(self);
        self.depth -= 1;
        node
    }

    fn error(&self, message: impl Into<String>) -> YamlError {
        self.error_at((self.line, self.column()), message)
    }

    fn error_at(&self, (line, column): (usize, usize), message: impl Into<String>) -> YamlError {
        YamlError { document: self.document, line, column, message: message.into() }
    }

    fn position(&self) -> (usize, usize) {
        (self.line, self.column())
    }

    fn skip_blanks(&mut self) {
        while matches!(self.peek(), b' ' | b'\t' | b'\r') {
            self.bump();
        }
    }

    fn skip_line(&mut self) {
        while !matches!(self.peek(), b'\n' | 0) {
            self.bump();
        }
    }

    /// Skips blanks and a comment; true when nothing else is left on the line.
    fn rest_is_empty(&mut self) -> bool {
        self.skip_blanks();
        if self.peek() == b'#' {
            self.skip_line();
        }
        matches!(self.peek(), b'\n' | 0)
    }

    fn end_of_line(&mut self) -> Result<(), YamlError> {
        if self.rest_is_empty() { Ok(()) } else { Err(self.error("unexpected text after the value on this line")) }
    }

    /// Moves to the next token, across blank lines and comments.
    fn skip_to_token(&mut self) {
        while self.rest_is_empty() && self.peek() == b'\n' {
            self.bump();
        }
    }

    /// `---` or `...` at the start of a line, alone or followed by a blank.
    fn at_marker(&self, c: u8) -> bool {
        self.pos == self.line_start && self.peek() == c && self.peek_at(1) == c && self.peek_at(2) == c && self.space_at(3)
    }

    /// The end of the text, or a `---` or `...` line: where every value ends.
    fn at_document_end(&self) -> bool {
        self.peek() == 0 || self.at_marker(b'-') || self.at_marker(b'.')
    }

    fn at_seq_entry(&self) -> bool {
        self.peek() == b'-' && self.space_at(1)
    }

    /// The value after `key:`, `- ` or `---`: on the same line, or on the lines below
    /// indented more than `indent` (a sequence under a key may also sit at `indent` itself,
    /// when `seq_at_indent`). `compact` allows a block collection to start on this line,
    /// as after `- `. Nothing there is a null.
    fn value(&mut self, indent: isize, seq_at_indent: bool, compact: bool) -> Result<Node, YamlError> {
        let at = self.position();
        if !self.rest_is_empty() {
            let column = self.indent()?;
            return self.node_here(indent, if compact { Some(column) } else { None });
        }
        self.skip_to_token();
        if self.at_document_end() {
            return Ok(node(at, Data::Null));
        }
        let column = self.indent()?;
        if column > indent || (seq_at_indent && column == indent && self.at_seq_entry()) {
            self.node_here(indent, Some(column))
        } else {
            Ok(node(at, Data::Null))
        }
    }

    /// Reads the node at the cursor in block context. `block` is the column a block mapping
    /// or sequence starting here would have, or `None` where none may start (after `key: `).
    fn node_here(&mut self, indent: isize, block: Option<isize>) -> Result<Node, YamlError> {
        let at = self.position();
        let nested_here = "a mapping or a sequence cannot start on the same line as its key; move it to the next line";
        match self.peek() {
            b'-' if self.space_at(1) => match block {
                Some(column) => self.block_seq(column),
                None => Err(self.error(nested_here)),
            },
            b'&' => match block {
                Some(column) if self.anchors_a_key() => {
                    let key = self.block_key()?;
                    self.block_map(column, key, at)
                }
                _ => {
                    let name = self.anchor_name()?;
                    let node = self.nested(|r| r.value(indent, false, block.is_some()))?;
                    self.anchors.push((name, node.clone()));
                    Ok(node)
                }
            },
            b'|' | b'>' => self.block_scalar(indent),
            b'[' | b'{' | b'*' => {
                let node = self.flow_node()?;
                self.skip_blanks();
                if self.peek() == b':' && self.space_at(1) {
                    return Err(self.error("only plain or quoted keys are supported in a block mapping"));
                }
                self.end_of_line()?;
                Ok(node)
            }
            b'"' | b'\'' => {
                let text = self.quoted()?;
                self.skip_blanks();
                if self.peek() == b':' && self.space_at(1) {
                    self.key_on_one_line(at)?;
                    return match block {
                        Some(column) => self.block_map(column, text, at),
                        None => Err(self.error(nested_here)),
                    };
                }
                self.end_of_line()?;
                Ok(node(at, Data::String(text)))
            }
            _ => {
                self.check_plain_start(false)?;
                let first = self.plain_segment(false).to_string();
                if self.peek() == b':' && self.space_at(1) {
                    return match block {
                        Some(column) => self.block_map(column, first, at),
                        None => Err(self.error("mapping values are not allowed here: a key cannot follow another key on one line")),
                    };
                }
                let text = self.plain_rest(first, indent, false)?;
                Ok(node(at, resolve(&text)))
            }
        }
    }

    fn block_map(&mut self, column: isize, first_key: String, first_at: (usize, usize)) -> Result<Node, YamlError> {
        let mut entries: Vec<(String, Node)> = Vec::new();
        // The keys seen, to find a duplicate without a quadratic search: serde_json's map
        // is in the browser bundle already.
        let mut keys = serde_json::Map::new();
        let (mut key, mut key_at) = (first_key, first_at);
        loop {
            self.skip_blanks();
            // The cursor is at the `:` that follows the key.
            self.bump();
            if keys.insert(key.clone(), Value::Null).is_some() {
                return Err(self.error_at(key_at, format!("duplicate key {key:?}")));
            }
            let value = self.nested(|r| r.value(column, true, false))?;
            entries.push((key, value));
            self.skip_to_token();
            if self.at_document_end() {
                break;
            }
            let here = self.indent()?;
            if here < column {
                break;
            }
            if here > column {
                return Err(self.error("this line is indented more than the keys of its mapping"));
            }
            key_at = self.position();
            key = self.block_key()?;
        }
        Ok(node(first_at, Data::Map(entries)))
    }

    /// A key at the start of a mapping line, up to (not including) its `:`.
    fn block_key(&mut self) -> Result<String, YamlError> {
        let anchor = if self.peek() == b'&' {
            let name = self.anchor_name()?;
            self.skip_blanks();
            Some(name)
        } else {
            None
        };
        let at = self.position();
        let key = match self.peek() {
            b'"' | b'\'' => self.quoted()?,
            b'-' if self.space_at(1) => return Err(self.error("a sequence item `- ` where a mapping key was expected")),
            b'[' | b'{' | b'&' | b'*' | b'|' | b'>' => return Err(self.error("only plain or quoted keys are supported in a block mapping")),
            _ => {
                self.check_plain_start(false)?;
                self.plain_segment(false).to_string()
            }
        };
        self.key_on_one_line(at)?;
        self.skip_blanks();
        if self.peek() == b':' && self.space_at(1) {
            if let Some(name) = anchor {
                self.anchors.push((name, node(at, Data::String(key.clone()))));
            }
            Ok(key)
        } else {
            let hint = if key.contains(':') { " (a `:` ends a key only with a space after it)" } else { "" };
            Err(self.error(format!("expected `:` after a key: every line of a mapping is `key: value`{hint}")))
        }
    }

    /// A key (which starts at `at` and ends at the cursor) may not span lines, as YAML
    /// wants: a quote left open would otherwise swallow the lines below into the key.
    fn key_on_one_line(&self, at: (usize, usize)) -> Result<(), YamlError> {
        if self.line == at.0 { Ok(()) } else { Err(self.error_at(at, "a key must fit on one line; close its quote on this line")) }
    }

    /// Whether the anchor at the cursor comes before `key: ` on its line: it then names the
    /// key, and the mapping starts at the anchor, as libyaml reads it.
    fn anchors_a_key(&mut self) -> bool {
        let (saved, anchors) = ((self.pos, self.line, self.line_start), self.anchors.len());
        let key = self.block_key().is_ok();
        (self.pos, self.line, self.line_start) = saved;
        self.anchors.truncate(anchors);
        key
    }

    fn block_seq(&mut self, column: isize) -> Result<Node, YamlError> {
        let at = self.position();
        let mut items = Vec::new();
        loop {
            // The cursor is at the `-`.
            self.bump();
            items.push(self.nested(|r| r.value(column, false, true))?);
            self.skip_to_token();
            if self.at_document_end() {
                break;
            }
            let here = self.indent()?;
            if here > column {
                return Err(self.error("this line is indented more than the `- ` items of its sequence"));
            }
            if here < column || !self.at_seq_entry() {
                break;
            }
        }
        Ok(node(at, Data::Seq(items)))
    }

    fn anchor_name(&mut self) -> Result<String, YamlError> {
        self.bump();
        let start = self.pos;
        while self.peek().is_ascii_alphanumeric() || matches!(self.peek(), b'-' | b'_') {
            self.bump();
        }
        // The characters libyaml, and so kubectl's reader, takes in a name.
        if start == self.pos || !(self.space_at(0) || is_flow_indicator(self.peek()) || self.peek() == b':') {
            return Err(self.error("an anchor or alias name is made of letters, digits, `-` and `_`"));
        }
        Ok(self.text[start..self.pos].to_string())
    }

    fn alias(&mut self) -> Result<Node, YamlError> {
        let at = self.position();
        let name = self.anchor_name()?;
        let Some((_, node)) = self.anchors.iter().rev().find(|(n, _)| *n == name) else {
            return Err(self.error_at(at, format!("unknown alias *{name}: define it with &{name} first")));
        };
        let (nodes, depth) = node.measure();
        self.copied += nodes;
        if self.copied > ALIAS_BUDGET {
            return Err(self.error_at(at, "aliases expand to too many values"));
        }
        if self.depth + depth >= MAX_DEPTH {
            return Err(self.error_at(at, format!("values nest more than {MAX_DEPTH} deep with this alias")));
        }
        let mut node = node.clone();
        (node.line, node.column) = at;
        Ok(node)
    }

    /// Plain scalars cannot start with an indicator character.
    fn check_plain_start(&self, flow: bool) -> Result<(), YamlError> {
        match self.peek() {
            b'!' => Err(self.error("YAML tags (`!…`) are not supported in manifests")),
            b'?' if self.space_at(1) => Err(self.error("explicit keys (`? `) are not supported in manifests")),
            b'#' | b'%' | b'@' | b'`' => Err(self.error(format!("a plain value cannot start with {:?}; quote it", self.peek() as char))),
            b',' | b']' | b'}' => Err(self.error(format!("unexpected {:?}: expected a value", self.peek() as char))),
            b':' if self.space_at(1) || (flow && is_flow_indicator(self.peek_at(1))) => Err(self.error("expected a value before `:`")),
            _ => Ok(()),
        }
    }

    /// One line's worth of a plain scalar: up to `: `, ` #` or the line's end (and in flow
    /// context up to `,[]{}`), without trailing blanks.
    fn plain_segment(&mut self, flow: bool) -> &'t str {
        let start = self.pos;
        let mut end = self.pos;
        loop {
            let b = self.peek();
            let stop = match b {
                b'\n' | 0 => true,
                b':' => self.space_at(1) || (flow && is_flow_indicator(self.peek_at(1))),
                b'#' => self.pos > start && matches!(self.bytes[self.pos - 1], b' ' | b'\t'),
                b' ' | b'\t' | b'\r' => false,
                _ => flow && is_flow_indicator(b),
            };
            if stop {
                break;
            }
            self.bump();
            if !matches!(b, b' ' | b'\t' | b'\r') {
                end = self.pos;
            }
        }
        &self.text[start..end]
    }

    /// Continues a plain scalar on the lines below that are indented more than `indent`
    /// (any line, in flow context), folding line breaks as YAML does.
    fn plain_rest(&mut self, mut text: String, indent: isize, flow: bool) -> Result<String, YamlError> {
        loop {
            self.skip_blanks();
            if self.peek() != b'\n' {
                return Ok(text);
            }
            let saved = (self.pos, self.line, self.line_start);
            let mut breaks = 0;
            while self.peek() == b'\n' {
                self.bump();
                breaks += 1;
                self.skip_blanks();
            }
            let continues = match self.peek() {
                0 | b'#' => false,
                _ if self.at_document_end() => false,
                b => {
                    if flow {
                        !is_flow_indicator(b) && !(b == b':' && (self.space_at(1) || is_flow_indicator(self.peek_at(1))))
                    } else {
                        self.column() as isize - 1 > indent
                    }
                }
            };
            if !continues {
                (self.pos, self.line, self.line_start) = saved;
                return Ok(text);
            }
            // The line's indentation, up to the column it must go past, is spaces only.
            let lead = &self.bytes[self.line_start..self.pos];
            if let Some(tab) = lead.iter().take((indent + 1).max(0) as usize).position(|b| *b == b'\t') {
                return Err(self.error_at((self.line, tab + 1), "a tab indents this line; YAML indents with spaces only"));
            }
            if breaks == 1 {
                text.push(' ');
            } else {
                text.extend(std::iter::repeat_n('\n', breaks - 1));
            }
            text.push_str(self.plain_segment(flow));
            if !flow && self.peek() == b':' {
                return Err(self.error(
                    "mapping values are not allowed here: a `key: value` line continues the plain value above it; check the indentation",
                ));
            }
        }
    }

    /// A single- or double-quoted scalar, which may span lines.
    fn quoted(&mut self) -> Result<String, YamlError> {
        let at = self.position();
        let quote = self.peek();
        let unclosed = |r: &Self| {
            let kind = if quote == b'"' { "double-quoted" } else { "single-quoted" };
            r.error_at(at, format!("this {kind} string is never closed"))
        };
        self.bump();
        let mut out = String::new();
        loop {
            let run = self.pos;
            while !matches!(self.peek(), b'\\' | b'\'' | b'"' | b'\n' | b' ' | b'\t' | b'\r' | 0) {
                self.bump();
            }
            out.push_str(&self.text[run..self.pos]);
            match self.peek() {
                0 => return Err(unclosed(self)),
                b'\'' if quote == b'\'' && self.peek_at(1) == b'\'' => {
                    out.push('\'');
                    self.advance(2);
                }
                b if b == quote => {
                    self.bump();
                    return Ok(out);
                }
                b'\\' if quote == b'"' => self.escape(&mut out)?,
                b' ' | b'\t' | b'\r' | b'\n' => {
                    let blanks = self.pos;
                    self.skip_blanks();
                    if self.peek() != b'\n' {
                        out.push_str(&self.text[blanks..self.pos]);
                        continue;
                    }
                    let mut breaks = 0;
                    while self.peek() == b'\n' {
                        self.bump();
                        if self.at_document_end() {
                            return Err(unclosed(self));
                        }
                        breaks += 1;
                        self.skip_blanks();
                    }
                    if breaks == 1 {
                        out.push(' ');
                    } else {
                        out.extend(std::iter::repeat_n('\n', breaks - 1));
                    }
                }
                b => {
                    out.push(b as char);
                    self.bump();
                }
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), YamlError> {
        let at = self.position();
        self.bump();
        let c = self.peek();
        self.bump();
        let simple = match c {
            b'0' => '\0',
            b'a' => '\x07',
            b'b' => '\x08',
            b't' | b'\t' => '\t',
            b'n' => '\n',
            b'v' => '\x0b',
            b'f' => '\x0c',
            b'r' => '\r',
            b'e' => '\x1b',
            b' ' => ' ',
            b'"' => '"',
            b'/' => '/',
            b'\\' => '\\',
            b'N' => '\u{85}',
            b'_' => '\u{a0}',
            b'L' => '\u{2028}',
            b'P' => '\u{2029}',
            b'\n' | b'\r' => {
                // An escaped line break joins the lines without a space.
                if c == b'\r' && self.peek() == b'\n' {
                    self.bump();
                }
                self.skip_blanks();
                return Ok(());
            }
            b'x' | b'u' | b'U' => {
                let digits = match c {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let mut code = self.hex(digits, at)?;
                if (0xD800..0xDC00).contains(&code) && self.peek() == b'\\' && self.peek_at(1) == b'u' {
                    // JSON writes characters beyond the BMP as a surrogate pair.
                    self.advance(2);
                    let low = self.hex(4, at)?;
                    if (0xDC00..0xE000).contains(&low) {
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    }
                }
                char::from_u32(code).ok_or_else(|| self.error_at(at, "this escape is not a valid character"))?
            }
            _ => return Err(self.error_at(at, "unknown escape sequence in a double-quoted string")),
        };
        out.push(simple);
        Ok(())
    }

    fn hex(&mut self, digits: usize, at: (usize, usize)) -> Result<u32, YamlError> {
        let text = self.text.get(self.pos..self.pos + digits).unwrap_or("");
        let code =
            u32::from_str_radix(text, 16).map_err(|_| self.error_at(at, format!("expected {digits} hexadecimal digits in this escape")))?;
        self.advance(digits);
        Ok(code)
    }

    /// A literal (`|`) or folded (`>`) block scalar, with its chomping (`-`, `+`) and
    /// indentation (`1`-`9`) indicators; its lines are indented more than `indent`.
    fn block_scalar(&mut self, indent: isize) -> Result<Node, YamlError> {
        let at = self.position();
        let literal = self.peek() == b'|';
        self.bump();
        let (mut chomp, mut explicit) = (b' ', None);
        for _ in 0..2 {
            match self.peek() {
                b'-' | b'+' if chomp == b' ' => chomp = self.peek(),
                b @ b'1'..=b'9' if explicit.is_none() => explicit = Some(indent.max(0) as usize + (b - b'0') as usize),
                _ => break,
            }
            self.bump();
        }
        if !self.space_at(0) || !self.rest_is_empty() {
            return Err(self.error("expected a line break after a block scalar's indicators"));
        }
        self.bump();
        let mut content_indent = explicit;
        // The lines without their indentation; "" for an empty line.
        let mut lines: Vec<&str> = Vec::new();
        // Whether the last line read ends with a line break: the text's last line may not.
        let mut broken = true;
        while !self.at_document_end() {
            let start = self.pos;
            let line = self.text[start..].split('\n').next().unwrap_or("").trim_end_matches('\r');
            let spaces = line.len() - line.trim_start_matches(' ').len();
            if line[spaces..].trim_start_matches('\t').is_empty() {
                lines.push(line.get(content_indent.unwrap_or(usize::MAX)..).unwrap_or(""));
            } else {
                let needed = match content_indent {
                    Some(n) => n,
                    None if spaces as isize > indent => *content_indent.insert(spaces),
                    None => break,
                };
                if spaces < needed {
                    break;
                }
                lines.push(&line[needed..]);
            }
            self.skip_line();
            broken = self.peek() == b'\n';
            self.bump();
        }
        if !broken && lines.last() == Some(&"") {
            // Blanks after the last line break are no line.
            lines.pop();
            broken = true;
        }
        // Trailing empty lines are chomping's business, not content.
        let trailing = lines.iter().rev().take_while(|l| l.is_empty()).count();
        let body = &lines[..lines.len() - trailing];
        let more_indented = |l: &str| l.starts_with([' ', '\t']);
        let mut text = String::new();
        let mut previous: Option<&str> = None;
        let mut empty = 0;
        for line in body {
            if line.is_empty() {
                empty += 1;
                continue;
            }
            let breaks = match previous {
                // Folding: a single line break between two plain text lines becomes a space;
                // around empty lines the first break is dropped.
                Some(p) if !literal && !more_indented(p) && !more_indented(line) => {
                    if empty == 0 {
                        text.push(' ');
                    }
                    empty
                }
                Some(_) => empty + 1,
                None => empty,
            };
            text.extend(std::iter::repeat_n('\n', breaks));
            text.push_str(line);
            previous = Some(line);
            empty = 0;
        }
        if chomp != b'-' && !body.is_empty() && (broken || trailing > 0) {
            text.push('\n');
        }
        if chomp == b'+' {
            text.extend(std::iter::repeat_n('\n', trailing));
        }
        Ok(node(at, Data::String(text)))
    }

    /// A node in flow context (inside `[ ]` or `{ }`, or one that starts with them).
    fn flow_node(&mut self) -> Result<Node, YamlError> {
        let at = self.position();
        match self.peek() {
            b'[' => self.flow_seq(),
            b'{' => self.flow_map(),
            b'"' | b'\'' => Ok(node(at, Data::String(self.quoted()?))),
            b'*' => self.alias(),
            b'&' => {
                let name = self.anchor_name()?;
                self.skip_flow_space();
                let node = self.nested(Self::flow_node)?;
                self.anchors.push((name, node.clone()));
                Ok(node)
            }
            b'|' | b'>' => Err(self.error("block scalars (`|`, `>`) cannot appear inside [ ] or { }")),
            b'-' if self.space_at(1) => Err(self.error("a block sequence `- ` cannot appear inside [ ] or { }")),
            _ => {
                self.check_plain_start(true)?;
                let first = self.plain_segment(true).to_string();
                let text = self.plain_rest(first, -1, true)?;
                Ok(node(at, resolve(&text)))
            }
        }
    }

    fn skip_flow_space(&mut self) {
        while self.rest_is_empty() && self.peek() == b'\n' {
            self.bump();
        }
    }

    fn flow_seq(&mut self) -> Result<Node, YamlError> {
        let at = self.position();
        self.bump();
        let mut items = Vec::new();
        loop {
            self.skip_flow_space();
            match self.peek() {
                b']' => break,
                _ if self.at_document_end() => return Err(self.error_at(at, "this [ is never closed")),
                _ => {}
            }
            let item = self.nested(Self::flow_node)?;
            self.skip_flow_space();
            let item = if self.peek() == b':' {
                // `[name: value]`: a single-pair mapping.
                let key = match item.data {
                    Data::String(s) => s,
                    Data::Number(n) => n.to_string(),
                    Data::Bool(b) => b.to_string(),
                    Data::Null => String::new(),
                    _ => return Err(self.error_at((item.line, item.column), "a key must be a plain or quoted value")),
                };
                self.bump();
                let value = self.flow_value(b']')?;
                node((item.line, item.column), Data::Map(vec![(key, value)]))
            } else {
                item
            };
            items.push(item);
            self.flow_separator(at, b']', "an item of a [ ] sequence")?;
        }
        self.bump();
        Ok(node(at, Data::Seq(items)))
    }

    /// The value after a `:` inside flow braces or brackets; nothing before `,` or the
    /// closing `close` is a null.
    fn flow_value(&mut self, close: u8) -> Result<Node, YamlError> {
        let at = self.position();
        self.skip_flow_space();
        if self.peek() == b',' || self.peek() == close || self.at_document_end() {
            return Ok(node(at, Data::Null));
        }
        self.nested(Self::flow_node)
    }

    /// After an element of the flow collection opened at `at`: consumes a `,`, or stops at
    /// the `close` bracket (which the caller consumes).
    fn flow_separator(&mut self, at: (usize, usize), close: u8, element: &str) -> Result<(), YamlError> {
        self.skip_flow_space();
        match self.peek() {
            b',' => {
                self.bump();
                Ok(())
            }
            found if found == close => Ok(()),
            _ if self.at_document_end() => {
                let open = if close == b']' { '[' } else { '{' };
                Err(self.error_at(at, format!("this {open} is never closed")))
            }
            _ => Err(self.error(format!("expected `,` or `{}` after {element}", close as char))),
        }
    }

    fn flow_map(&mut self) -> Result<Node, YamlError> {
        let at = self.position();
        self.bump();
        let mut entries: Vec<(String, Node)> = Vec::new();
        let mut keys = serde_json::Map::new();
        loop {
            self.skip_flow_space();
            match self.peek() {
                b'}' => break,
                _ if self.at_document_end() => return Err(self.error_at(at, "this { is never closed")),
                _ => {}
            }
            let key_at = self.position();
            let key = match self.peek() {
                b'"' | b'\'' => self.quoted()?,
                b'[' | b'{' | b'&' | b'*' | b'|' | b'>' => return Err(self.error("only plain or quoted keys are supported in { }")),
                _ => {
                    self.check_plain_start(true)?;
                    self.plain_segment(true).to_string()
                }
            };
            self.key_on_one_line(key_at)?;
            if keys.insert(key.clone(), Value::Null).is_some() {
                return Err(self.error_at(key_at, format!("duplicate key {key:?}")));
            }
            self.skip_flow_space();
            let value = if self.peek() == b':' {
                self.bump();
                self.flow_value(b'}')?
            } else {
                node(key_at, Data::Null)
            };
            entries.push((key, value));
            self.flow_separator(at, b'}', "an entry of a { } mapping")?;
        }
        self.bump();
        Ok(node(at, Data::Map(entries)))
    }
}

/// What a plain scalar means under YAML 1.2's core schema.
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
    } else if unsigned.len() > 1 && unsigned.starts_with('0') && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        // `007` is a string, as libyaml reads it, not a number.
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
            "numbers: [0, -1, +2, 3.25, -4e2, 0x10, 0o7, 0b101, .5, 1., 007, -0, 0.0]\nwords: [yes, no, on, off, y, n, ~, null, Null, TRUE, False]\n",
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
            one("{\"a\":1,\"b\":[true,null,-2.5e3,{}],\n \"c\": \"\\u00e9\\ud83d\\udc11\"}"),
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
        let e = fails("a:\n \t- b\n");
        assert_eq!((e.line, e.column), (2, 2), "the tab itself: {e}");
        let e = fails("spec:\n  name: a\n  image:nginx\n");
        assert_eq!((e.line, e.column), (3, 14), "{e}");
        assert!(e.message.contains("space after"), "{e}");
        assert_eq!(fails("a: \"open\n").message, "this double-quoted string is never closed");
        assert!(fails("a: !!str x\n").message.contains("tags"));
        assert!(fails("a: *nope\n").message.contains("unknown alias"));
        assert_eq!(fails("a: 1\n---\n- x\ny: 2\n").document, 2);
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n";
        assert!(fails(bomb).message.contains("too many"));
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
        for (text, at) in [("'a\nb': 1\n", (1, 1)), ("x: 1\n\"a\n b\": 2\n", (2, 1)), ("x: {'a\n': 1}\n", (1, 5))] {
            let e = fails(text);
            assert_eq!(((e.line, e.column), e.message.contains("one line")), (at, true), "{text:?}: {e}");
        }
    }

    #[test]
    fn anchor_names_are_letters_digits_dashes_and_underscores() {
        for text in ["a: &a.b 1\n", "a: &x 1\nb: *x.y\n", "a: [&x/y 1]\n"] {
            assert!(fails(text).message.contains("anchor"), "{text:?}");
        }
    }

    #[test]
    fn tabs_may_not_indent_a_continuation_line() {
        for (text, line) in [("a: b\n\tc\n", 2), ("- b\n\tc\n", 2), ("a:\n  b: c\n  \td\n", 3)] {
            let e = fails(text);
            assert_eq!((e.line, e.message.contains("tab")), (line, true), "{text:?}: {e}");
        }
        assert_eq!(one("a: b\n \tc\n"), json!({"a": "b c"}), "a tab after the indentation is a blank");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = |open: &str, n: usize| open.repeat(n) + "x\n";
        let block: String = (0..1000).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        for text in [
            deep("[", 100_000),
            deep("{a: ", 100_000),
            deep("- ", 100_000),
            deep("&a ", 100_000),
            "[".to_string() + &deep("&a ", 100_000) + "]",
            block,
        ] {
            let e = fails(&text);
            assert!(e.message.contains("nest"), "{e}");
        }
        let nested = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(documents(&nested).is_ok());
        // An alias copies its value's depth to where it stands.
        let half = MAX_DEPTH / 2 + 1;
        let text = format!("a: &a {}{}\nb: {}*a{}\n", "[".repeat(half), "]".repeat(half), "[".repeat(half), "]".repeat(half));
        assert!(fails(&text).message.contains("nest"));
    }
}
