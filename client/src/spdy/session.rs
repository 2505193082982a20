//! A SPDY/3.1 connection over binary messages, as Kubernetes' streaming protocols use it:
//! many streams, each a pair of byte pipes that end apart (FIN) or together (RST_STREAM).
//!
//! One task reads frames and hands each stream its bytes; another writes the frames every
//! stream queues, so a stream that waits to write never keeps another from reading. As the
//! `spdystream` library kubectl and the kubelet use, it keeps no flow-control windows: a
//! stream whose reader is slow slows the connection's reading, and WebSocket and TCP below
//! carry that back to the sender.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use futures::{Sink, SinkExt, Stream as FutureStream, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Error;
use super::frame::{Frame, FrameReader, FrameWriter, HEADER_LENGTH, data_header, go_away, reset};
use super::header_block::Headers;

/// The most streams one connection holds open: beyond it a new one is refused.
pub const MAX_STREAMS: usize = 1024;
/// The most bytes a DATA frame written by this side carries.
const DATA_CHUNK: usize = 32 * 1024;
/// Chunks of a stream read from the connection and not yet taken by its reader.
const INBOUND_CHUNKS: usize = 16;
/// Frames queued by the streams and not yet written.
const OUTGOING_FRAMES: usize = 64;
/// How many DATA frames [`StreamWriter::send_from`]'s buffer holds.
const SEND_BUFFER_FRAMES: usize = 4;

/// Which end of the connection this is: it decides the parity of the streams it opens and
/// of the pings it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl Role {
    /// The first id of a stream this end opens: odd for a client, even for a server.
    fn first_stream_id(self) -> u32 {
        match self {
            Role::Client => 1,
            Role::Server => 2,
        }
    }

    /// Whether the peer of this end may open the stream `id`.
    fn peer_may_open(self, id: u32) -> bool {
        id % 2 != self.first_stream_id() % 2
    }
}

/// Why a stream could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("the stream was reset")]
    Reset,
    #[error("the stream's writing side is already finished")]
    Finished,
    #[error("the connection is closed")]
    ConnectionClosed,
}

/// What the reader keeps of one open stream.
struct Slot {
    /// Where its bytes go; `None` once the peer finished it.
    inbound: Option<mpsc::Sender<Bytes>>,
    /// Told when the peer's SYN_REPLY comes, for a stream this end opened.
    replied: Option<oneshot::Sender<()>>,
    reset: CancellationToken,
    local_finished: bool,
}

struct Shared {
    role: Role,
    outgoing: mpsc::Sender<Outgoing>,
    streams: Mutex<HashMap<u32, Slot>>,
    next_stream_id: AtomicU32,
    /// Cancelled when the connection ends, for whatever reason.
    closed: CancellationToken,
}

impl Shared {
    fn streams(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Slot>> {
        self.streams.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn send(&self, frame: Frame) -> Result<(), StreamError> {
        self.send_outgoing(Outgoing::Frame(frame)).await
    }

    async fn send_outgoing(&self, outgoing: Outgoing) -> Result<(), StreamError> {
        if self.closed.is_cancelled() {
            return Err(StreamError::ConnectionClosed);
        }
        self.outgoing.send(outgoing).await.map_err(|_| StreamError::ConnectionClosed)
    }

    /// Forgets a stream both ends have finished, or one that was reset.
    fn forget(&self, id: u32) {
        if let Some(slot) = self.streams().remove(&id) {
            slot.reset.cancel();
        }
    }
}

/// What the connection's writer sends: a frame to encode, or a DATA frame a stream wrote
/// whole in its own buffer ([`StreamWriter::send_from`]).
enum Outgoing {
    Frame(Frame),
    Encoded(Bytes),
}

/// One end of a SPDY connection. Clones share it.
#[derive(Clone)]
pub struct Session {
    shared: Arc<Shared>,
}

/// The connection's tasks: the reader's, whose result says why the connection ended.
pub struct Connection {
    pub reader: JoinHandle<Result<(), Error>>,
    pub writer: JoinHandle<()>,
}

/// Starts a SPDY connection over `incoming` and `outgoing` binary messages (an error of
/// `incoming` ends it). Returns the session, the streams the peer opens, and the tasks.
pub fn start<I, O, E>(incoming: I, outgoing: O, role: Role) -> (Session, mpsc::Receiver<Stream>, Connection)
where
    I: FutureStream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    O: Sink<Bytes> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let (frames_tx, frames_rx) = mpsc::channel(OUTGOING_FRAMES);
    let shared = Arc::new(Shared {
        role,
        outgoing: frames_tx,
        streams: Mutex::new(HashMap::new()),
        next_stream_id: AtomicU32::new(role.first_stream_id()),
        closed: CancellationToken::new(),
    });
    let (accepted_tx, accepted_rx) = mpsc::channel(16);
    let writer = tokio::spawn(write_frames(frames_rx, outgoing, shared.closed.clone()));
    let reader = tokio::spawn(read_frames(incoming, shared.clone(), accepted_tx));
    (Session { shared }, accepted_rx, Connection { reader, writer })
}

impl Session {
    /// Opens a stream with `headers` and waits for the peer's reply.
    pub async fn open(&self, headers: Headers) -> Result<Stream, StreamError> {
        let id = self.shared.next_stream_id.fetch_add(2, Ordering::Relaxed);
        let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_CHUNKS);
        let (replied_tx, replied_rx) = oneshot::channel();
        let reset = CancellationToken::new();
        {
            let mut streams = self.shared.streams();
            if self.shared.closed.is_cancelled() {
                return Err(StreamError::ConnectionClosed);
            }
            let slot = Slot { inbound: Some(inbound_tx), replied: Some(replied_tx), reset: reset.clone(), local_finished: false };
            streams.insert(id, slot);
        }
        let frame =
            Frame::SynStream { stream_id: id, associated_to: 0, priority: 0, fin: false, unidirectional: false, headers: headers.clone() };
        let replied = async {
            self.shared.send(frame).await?;
            tokio::select! {
                answer = replied_rx => answer.map_err(|_| StreamError::Reset),
                _ = reset.cancelled() => Err(StreamError::Reset),
            }
        };
        if let Err(e) = replied.await {
            self.shared.forget(id);
            return Err(e);
        }
        Ok(Stream {
            headers,
            reader: StreamReader { inbound: inbound_rx },
            writer: StreamWriter { id, shared: self.shared.clone(), reset },
        })
    }

    /// Tells the peer this end is going away, and ends the connection.
    pub async fn close(&self) {
        let _ = self.shared.send(Frame::GoAway { last_good_stream_id: 0, status: go_away::OK }).await;
        self.shared.closed.cancel();
    }

    /// Waits until the connection has ended.
    pub async fn closed(&self) {
        self.shared.closed.cancelled().await
    }
}

/// One stream: the headers it was opened with, and its two directions.
pub struct Stream {
    pub headers: Headers,
    pub reader: StreamReader,
    pub writer: StreamWriter,
}

/// The bytes the peer sends on a stream.
pub struct StreamReader {
    inbound: mpsc::Receiver<Bytes>,
}

impl StreamReader {
    /// The next bytes; `None` once the peer finished the stream, or it was reset, or the
    /// connection ended.
    pub async fn read(&mut self) -> Option<Bytes> {
        self.inbound.recv().await
    }

    /// Everything up to the end of the stream.
    pub async fn read_to_end(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        while let Some(bytes) = self.read().await {
            all.extend_from_slice(&bytes);
        }
        all
    }
}

/// Writes on a stream, finishes or resets it. Clones write on the same stream.
#[derive(Clone)]
pub struct StreamWriter {
    id: u32,
    shared: Arc<Shared>,
    reset: CancellationToken,
}

impl StreamWriter {
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Accepts a stream the peer opened.
    pub async fn reply(&self) -> Result<(), StreamError> {
        self.shared.send(Frame::SynReply { stream_id: self.id, fin: false, headers: Headers::new() }).await
    }

    pub async fn write(&self, mut data: Bytes) -> Result<(), StreamError> {
        while !data.is_empty() {
            self.usable()?;
            let chunk = data.split_to(data.len().min(DATA_CHUNK));
            self.shared.send(Frame::Data { stream_id: self.id, fin: false, data: chunk }).await?;
        }
        Ok(())
    }

    /// Sends what `source` reads until it ends (or fails to read), then finishes the stream;
    /// `false` when the stream broke first, unfinished.
    pub async fn send_from(&self, mut source: impl AsyncRead + Unpin) -> bool {
        // Each frame is read into one buffer behind room for its header, which is then
        // written in place: one copy per chunk. The buffer holds a few frames; once those
        // are written out, its memory is taken again rather than fresh memory per chunk.
        const FRAME: usize = HEADER_LENGTH + DATA_CHUNK;
        let mut buffer = BytesMut::new();
        loop {
            if buffer.capacity() < FRAME {
                buffer.reserve(SEND_BUFFER_FRAMES * FRAME);
            }
            buffer.put_bytes(0, HEADER_LENGTH);
            match source.read_buf(&mut (&mut buffer).limit(DATA_CHUNK)).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buffer[..HEADER_LENGTH].copy_from_slice(&data_header(self.id, false, n));
                    let frame = buffer.split().freeze();
                    if self.usable().is_err() || self.shared.send_outgoing(Outgoing::Encoded(frame)).await.is_err() {
                        return false;
                    }
                }
            }
        }
        let _ = self.finish().await;
        true
    }

    /// Ends this end's writing; the peer's may go on.
    pub async fn finish(&self) -> Result<(), StreamError> {
        self.usable()?;
        let forget = {
            let mut streams = self.shared.streams();
            match streams.get_mut(&self.id) {
                Some(slot) => {
                    slot.local_finished = true;
                    slot.inbound.is_none()
                }
                None => false,
            }
        };
        self.shared.send(Frame::Data { stream_id: self.id, fin: true, data: Bytes::new() }).await?;
        if forget {
            self.shared.streams().remove(&self.id);
        }
        Ok(())
    }

    /// Ends both directions at once, dropping what is unread.
    pub async fn reset(&self) {
        if self.reset.is_cancelled() {
            return;
        }
        self.shared.forget(self.id);
        let _ = self.shared.send(Frame::RstStream { stream_id: self.id, status: reset::CANCEL }).await;
    }

    /// Waits until the stream is reset, by either end, or the connection ends.
    pub async fn was_reset(&self) {
        self.reset.cancelled().await
    }

    fn usable(&self) -> Result<(), StreamError> {
        if self.shared.closed.is_cancelled() {
            return Err(StreamError::ConnectionClosed);
        }
        if self.reset.is_cancelled() {
            return Err(StreamError::Reset);
        }
        match self.shared.streams().get(&self.id) {
            Some(slot) if slot.local_finished => Err(StreamError::Finished),
            Some(_) => Ok(()),
            // Both ends finished it.
            None => Err(StreamError::Finished),
        }
    }
}

async fn write_frames<O: Sink<Bytes> + Unpin>(mut frames: mpsc::Receiver<Outgoing>, mut outgoing: O, closed: CancellationToken) {
    let mut writer = FrameWriter::default();
    let mut encode = |frame: Outgoing| match frame {
        Outgoing::Frame(frame) => Bytes::from(writer.encode(&frame)),
        Outgoing::Encoded(bytes) => bytes,
    };
    loop {
        let frame = tokio::select! {
            biased;
            frame = frames.recv() => frame,
            _ = closed.cancelled() => None,
        };
        let Some(frame) = frame else { break };
        if outgoing.send(encode(frame)).await.is_err() {
            closed.cancel();
            return;
        }
    }
    // What was queued before the end (a GOAWAY that says why) still goes out.
    while let Ok(frame) = frames.try_recv() {
        if outgoing.send(encode(frame)).await.is_err() {
            break;
        }
    }
    let _ = outgoing.close().await;
}

async fn read_frames<I, E>(mut incoming: I, shared: Arc<Shared>, accepted: mpsc::Sender<Stream>) -> Result<(), Error>
where
    I: FutureStream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display + Send + 'static,
{
    let mut reader = FrameReader::default();
    let mut last_peer_stream = 0;
    let result = async {
        loop {
            let message = tokio::select! {
                message = incoming.next() => message,
                _ = shared.closed.cancelled() => return Ok(()),
            };
            let bytes = match message {
                Some(Ok(bytes)) => bytes,
                Some(Err(e)) => return Err(Error::Transport(e.to_string())),
                None if reader.has_partial_frame() => return Err(Error::Transport("the connection ended inside a frame".into())),
                None => return Ok(()),
            };
            reader.push(&bytes);
            while let Some(frame) = reader.next_frame()? {
                handle(frame, &shared, &accepted, &mut last_peer_stream).await?;
            }
        }
    }
    .await;
    if let Err(e) = &result {
        let status = go_away::PROTOCOL_ERROR;
        let _ = shared.outgoing.try_send(Outgoing::Frame(Frame::GoAway { last_good_stream_id: last_peer_stream, status }));
        tracing::debug!(error = %e, "SPDY connection ended");
    }
    shared.closed.cancel();
    for (_, slot) in shared.streams().drain() {
        slot.reset.cancel();
    }
    result
}

async fn handle(frame: Frame, shared: &Arc<Shared>, accepted: &mpsc::Sender<Stream>, last_peer_stream: &mut u32) -> Result<(), Error> {
    match frame {
        Frame::SynStream { stream_id, fin, headers, .. } => {
            if !shared.role.peer_may_open(stream_id) || stream_id <= *last_peer_stream {
                return Err(Error::Protocol(format!("the peer opened stream {stream_id}, which it may not open now")));
            }
            *last_peer_stream = stream_id;
            let refuse = |status| shared.outgoing.send(Outgoing::Frame(Frame::RstStream { stream_id, status }));
            let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_CHUNKS);
            let reset = CancellationToken::new();
            let refusal = {
                let mut streams = shared.streams();
                if streams.contains_key(&stream_id) {
                    Some(reset::STREAM_IN_USE)
                } else if streams.len() >= MAX_STREAMS {
                    Some(reset::REFUSED_STREAM)
                } else {
                    let inbound = (!fin).then_some(inbound_tx);
                    streams.insert(stream_id, Slot { inbound, replied: None, reset: reset.clone(), local_finished: false });
                    None
                }
            };
            if let Some(status) = refusal {
                let _ = refuse(status).await;
                return Ok(());
            }
            let stream = Stream {
                headers,
                reader: StreamReader { inbound: inbound_rx },
                writer: StreamWriter { id: stream_id, shared: shared.clone(), reset },
            };
            if accepted.send(stream).await.is_err() {
                shared.forget(stream_id);
                let _ = refuse(reset::REFUSED_STREAM).await;
            }
        }
        Frame::SynReply { stream_id, fin, .. } => {
            if let Some(replied) = shared.streams().get_mut(&stream_id).and_then(|slot| slot.replied.take()) {
                let _ = replied.send(());
            }
            if fin {
                remote_finished(shared, stream_id);
            }
        }
        Frame::Data { stream_id, fin, data } => {
            let inbound = shared.streams().get(&stream_id).and_then(|slot| slot.inbound.clone());
            // Bytes for a stream that is gone, or that its reader dropped, go nowhere.
            if let Some(inbound) = inbound
                && !data.is_empty()
            {
                let _ = inbound.send(data).await;
            }
            if fin {
                remote_finished(shared, stream_id);
            }
        }
        Frame::Headers { stream_id, fin: true, .. } => remote_finished(shared, stream_id),
        Frame::RstStream { stream_id, .. } => shared.forget(stream_id),
        Frame::Ping { id } => {
            // A ping of the peer's parity is answered with itself; this end sends none.
            if id % 2 != shared.role.first_stream_id() % 2 {
                let _ = shared.outgoing.send(Outgoing::Frame(Frame::Ping { id })).await;
            }
        }
        Frame::Headers { .. } | Frame::Settings { .. } | Frame::WindowUpdate { .. } | Frame::GoAway { .. } => {}
    }
    Ok(())
}

/// The peer finished writing on `stream_id`: its reader sees the end.
fn remote_finished(shared: &Shared, stream_id: u32) {
    let mut streams = shared.streams();
    let Some(slot) = streams.get_mut(&stream_id) else { return };
    slot.inbound = None;
    if slot.local_finished {
        streams.remove(&stream_id);
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use futures::channel::mpsc as futures_mpsc;

    use super::*;
    use crate::spdy::header_block::header;

    /// Two sessions joined by in-memory pipes, as a client and a server.
    fn pair() -> ((Session, Connection), (Session, mpsc::Receiver<Stream>, Connection)) {
        let (to_server, from_client) = futures_mpsc::unbounded::<Bytes>();
        let (to_client, from_server) = futures_mpsc::unbounded::<Bytes>();
        let (client, _, client_connection) = start(from_server.map(Ok::<_, Infallible>), to_server.sink_map_err(|_| ()), Role::Client);
        let (server, accepted, server_connection) =
            start(from_client.map(Ok::<_, Infallible>), to_client.sink_map_err(|_| ()), Role::Server);
        ((client, client_connection), (server, accepted, server_connection))
    }

    fn named(value: &str) -> Headers {
        vec![("name".to_string(), value.to_string())]
    }

    #[tokio::test]
    async fn streams_carry_bytes_both_ways_and_end_apart() {
        let ((client, _c), (_server, mut accepted, _s)) = pair();
        let opening = tokio::spawn({
            let client = client.clone();
            async move { client.open(named("one")).await }
        });
        let mut served = accepted.recv().await.unwrap();
        assert_eq!(header(&served.headers, "name"), Some("one"));
        served.writer.reply().await.unwrap();
        let mut opened = opening.await.unwrap().unwrap();

        opened.writer.write(Bytes::from(vec![7u8; 100_000])).await.unwrap();
        opened.writer.finish().await.unwrap();
        assert_eq!(served.reader.read_to_end().await, vec![7u8; 100_000]);
        assert_eq!(opened.writer.write(Bytes::from_static(b"late")).await, Err(StreamError::Finished));

        served.writer.write(Bytes::from_static(b"answer")).await.unwrap();
        served.writer.finish().await.unwrap();
        assert_eq!(opened.reader.read_to_end().await, b"answer");
    }

    #[tokio::test]
    async fn a_reset_ends_only_its_stream() {
        let ((client, _c), (_server, mut accepted, _s)) = pair();
        let server = tokio::spawn(async move {
            let mut streams = Vec::new();
            for _ in 0..2 {
                let stream = accepted.recv().await.unwrap();
                stream.writer.reply().await.unwrap();
                streams.push(stream);
            }
            streams
        });
        let mut first = client.open(named("first")).await.unwrap();
        let second = client.open(named("second")).await.unwrap();
        let mut served = server.await.unwrap();
        assert_eq!((first.writer.id(), second.writer.id()), (1, 3), "a client's streams are odd");

        second.writer.reset().await;
        served[1].writer.was_reset().await;
        assert_eq!(served[1].reader.read().await, None);
        assert_eq!(served[1].writer.write(Bytes::from_static(b"x")).await, Err(StreamError::Reset));

        served[0].writer.write(Bytes::from_static(b"still here")).await.unwrap();
        assert_eq!(first.reader.read().await.unwrap(), "still here");
    }

    #[tokio::test]
    async fn a_ping_of_the_peer_is_echoed_and_a_protocol_error_ends_the_connection() {
        let (to_server, from_client) = futures_mpsc::unbounded::<Bytes>();
        let (to_client, mut from_server) = futures_mpsc::unbounded::<Bytes>();
        let (server, _accepted, connection) = start(from_client.map(Ok::<_, Infallible>), to_client.sink_map_err(|_| ()), Role::Server);
        let mut writer = FrameWriter::default();
        let mut reader = FrameReader::default();
        to_server.unbounded_send(Bytes::from(writer.encode(&Frame::Ping { id: 1 }))).unwrap();
        reader.push(&from_server.next().await.unwrap());
        assert_eq!(reader.next_frame().unwrap(), Some(Frame::Ping { id: 1 }));

        // A client may not open an even stream.
        let frame = Frame::SynStream { stream_id: 2, associated_to: 0, priority: 0, fin: false, unidirectional: false, headers: vec![] };
        to_server.unbounded_send(Bytes::from(writer.encode(&frame))).unwrap();
        let error = connection.reader.await.unwrap().unwrap_err().to_string();
        assert!(error.contains("opened stream 2"), "{error}");
        tokio::time::timeout(Duration::from_secs(5), server.closed()).await.unwrap();
        reader.push(&from_server.next().await.unwrap());
        assert_eq!(reader.next_frame().unwrap(), Some(Frame::GoAway { last_good_stream_id: 0, status: go_away::PROTOCOL_ERROR }));
    }

    /// `send_from` reads each chunk once, into one buffer behind its frame's header: the
    /// frames lie one after another in it, and carry the source whole, then FIN.
    #[tokio::test]
    async fn a_stream_sent_from_a_source_is_framed_in_one_buffer() {
        let (to_server, from_client) = futures_mpsc::unbounded::<Bytes>();
        let (to_client, mut from_server) = futures_mpsc::unbounded::<Bytes>();
        let (_server, mut accepted, _connection) =
            start(from_client.map(Ok::<_, Infallible>), to_client.sink_map_err(|_| ()), Role::Server);
        let frame = Frame::SynStream { stream_id: 1, associated_to: 0, priority: 0, fin: false, unidirectional: false, headers: vec![] };
        to_server.unbounded_send(Bytes::from(FrameWriter::default().encode(&frame))).unwrap();
        let stream = accepted.recv().await.unwrap();
        let source: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        assert!(stream.writer.send_from(&source[..]).await);

        let mut messages = Vec::new();
        let mut reader = FrameReader::default();
        let mut received = Vec::new();
        loop {
            let message = from_server.next().await.unwrap();
            reader.push(&message);
            messages.push(message);
            match reader.next_frame().unwrap() {
                Some(Frame::Data { stream_id: 1, fin: false, data }) => received.extend_from_slice(&data),
                Some(Frame::Data { stream_id: 1, fin: true, data }) if data.is_empty() => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(received, source);
        let lengths: Vec<usize> = messages.iter().map(Bytes::len).collect();
        assert_eq!(lengths, [HEADER_LENGTH + DATA_CHUNK, HEADER_LENGTH + DATA_CHUNK, HEADER_LENGTH + DATA_CHUNK, HEADER_LENGTH + 1696, 8]);
        let after_first = messages[0].as_ptr().wrapping_add(messages[0].len());
        assert_eq!(messages[1].as_ptr(), after_first, "the second frame follows the first in one buffer");
    }
}
