//! The client side of port-forward, as kubectl's: one WebSocket carrying SPDY/3.1
//! (`shared::api::port_forward`), and per forwarded connection a pair of streams sharing a
//! request id: the error stream, which this side finishes at once and reads to its end, and
//! the data stream, which carries the connection's bytes both ways.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures::{SinkExt, StreamExt, future};
use shared::api::port_forward::{PORT_HEADER, REQUEST_ID_HEADER, STREAM_DATA, STREAM_ERROR, STREAM_TYPE_HEADER};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use crate::spdy::{self, Headers, Role, Session, Stream, StreamError, StreamReader};

/// Why one forwarded connection failed.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("cannot open the streams of port {port}: {cause}")]
    Streams { port: u16, cause: StreamError },
    /// What the far end wrote on the error stream (it could not reach the port, say).
    #[error("{0}")]
    Remote(String),
}

/// A port-forward connection: many forwarded connections share it.
pub struct PortForward {
    session: Session,
    next_request_id: AtomicU64,
}

/// One forwarded connection's streams, for a caller that moves the bytes itself.
pub struct Forwarded {
    pub data: Stream,
    /// Ends when the far end is done with the connection; what it holds is an error.
    pub error: StreamReader,
}

impl PortForward {
    /// Speaks port-forward over an open WebSocket whose subprotocol is
    /// `shared::api::port_forward::SUBPROTOCOL`.
    pub fn over<S>(socket: WebSocketStream<S>) -> PortForward
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (sink, stream) = socket.split();
        let incoming = stream.filter_map(|message| {
            future::ready(match message {
                Ok(Message::Binary(bytes)) => Some(Ok(bytes)),
                Ok(Message::Text(_)) => Some(Err("a text message, where SPDY frames come in binary ones".to_string())),
                Ok(_) => None,
                Err(e) => Some(Err(e.to_string())),
            })
        });
        let outgoing = sink.with(|bytes: Bytes| future::ready(Ok::<_, tokio_tungstenite::tungstenite::Error>(Message::Binary(bytes))));
        // The connection's tasks end with it; why it ended is logged by its reader.
        let (session, _, _) = spdy::start(incoming, Box::pin(outgoing), Role::Client);
        PortForward { session, next_request_id: AtomicU64::new(0) }
    }

    /// Opens the streams of one connection to the pod's `port`.
    pub async fn open(&self, port: u16) -> Result<Forwarded, ForwardError> {
        let request_id = self.next_request_id.fetch_add(1, Ordering::Relaxed).to_string();
        let headers = |kind: &str| -> Headers {
            vec![
                (STREAM_TYPE_HEADER.to_string(), kind.to_string()),
                (PORT_HEADER.to_string(), port.to_string()),
                (REQUEST_ID_HEADER.to_string(), request_id.clone()),
            ]
        };
        let failed = |cause| ForwardError::Streams { port, cause };
        let error = self.session.open(headers(STREAM_ERROR)).await.map_err(failed)?;
        // This side never writes on the error stream.
        error.writer.finish().await.map_err(failed)?;
        let data = self.session.open(headers(STREAM_DATA)).await.map_err(failed)?;
        Ok(Forwarded { data, error: error.reader })
    }

    /// Forwards `local` to the pod's `port` until either side is done, as kubectl does: when
    /// the pod's side ends, the data stream is reset and the error stream read to its end.
    pub async fn forward<L>(&self, port: u16, local: L) -> Result<(), ForwardError>
    where
        L: AsyncRead + AsyncWrite + Unpin,
    {
        let Forwarded { data, mut error } = self.open(port).await?;
        let (mut local_read, mut local_write) = tokio::io::split(local);
        let Stream { reader: mut remote_read, writer: remote_write, .. } = data;
        let to_pod = async {
            if !remote_write.send_from(&mut local_read).await {
                return;
            }
            // The pod's side may still be answering.
            future::pending::<()>().await
        };
        let from_pod = async {
            while let Some(bytes) = remote_read.read().await {
                if local_write.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            let _ = local_write.shutdown().await;
        };
        tokio::select! {
            _ = to_pod => {}
            _ = from_pod => {}
        }
        remote_write.reset().await;
        let message = error.read_to_end().await;
        if message.is_empty() { Ok(()) } else { Err(ForwardError::Remote(String::from_utf8_lossy(&message).into_owned())) }
    }

    /// Ends the connection and every forwarded connection on it.
    pub async fn close(&self) {
        self.session.close().await
    }

    /// Waits until the connection has ended.
    pub async fn closed(&self) {
        self.session.closed().await
    }
}
