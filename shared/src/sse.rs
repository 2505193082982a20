//! The one Server-Sent Events decoder, for a byte stream read in arbitrary chunks: it owns
//! the framing rules (lines, `id:`/`event:`/`data:` fields, comments, blank-line dispatch)
//! so that the client crate's watch stream and the dashboard's only see whole messages.

/// One dispatched SSE message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// The `id:` field of this message, if it had one.
    pub id: Option<String>,
    /// The `event:` field; `None` means the default type, `message`.
    pub event: Option<String>,
    /// Every `data:` line joined with `\n`.
    pub data: String,
}

/// Incremental parser: feed it chunks as they arrive, take the complete messages.
#[derive(Debug, Default)]
pub struct Parser {
    /// Bytes of a line not yet ended.
    partial: Vec<u8>,
    /// The message being assembled.
    current: Message,
    has_data: bool,
}

impl Parser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes a chunk and returns every message it completed. A UTF-8 character split
    /// across chunks is fine: bytes are decoded only once a line is whole.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Message> {
        let mut out = Vec::new();
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.partial.extend_from_slice(&rest[..end]);
            rest = &rest[end + 1..];
            let mut line = std::mem::take(&mut self.partial);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.line(&String::from_utf8_lossy(&line), &mut out);
        }
        self.partial.extend_from_slice(rest);
        out
    }

    fn line(&mut self, line: &str, out: &mut Vec<Message>) {
        if line.is_empty() {
            if self.has_data {
                let mut message = std::mem::take(&mut self.current);
                if message.data.ends_with('\n') {
                    message.data.pop();
                }
                out.push(message);
            } else {
                self.current = Message::default();
            }
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.current.data.push_str(value);
                self.current.data.push('\n');
                self.has_data = true;
            }
            "id" => self.current.id = Some(value.to_string()),
            "event" => self.current.event = Some(value.to_string()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_id_event_and_data() {
        let mut parser = Parser::new();
        let messages = parser.feed(b"id: 7\nevent: watch\ndata: {\"a\":1}\n\n");
        assert_eq!(messages, vec![Message { id: Some("7".into()), event: Some("watch".into()), data: "{\"a\":1}".into() }]);
    }

    #[test]
    fn joins_chunks_split_anywhere_including_inside_a_utf8_character() {
        let text = "id: 1\ndata: mo\u{e9}\n\nid: 2\ndata: b\n\n".as_bytes();
        for split in 0..text.len() {
            let mut parser = Parser::new();
            let mut messages = parser.feed(&text[..split]);
            messages.extend(parser.feed(&text[split..]));
            assert_eq!(messages.len(), 2, "split at {split}");
            assert_eq!(messages[0].data, "mo\u{e9}");
            assert_eq!(messages[1].id.as_deref(), Some("2"));
        }
    }

    #[test]
    fn crlf_comments_and_multiline_data() {
        let mut parser = Parser::new();
        let messages = parser.feed(b": keep-alive\r\n\r\ndata: one\r\ndata: two\r\n\r\n");
        assert_eq!(messages, vec![Message { id: None, event: None, data: "one\ntwo".into() }]);
    }

    #[test]
    fn a_message_is_dispatched_only_at_the_blank_line() {
        let mut parser = Parser::new();
        assert!(parser.feed(b"data: x\n").is_empty());
        assert_eq!(parser.feed(b"\n").len(), 1);
        // A block with only an id carries no data and dispatches nothing.
        assert!(parser.feed(b"id: 3\n\n").is_empty());
    }
}
