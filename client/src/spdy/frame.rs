//! SPDY/3.1 frames: their layout on the wire, written by [`FrameWriter`] and read by
//! [`FrameReader`], which takes bytes as they come (a frame may span WebSocket messages, and
//! a message may hold several frames) and never trusts a length it has not received.

use bytes::{Buf, Bytes, BytesMut};

use super::Error;
use super::header_block::{HeaderCompressor, HeaderDecompressor, Headers};

pub const VERSION: u16 = 3;
/// A frame's length field has 24 bits: no frame is longer, so no peer makes us buffer more.
pub const MAX_FRAME_LENGTH: usize = (1 << 24) - 1;
/// A frame's header: a DATA frame's stream id, or a control frame's version and type, then
/// flags and length.
pub const HEADER_LENGTH: usize = 8;
const FLAG_FIN: u8 = 0x01;
const FLAG_UNIDIRECTIONAL: u8 = 0x02;
const STREAM_ID_MASK: u32 = 0x7fff_ffff;

const TYPE_SYN_STREAM: u16 = 1;
const TYPE_SYN_REPLY: u16 = 2;
const TYPE_RST_STREAM: u16 = 3;
const TYPE_SETTINGS: u16 = 4;
const TYPE_PING: u16 = 6;
const TYPE_GOAWAY: u16 = 7;
const TYPE_HEADERS: u16 = 8;
const TYPE_WINDOW_UPDATE: u16 = 9;

/// RST_STREAM's status codes this crate sends.
pub mod reset {
    pub const PROTOCOL_ERROR: u32 = 1;
    pub const REFUSED_STREAM: u32 = 3;
    pub const CANCEL: u32 = 5;
    pub const STREAM_IN_USE: u32 = 8;
}

/// GOAWAY's status codes.
pub mod go_away {
    pub const OK: u32 = 0;
    pub const PROTOCOL_ERROR: u32 = 1;
}

/// One SETTINGS entry: its flags, 24-bit id and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub flags: u8,
    pub id: u32,
    pub value: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    SynStream { stream_id: u32, associated_to: u32, priority: u8, fin: bool, unidirectional: bool, headers: Headers },
    SynReply { stream_id: u32, fin: bool, headers: Headers },
    RstStream { stream_id: u32, status: u32 },
    Settings { clear: bool, entries: Vec<Setting> },
    Ping { id: u32 },
    GoAway { last_good_stream_id: u32, status: u32 },
    Headers { stream_id: u32, fin: bool, headers: Headers },
    WindowUpdate { stream_id: u32, delta: u32 },
    Data { stream_id: u32, fin: bool, data: Bytes },
}

/// Encodes one direction's frames; it owns that direction's header compression.
#[derive(Default)]
pub struct FrameWriter {
    headers: HeaderCompressor,
}

impl FrameWriter {
    /// The bytes of `frame`. A DATA frame longer than [`MAX_FRAME_LENGTH`] is the caller's bug.
    pub fn encode(&mut self, frame: &Frame) -> Vec<u8> {
        match frame {
            Frame::Data { stream_id, fin, data } => {
                assert!(data.len() <= MAX_FRAME_LENGTH, "a DATA frame of {} bytes", data.len());
                let mut out = Vec::with_capacity(HEADER_LENGTH + data.len());
                out.extend_from_slice(&data_header(*stream_id, *fin, data.len()));
                out.extend_from_slice(data);
                out
            }
            Frame::SynStream { stream_id, associated_to, priority, fin, unidirectional, headers } => {
                let mut payload = Vec::new();
                payload.extend_from_slice(&(stream_id & STREAM_ID_MASK).to_be_bytes());
                payload.extend_from_slice(&(associated_to & STREAM_ID_MASK).to_be_bytes());
                payload.extend_from_slice(&[(priority & 0x07) << 5, 0]);
                payload.extend_from_slice(&self.headers.compress(headers));
                control(TYPE_SYN_STREAM, flag(*fin, FLAG_FIN) | flag(*unidirectional, FLAG_UNIDIRECTIONAL), &payload)
            }
            Frame::SynReply { stream_id, fin, headers } => {
                let mut payload = (stream_id & STREAM_ID_MASK).to_be_bytes().to_vec();
                payload.extend_from_slice(&self.headers.compress(headers));
                control(TYPE_SYN_REPLY, flag(*fin, FLAG_FIN), &payload)
            }
            Frame::Headers { stream_id, fin, headers } => {
                let mut payload = (stream_id & STREAM_ID_MASK).to_be_bytes().to_vec();
                payload.extend_from_slice(&self.headers.compress(headers));
                control(TYPE_HEADERS, flag(*fin, FLAG_FIN), &payload)
            }
            Frame::RstStream { stream_id, status } => control(TYPE_RST_STREAM, 0, &two_words(stream_id & STREAM_ID_MASK, *status)),
            Frame::Settings { clear, entries } => {
                let mut payload = (entries.len() as u32).to_be_bytes().to_vec();
                for entry in entries {
                    payload.push(entry.flags);
                    payload.extend_from_slice(&entry.id.to_be_bytes()[1..]);
                    payload.extend_from_slice(&entry.value.to_be_bytes());
                }
                control(TYPE_SETTINGS, flag(*clear, 0x01), &payload)
            }
            Frame::Ping { id } => control(TYPE_PING, 0, &id.to_be_bytes()),
            Frame::GoAway { last_good_stream_id, status } => {
                control(TYPE_GOAWAY, 0, &two_words(last_good_stream_id & STREAM_ID_MASK, *status))
            }
            Frame::WindowUpdate { stream_id, delta } => {
                control(TYPE_WINDOW_UPDATE, 0, &two_words(stream_id & STREAM_ID_MASK, delta & STREAM_ID_MASK))
            }
        }
    }
}

fn flag(set: bool, bit: u8) -> u8 {
    if set { bit } else { 0 }
}

/// The header of a DATA frame of `length` bytes, for a writer that puts the payload
/// behind it itself.
pub fn data_header(stream_id: u32, fin: bool, length: usize) -> [u8; HEADER_LENGTH] {
    two_words(stream_id & STREAM_ID_MASK, u32::from_be_bytes(length_word(flag(fin, FLAG_FIN), length)))
}

fn length_word(flags: u8, length: usize) -> [u8; 4] {
    ((u32::from(flags) << 24) | length as u32).to_be_bytes()
}

fn two_words(first: u32, second: u32) -> [u8; 8] {
    let mut out = [0; 8];
    out[..4].copy_from_slice(&first.to_be_bytes());
    out[4..].copy_from_slice(&second.to_be_bytes());
    out
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LENGTH + payload.len());
    out.extend_from_slice(&(0x8000 | VERSION).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&length_word(flags, payload.len()));
    out.extend_from_slice(payload);
    out
}

/// Decodes the other direction's frames from bytes pushed as they arrive.
#[derive(Default)]
pub struct FrameReader {
    buffer: BytesMut,
    headers: HeaderDecompressor,
}

impl FrameReader {
    /// Adds received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// Whether received bytes wait for the rest of their frame.
    pub fn has_partial_frame(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// The next whole frame, `None` until its last byte has arrived. Control frames of a
    /// type SPDY/3.1 does not know are skipped, as the draft says; anything malformed is an
    /// error after which the connection cannot be read on.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, Error> {
        loop {
            if self.buffer.len() < HEADER_LENGTH {
                return Ok(None);
            }
            let length = u32::from_be_bytes([0, self.buffer[5], self.buffer[6], self.buffer[7]]) as usize;
            if self.buffer.len() < HEADER_LENGTH + length {
                return Ok(None);
            }
            let mut frame = self.buffer.split_to(HEADER_LENGTH + length).freeze();
            let first = frame.get_u32();
            let flags = frame.get_u8();
            frame.advance(3);
            if first & 0x8000_0000 == 0 {
                return Ok(Some(Frame::Data { stream_id: first & STREAM_ID_MASK, fin: flags & FLAG_FIN != 0, data: frame }));
            }
            let version = ((first >> 16) & 0x7fff) as u16;
            if version != VERSION {
                return Err(Error::Version(version));
            }
            if let Some(frame) = self.control((first & 0xffff) as u16, flags, frame)? {
                return Ok(Some(frame));
            }
        }
    }

    fn control(&mut self, kind: u16, flags: u8, mut payload: Bytes) -> Result<Option<Frame>, Error> {
        let fin = flags & FLAG_FIN != 0;
        let length = payload.len();
        let malformed = |kind: &'static str, reason: &str| Error::Malformed { kind, length, reason: reason.into() };
        let frame = match kind {
            TYPE_SYN_STREAM => {
                if payload.len() < 10 {
                    return Err(malformed("SYN_STREAM", "shorter than its fixed fields"));
                }
                let stream_id = payload.get_u32() & STREAM_ID_MASK;
                let associated_to = payload.get_u32() & STREAM_ID_MASK;
                let priority = payload.get_u8() >> 5;
                payload.advance(1);
                let headers = self.headers.decompress(&payload)?;
                Frame::SynStream { stream_id, associated_to, priority, fin, unidirectional: flags & FLAG_UNIDIRECTIONAL != 0, headers }
            }
            TYPE_SYN_REPLY | TYPE_HEADERS => {
                if payload.len() < 4 {
                    return Err(malformed(if kind == TYPE_SYN_REPLY { "SYN_REPLY" } else { "HEADERS" }, "shorter than a stream id"));
                }
                let stream_id = payload.get_u32() & STREAM_ID_MASK;
                let headers = self.headers.decompress(&payload)?;
                if kind == TYPE_SYN_REPLY {
                    Frame::SynReply { stream_id, fin, headers }
                } else {
                    Frame::Headers { stream_id, fin, headers }
                }
            }
            TYPE_RST_STREAM => {
                let [stream_id, status] = words(&payload).ok_or_else(|| malformed("RST_STREAM", "not 8 bytes"))?;
                Frame::RstStream { stream_id: stream_id & STREAM_ID_MASK, status }
            }
            TYPE_SETTINGS => {
                if payload.len() < 4 {
                    return Err(malformed("SETTINGS", "shorter than its count"));
                }
                let count = payload.get_u32() as usize;
                if payload.len() != count.saturating_mul(8) {
                    return Err(malformed("SETTINGS", "its count does not match its length"));
                }
                let entries = (0..count)
                    .map(|_| {
                        let word = payload.get_u32();
                        Setting { flags: (word >> 24) as u8, id: word & 0x00ff_ffff, value: payload.get_u32() }
                    })
                    .collect();
                Frame::Settings { clear: flags & 0x01 != 0, entries }
            }
            TYPE_PING => {
                let id: [u8; 4] = payload.as_ref().try_into().map_err(|_| malformed("PING", "not 4 bytes"))?;
                Frame::Ping { id: u32::from_be_bytes(id) }
            }
            TYPE_GOAWAY => {
                let [last, status] = words(&payload).ok_or_else(|| malformed("GOAWAY", "not 8 bytes"))?;
                Frame::GoAway { last_good_stream_id: last & STREAM_ID_MASK, status }
            }
            TYPE_WINDOW_UPDATE => {
                let [stream_id, delta] = words(&payload).ok_or_else(|| malformed("WINDOW_UPDATE", "not 8 bytes"))?;
                Frame::WindowUpdate { stream_id: stream_id & STREAM_ID_MASK, delta: delta & STREAM_ID_MASK }
            }
            _ => return Ok(None),
        };
        Ok(Some(frame))
    }
}

fn words(payload: &[u8]) -> Option<[u32; 2]> {
    let bytes: &[u8; 8] = payload.try_into().ok()?;
    Some([u32::from_be_bytes(bytes[..4].try_into().ok()?), u32::from_be_bytes(bytes[4..].try_into().ok()?)])
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn every_kind() -> Vec<Frame> {
        let headers = vec![("streamtype".to_string(), "data".to_string()), ("port".to_string(), "80".to_string())];
        vec![
            Frame::SynStream { stream_id: 1, associated_to: 0, priority: 0, fin: false, unidirectional: false, headers: headers.clone() },
            Frame::SynReply { stream_id: 1, fin: false, headers: vec![] },
            Frame::Data { stream_id: 1, fin: false, data: Bytes::from_static(b"GET / HTTP/1.0\r\n\r\n") },
            Frame::Data { stream_id: 1, fin: true, data: Bytes::new() },
            Frame::Headers { stream_id: 3, fin: true, headers },
            Frame::RstStream { stream_id: 1, status: reset::CANCEL },
            Frame::Settings { clear: false, entries: vec![Setting { flags: 0, id: 7, value: 65536 }] },
            Frame::Ping { id: 1 },
            Frame::GoAway { last_good_stream_id: 5, status: go_away::OK },
            Frame::WindowUpdate { stream_id: 1, delta: 4096 },
        ]
    }

    #[test]
    fn every_kind_of_frame_round_trips_whole_and_byte_by_byte() {
        let mut writer = FrameWriter::default();
        let wire: Vec<u8> = every_kind().iter().flat_map(|f| writer.encode(f)).collect();
        let mut whole = FrameReader::default();
        whole.push(&wire);
        let mut read = Vec::new();
        while let Some(frame) = whole.next_frame().unwrap() {
            read.push(frame);
        }
        assert_eq!(read, every_kind());

        let mut trickle = FrameReader::default();
        let mut read = Vec::new();
        for byte in &wire {
            trickle.push(&[*byte]);
            while let Some(frame) = trickle.next_frame().unwrap() {
                read.push(frame);
            }
        }
        assert_eq!(read, every_kind());
        assert!(!trickle.has_partial_frame());
    }

    #[test]
    fn the_layout_is_spdy3s() {
        let mut writer = FrameWriter::default();
        assert_eq!(writer.encode(&Frame::Ping { id: 7 }), [0x80, 0x03, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 7]);
        let data = writer.encode(&Frame::Data { stream_id: 3, fin: true, data: Bytes::from_static(b"hi") });
        assert_eq!(data, [0, 0, 0, 3, 0x01, 0, 0, 2, b'h', b'i']);
        let rst = writer.encode(&Frame::RstStream { stream_id: 5, status: reset::CANCEL });
        assert_eq!(rst, [0x80, 0x03, 0x00, 0x03, 0, 0, 0, 8, 0, 0, 0, 5, 0, 0, 0, 5]);
    }

    #[test]
    fn a_huge_length_waits_for_its_bytes_without_reserving_them() {
        let mut reader = FrameReader::default();
        reader.push(&[0, 0, 0, 1, 0, 0xff, 0xff, 0xff, b'x']);
        assert_eq!(reader.next_frame().unwrap(), None);
        assert!(reader.buffer.capacity() < 1024, "{}", reader.buffer.capacity());
    }

    #[test]
    fn malformed_frames_are_clear_errors() {
        let cases: &[(&[u8], &str)] = &[
            (&[0x80, 0x02, 0x00, 0x06, 0, 0, 0, 4, 0, 0, 0, 1], "unsupported SPDY version 2"),
            (&[0x80, 0x03, 0x00, 0x06, 0, 0, 0, 2, 0, 1], "PING frame of 2 bytes is malformed"),
            (&[0x80, 0x03, 0x00, 0x03, 0, 0, 0, 4, 0, 0, 0, 1], "RST_STREAM frame of 4 bytes"),
            (&[0x80, 0x03, 0x00, 0x04, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff], "its count does not match"),
            (&[0x80, 0x03, 0x00, 0x01, 0, 0, 0, 2, 0, 1], "SYN_STREAM frame of 2 bytes"),
            (&[0x80, 0x03, 0x00, 0x01, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xde, 0xad], "zlib"),
        ];
        for (bytes, expected) in cases {
            let mut reader = FrameReader::default();
            reader.push(bytes);
            let error = reader.next_frame().unwrap_err().to_string();
            assert!(error.contains(expected), "{bytes:?}: {error}");
        }
    }

    #[test]
    fn unknown_control_frames_are_skipped() {
        let mut reader = FrameReader::default();
        reader.push(&[0x80, 0x03, 0x00, 0x05, 0, 0, 0, 0]);
        reader.push(&FrameWriter::default().encode(&Frame::Ping { id: 2 }));
        assert_eq!(reader.next_frame().unwrap(), Some(Frame::Ping { id: 2 }));
    }

    proptest! {
        /// Hostile bytes: the reader answers frames or an error, never a panic, and holds at
        /// most what it was given.
        #[test]
        fn arbitrary_bytes_never_panic(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..16)) {
            let mut reader = FrameReader::default();
            let mut given = 0;
            'chunks: for chunk in chunks {
                given += chunk.len();
                reader.push(&chunk);
                loop {
                    match reader.next_frame() {
                        Ok(Some(_)) => {}
                        Ok(None) => break,
                        Err(_) => break 'chunks,
                    }
                }
                prop_assert!(reader.buffer.len() <= given);
            }
        }

        /// Valid frames with a hostile tail still come out first.
        #[test]
        fn valid_frames_before_garbage_are_read(garbage in prop::collection::vec(any::<u8>(), 0..128), id in any::<u32>()) {
            let mut writer = FrameWriter::default();
            let mut reader = FrameReader::default();
            reader.push(&writer.encode(&Frame::Ping { id }));
            reader.push(&garbage);
            prop_assert_eq!(reader.next_frame().unwrap(), Some(Frame::Ping { id }));
        }
    }
}
