//! The client side of exec, as kubectl's: one WebSocket speaking `v5.channel.k8s.io`
//! (`shared::remote_command`), where this side sends its stdin, its end (the close signal)
//! and its terminal's sizes, and reads the command's stdout and stderr until the Status that
//! carries the exit code.

use futures::stream::SplitStream;
use futures::{SinkExt, Stream, StreamExt};
use shared::remote_command::{channel, exit_code};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// Why a session gave no exit code.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// What the far end's Status says instead (the container is not running, say).
    #[error("{0}")]
    Remote(String),
    #[error("the connection broke off: {0}")]
    Connection(String),
    #[error("the session ended without a status")]
    NoStatus,
    #[error("cannot write the command's output here: {0}")]
    Output(std::io::Error),
}

/// The terminal size a session sends on the resize channel: columns, then rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    pub width: u16,
    pub height: u16,
}

/// An open exec session.
pub struct RemoteCommand<S> {
    socket: WebSocketStream<S>,
}

impl<S> RemoteCommand<S>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    /// Speaks the channel protocol over an open WebSocket whose subprotocol is
    /// `shared::remote_command::V5`.
    pub fn over(socket: WebSocketStream<S>) -> RemoteCommand<S> {
        RemoteCommand { socket }
    }

    /// Runs the session to its end: feeds `stdin` (when the session asked for it) and then
    /// its end, sends each size of `sizes`, and writes the command's output to `stdout` and
    /// `stderr`. Answers the command's exit code.
    pub async fn run<I, O, E, Z>(self, stdin: Option<I>, mut stdout: O, mut stderr: E, sizes: Z) -> Result<i64, SessionError>
    where
        I: AsyncRead + Unpin,
        O: AsyncWrite + Unpin,
        E: AsyncWrite + Unpin,
        Z: Stream<Item = TerminalSize> + Unpin,
    {
        let (mut sink, stream) = self.socket.split();
        let send = async {
            let mut sizes = sizes.fuse();
            let mut stdin = stdin;
            let mut buffer = vec![0; 32 * 1024];
            loop {
                tokio::select! {
                    read = async { stdin.as_mut()?.read(&mut buffer[1..]).await.ok() }, if stdin.is_some() => {
                        let message = match read {
                            Some(0) | None => {
                                stdin = None;
                                vec![channel::CLOSE, channel::STDIN]
                            }
                            Some(n) => {
                                buffer[0] = channel::STDIN;
                                buffer[..=n].to_vec()
                            }
                        };
                        if sink.send(Message::Binary(message.into())).await.is_err() {
                            break;
                        }
                    }
                    Some(size) = sizes.next() => {
                        let size = format!(r#"{{"Width":{},"Height":{}}}"#, size.width, size.height);
                        let message = [&[channel::RESIZE][..], size.as_bytes()].concat();
                        if sink.send(Message::Binary(message.into())).await.is_err() {
                            break;
                        }
                    }
                    else => break,
                }
            }
            // Nothing more to send: the session ends when the far end says so.
            std::future::pending::<()>().await
        };
        let receive = receive(stream, &mut stdout, &mut stderr);
        let status = tokio::select! {
            status = receive => status?,
            () = send => unreachable!("sending never ends the session"),
        };
        stdout.flush().await.map_err(SessionError::Output)?;
        stderr.flush().await.map_err(SessionError::Output)?;
        exit_code(&status).map_err(SessionError::Remote)
    }
}

/// Writes the output channels until the connection closes; answers the Status it carried.
async fn receive<S, O, E>(mut stream: SplitStream<WebSocketStream<S>>, stdout: &mut O, stderr: &mut E) -> Result<Vec<u8>, SessionError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    O: AsyncWrite + Unpin,
    E: AsyncWrite + Unpin,
{
    let mut status = None;
    while let Some(message) = stream.next().await {
        let data = match message {
            Ok(Message::Binary(data)) => data,
            Ok(Message::Close(_)) => break,
            Ok(_) => continue,
            Err(e) => return Err(SessionError::Connection(e.to_string())),
        };
        match data.split_first() {
            Some((&channel::STDOUT, bytes)) => stdout.write_all(bytes).await.map_err(SessionError::Output)?,
            Some((&channel::STDERR, bytes)) => stderr.write_all(bytes).await.map_err(SessionError::Output)?,
            Some((&channel::ERROR, bytes)) => status = Some(bytes.to_vec()),
            _ => {}
        }
    }
    status.ok_or(SessionError::NoStatus)
}
