//! Kubernetes' remote command protocol (exec and attach), as kubectl 1.32 speaks it over a
//! WebSocket: the subprotocols, the channel that leads each binary message, the query that
//! says what to run and which streams to join, the Status that ends a session with its exit
//! code, and a reader that finds that Status in a stream of frames going by (the server's
//! audit line, which proxies the frames without decoding them).

use serde_json::{Value, json};

/// The subprotocol with the close signal (a stream's end of input), kubectl's first choice.
pub const V5: &str = "v5.channel.k8s.io";
/// The subprotocol without it.
pub const V4: &str = "v4.channel.k8s.io";
/// The subprotocols served, in the order of preference.
pub const PROTOCOLS: [&str; 2] = [V5, V4];

/// The first byte of each binary message: the stream it belongs to.
pub mod channel {
    pub const STDIN: u8 = 0;
    pub const STDOUT: u8 = 1;
    pub const STDERR: u8 = 2;
    /// The Status that ends the session.
    pub const ERROR: u8 = 3;
    /// `{"Width": …, "Height": …}` of the client's terminal.
    pub const RESIZE: u8 = 4;
    /// v5: `[CLOSE, channel]` ends that channel (stdin's end of input).
    pub const CLOSE: u8 = 255;
}

/// What a session runs and which streams it joins, read from its query
/// (`command=sh&command=-c&…&container=main&stdin=true&stdout=true&stderr=true&tty=false`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Empty: the pod's only container.
    pub container: String,
    /// Empty for attach, which joins the container's own process.
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
}

impl Options {
    /// Reads the query's pairs, in order; unknown keys are ignored, as Kubernetes does.
    pub fn from_query(pairs: &[(String, String)]) -> Result<Options, String> {
        let mut options = Options::default();
        for (key, value) in pairs {
            let flag = || crate::parse::flag(value).map_err(|e| format!("{key}: {e}"));
            match key.as_str() {
                "command" => options.command.push(value.clone()),
                "container" => options.container.clone_from(value),
                "stdin" => options.stdin = flag()?,
                "stdout" => options.stdout = flag()?,
                "stderr" => options.stderr = flag()?,
                "tty" => options.tty = flag()?,
                _ => {}
            }
        }
        if !(options.stdin || options.stdout || options.stderr) {
            return Err("you must specify at least one of stdin, stdout and stderr".into());
        }
        // A terminal has one output: the kubelet drops stderr too.
        if options.tty {
            options.stderr = false;
        }
        Ok(options)
    }

    /// The query that asks for these options, as [`Options::from_query`] reads it.
    pub fn to_query(&self) -> Vec<(&'static str, String)> {
        let mut query: Vec<(&'static str, String)> = self.command.iter().map(|part| ("command", part.clone())).collect();
        if !self.container.is_empty() {
            query.push(("container", self.container.clone()));
        }
        for (key, on) in [("stdin", self.stdin), ("stdout", self.stdout), ("stderr", self.stderr), ("tty", self.tty)] {
            query.push((key, on.to_string()));
        }
        query
    }
}

/// The Status that ends a session whose process exited with `exit_code`, as the kubelet
/// writes it: Success, or Failure with reason NonZeroExitCode and the code as a cause,
/// which kubectl exits with.
pub fn exit_status(exit_code: i64) -> String {
    if exit_code == 0 {
        return json!({"metadata": {}, "status": "Success"}).to_string();
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("command terminated with non-zero exit code: exit status {exit_code}"),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": exit_code.to_string()}]},
    })
    .to_string()
}

/// The Status that ends a session that failed for another reason than its process' exit.
pub fn failure_status(message: &str) -> String {
    json!({"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError"}).to_string()
}

/// The exit code a session's Status tells, or the failure it tells instead. Read as text, as
/// the dashboard reads every answer: serde_json's byte reader would be a second copy of the
/// JSON parser in its wasm.
pub fn exit_code(status: &[u8]) -> Result<i64, String> {
    let unreadable = |e: &dyn std::fmt::Display| format!("the session ended with an unreadable status: {e}");
    let text = std::str::from_utf8(status).map_err(|e| unreadable(&e))?;
    let status: Value = serde_json::from_str(text).map_err(|e| unreadable(&e))?;
    if status["status"] == "Success" {
        return Ok(0);
    }
    let code = status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|cause| cause["reason"] == "ExitCode")
        .and_then(|cause| cause["message"].as_str()?.parse().ok());
    match (status["reason"].as_str(), code) {
        (Some("NonZeroExitCode"), Some(code)) => Ok(code),
        _ => Err(status["message"].as_str().unwrap_or("the session failed").to_string()),
    }
}

/// The most of a Status message kept: a Status is a few hundred bytes.
const STATUS_LIMIT: usize = 64 * 1024;

/// Finds the Status message (channel [`channel::ERROR`]) in the bytes of a WebSocket
/// connection as they go by, fed in chunks of any size. Only unfragmented messages are
/// read, which is how a session's server sends each one.
#[derive(Debug, Default)]
pub struct StatusTap {
    /// The current frame's header, while it is incomplete.
    header: Vec<u8>,
    frame: Option<Frame>,
    status: Option<Vec<u8>>,
}

#[derive(Debug)]
struct Frame {
    binary: bool,
    mask: Option<[u8; 4]>,
    length: u64,
    seen: u64,
    /// The payload after its channel byte, when that byte is the error channel.
    kept: Option<Vec<u8>>,
}

impl StatusTap {
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let Some(frame) = &mut self.frame else {
                self.header.push(bytes[0]);
                bytes = &bytes[1..];
                self.frame = frame_header(&self.header);
                if self.frame.is_some() {
                    self.header.clear();
                    self.end_empty_frame();
                }
                continue;
            };
            let take = usize::try_from(frame.length - frame.seen).unwrap_or(usize::MAX).min(bytes.len());
            for &byte in &bytes[..take] {
                let byte = frame.mask.map_or(byte, |mask| byte ^ mask[(frame.seen % 4) as usize]);
                if frame.seen == 0 && frame.binary && byte == channel::ERROR {
                    frame.kept = Some(Vec::new());
                } else if let Some(kept) = frame.kept.as_mut().filter(|kept| kept.len() < STATUS_LIMIT) {
                    kept.push(byte);
                }
                frame.seen += 1;
            }
            bytes = &bytes[take..];
            if frame.seen == frame.length {
                if let Some(kept) = frame.kept.take() {
                    self.status = Some(kept);
                }
                self.frame = None;
            }
        }
    }

    fn end_empty_frame(&mut self) {
        if self.frame.as_ref().is_some_and(|frame| frame.length == 0) {
            self.frame = None;
        }
    }

    /// The Status message, once it went by.
    pub fn status(&self) -> Option<&[u8]> {
        self.status.as_deref()
    }
}

/// The frame `header` starts, once it holds the whole header (RFC 6455, section 5.2).
fn frame_header(header: &[u8]) -> Option<Frame> {
    let [first, second, rest @ ..] = header else { return None };
    let masked = second & 0x80 != 0;
    let (length, extended) = match second & 0x7f {
        126 => (u64::from(u16::from_be_bytes(rest.get(..2)?.try_into().ok()?)), 2),
        127 => (u64::from_be_bytes(rest.get(..8)?.try_into().ok()?), 8),
        short => (u64::from(short), 0),
    };
    let mask = if masked { Some(rest.get(extended..extended + 4)?.try_into().ok()?) } else { None };
    if rest.len() != extended + if masked { 4 } else { 0 } {
        return None;
    }
    Some(Frame { binary: first & 0x0f == 2, mask, length, seen: 0, kept: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(query: &[(&str, &str)]) -> Vec<(String, String)> {
        query.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_query_reads_its_command_in_order_and_its_streams() {
        let query = pairs(&[
            ("command", "sh"),
            ("command", "-c"),
            ("command", "exit 3"),
            ("container", "main"),
            ("stdin", "true"),
            ("stdout", "1"),
        ]);
        let options = Options::from_query(&query).unwrap();
        assert_eq!(options.command, ["sh", "-c", "exit 3"]);
        assert_eq!(
            (options.container.as_str(), options.stdin, options.stdout, options.stderr, options.tty),
            ("main", true, true, false, false)
        );
        let again: Vec<(String, String)> = options.to_query().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        assert_eq!(Options::from_query(&again).unwrap(), options);
        let terminal = Options::from_query(&pairs(&[("stdout", "true"), ("stderr", "true"), ("tty", "true")])).unwrap();
        assert!(terminal.tty && !terminal.stderr, "a terminal has one output");
        assert!(Options::from_query(&pairs(&[("command", "ls")])).unwrap_err().contains("at least one of stdin"));
        assert!(Options::from_query(&pairs(&[("stdin", "maybe")])).unwrap_err().starts_with("stdin: "));
    }

    #[test]
    fn a_status_tells_the_exit_code_or_the_failure() {
        assert_eq!(exit_code(exit_status(0).as_bytes()), Ok(0));
        assert_eq!(exit_code(exit_status(3).as_bytes()), Ok(3));
        assert_eq!(exit_code(failure_status("container main is not running").as_bytes()), Err("container main is not running".into()));
        assert!(exit_code(b"{").unwrap_err().contains("unreadable status"));
    }

    /// A frame as a server sends it (unmasked) or as a client does (masked).
    fn frame(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
        let mut bytes = vec![0x80 | opcode];
        let mask_bit = if mask.is_some() { 0x80 } else { 0 };
        match payload.len() {
            n if n < 126 => bytes.push(mask_bit | n as u8),
            n if n <= 0xffff => {
                bytes.push(mask_bit | 126);
                bytes.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                bytes.push(mask_bit | 127);
                bytes.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        match mask {
            Some(mask) => {
                bytes.extend_from_slice(&mask);
                bytes.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
            }
            None => bytes.extend_from_slice(payload),
        }
        bytes
    }

    #[test]
    fn the_tap_finds_the_status_among_frames_of_any_size_cut_anywhere() {
        let status = exit_status(7);
        let mut stream = Vec::new();
        stream.extend(frame(2, &[channel::STDOUT, b'h', b'i'], None));
        stream.extend(frame(2, &[&[channel::STDOUT][..], &vec![b'x'; 70_000]].concat(), None));
        stream.extend(frame(2, &[&[channel::STDERR][..], &vec![channel::ERROR; 300]].concat(), Some([1, 2, 3, 4])));
        stream.extend(frame(9, b"", None));
        stream.extend(frame(2, &[&[channel::ERROR][..], status.as_bytes()].concat(), Some([9, 8, 7, 6])));
        stream.extend(frame(8, &[3, 232], None));
        for chunk in [1, 7, 4096, stream.len()] {
            let mut tap = StatusTap::default();
            for piece in stream.chunks(chunk) {
                tap.feed(piece);
            }
            assert_eq!(tap.status(), Some(status.as_bytes()), "in chunks of {chunk}");
            assert_eq!(exit_code(tap.status().unwrap()), Ok(7));
        }
        let mut tap = StatusTap::default();
        tap.feed(&frame(1, &[channel::ERROR, b'{', b'}'], None));
        assert_eq!(tap.status(), None, "a text message is not the status");
    }
}
