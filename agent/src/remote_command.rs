//! One exec or attach session served over a WebSocket as the kubelet serves it
//! (`shared::remote_command`): the process' output goes out on the stdout and stderr
//! channels, the client's stdin, terminal size and end of input come in, and the session
//! ends with the Status that carries the exit code. A session whose client went away, or
//! that never began, ends the process it started ([`AttachedProcess::abandon`]).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures::stream::{BoxStream, SplitStream};
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use shared::remote_command::{V5, channel, exit_status, failure_status};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::runtime::{Attached, AttachedProcess, Output, Result};

/// A process joined to, from before the WebSocket upgrade until the session ends: dropped
/// at any point, it abandons the process.
pub struct Session {
    output: BoxStream<'static, Result<Output>>,
    input: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    process: Arc<dyn AttachedProcess>,
}

impl From<Attached> for Session {
    fn from(attached: Attached) -> Self {
        Session { output: attached.output, input: Some(attached.input), process: Arc::from(attached.process) }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // An exec that already exited is left alone: abandon ends only a running one.
        let process = self.process.clone();
        tokio::spawn(async move {
            if let Err(e) = process.abandon().await {
                tracing::warn!("could not end the process of an ended session: {e}");
            }
        });
    }
}

/// How long a session that sent its close frame waits for the client's answer.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// How the session's output loop ended.
enum Ended {
    OutputDone,
    ClientLeft,
    Failed(String),
}

/// The terminal size a client sends on the resize channel.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TerminalSize {
    width: u16,
    height: u16,
}

/// Serves `session` on `socket` until the process' output ends, the client leaves or the
/// agent shuts down.
pub async fn serve(socket: WebSocket, mut session: Session, shutdown: CancellationToken) {
    let close_signal = socket.protocol().is_some_and(|protocol| protocol == V5);
    let (mut sink, stream) = socket.split();
    let left = CancellationToken::new();
    let input = session.input.take();
    let mut reader = tokio::spawn(read_client(stream, input, session.process.clone(), close_signal, left.clone()));
    let ended = loop {
        tokio::select! {
            chunk = session.output.next() => match chunk {
                Some(Ok(output)) => {
                    let (channel, bytes) = match output {
                        Output::Stdout(bytes) => (channel::STDOUT, bytes),
                        Output::Stderr(bytes) => (channel::STDERR, bytes),
                    };
                    let message = [&[channel][..], &bytes].concat();
                    if sink.send(Message::Binary(message.into())).await.is_err() {
                        break Ended::ClientLeft;
                    }
                }
                Some(Err(e)) => break Ended::Failed(e.to_string()),
                None => break Ended::OutputDone,
            },
            () = left.cancelled() => break Ended::ClientLeft,
            () = shutdown.cancelled() => break Ended::Failed("the node's agent is shutting down".into()),
        }
    };
    let status = match ended {
        Ended::ClientLeft => None,
        // An attached container's output also ends when its client closes stdin, and the
        // container may run on for long after: the client may leave meanwhile.
        Ended::OutputDone => tokio::select! {
            code = session.process.exit_code() => Some(match code {
                Ok(code) => exit_status(code),
                Err(e) => failure_status(&e.to_string()),
            }),
            () = left.cancelled() => None,
            () = shutdown.cancelled() => Some(failure_status("the node's agent is shutting down")),
        },
        Ended::Failed(message) => Some(failure_status(&message)),
    };
    match status {
        Some(status) => {
            let message = [&[channel::ERROR][..], status.as_bytes()].concat();
            if sink.send(Message::Binary(message.into())).await.is_ok() {
                // A normal closure, which the client reads as the streams' end; any other is an error.
                let _ = sink.send(Message::Close(Some(CloseFrame { code: close_code::NORMAL, reason: "".into() }))).await;
            }
        }
        // The answer to a client's close frame, queued as it was read, goes out now.
        None => {
            let _ = sink.close().await;
        }
    }
    // The reader goes on until the client answers the close frame: a socket dropped with
    // bytes unread (that answer, a heartbeat ping) is reset, and a reset can discard the
    // close frame on its way.
    if tokio::time::timeout(CLOSE_WAIT, &mut reader).await.is_err() {
        reader.abort();
    }
}

/// Feeds the client's stdin to the process and applies its terminal sizes, until the client
/// leaves; then cancels `left`.
async fn read_client(
    mut stream: SplitStream<WebSocket>,
    mut input: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    process: Arc<dyn AttachedProcess>,
    close_signal: bool,
    left: CancellationToken,
) {
    while let Some(Ok(message)) = stream.next().await {
        let data = match message {
            Message::Binary(data) => data,
            Message::Close(_) => break,
            _ => continue,
        };
        match data.split_first() {
            Some((&channel::STDIN, bytes)) => {
                // A process that closed its stdin takes no more: the rest is dropped.
                if let Some(writer) = input.as_mut()
                    && (writer.write_all(bytes).await.is_err() || writer.flush().await.is_err())
                {
                    input = None;
                }
            }
            Some((&channel::RESIZE, size)) => match serde_json::from_slice::<TerminalSize>(size) {
                Ok(size) => {
                    if let Err(e) = process.resize(size.width, size.height).await {
                        tracing::debug!("{e}");
                    }
                }
                Err(e) => tracing::debug!("a resize message that is not {{\"Width\", \"Height\"}}: {e}"),
            },
            Some((&channel::CLOSE, [channel::STDIN])) if close_signal => {
                if let Some(mut writer) = input.take() {
                    let _ = writer.shutdown().await;
                }
            }
            _ => {}
        }
    }
    left.cancel();
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use axum::Router;
    use axum::extract::WebSocketUpgrade;
    use axum::routing::get;
    use tokio::sync::oneshot;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    use super::*;

    /// A container's own process, which runs on after its output ended.
    struct RunsOn;

    #[async_trait]
    impl AttachedProcess for RunsOn {
        async fn resize(&self, _: u16, _: u16) -> Result<()> {
            Ok(())
        }

        async fn exit_code(&self) -> Result<i64> {
            std::future::pending().await
        }

        async fn abandon(&self) -> Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_client_that_leaves_after_the_output_ended_ends_the_session() {
        let (ended, served) = oneshot::channel();
        let ended = Arc::new(Mutex::new(Some(ended)));
        let app = Router::new().route(
            "/",
            get(move |upgrade: WebSocketUpgrade| async move {
                upgrade.protocols([V5]).on_upgrade(move |socket| async move {
                    // As Docker's attach ends the output when the client closes stdin.
                    let session = Session {
                        output: futures::stream::empty().boxed(),
                        input: Some(Box::pin(tokio::io::sink())),
                        process: Arc::new(RunsOn),
                    };
                    serve(socket, session, CancellationToken::new()).await;
                    if let Some(ended) = ended.lock().unwrap().take() {
                        let _ = ended.send(());
                    }
                })
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let mut request = format!("ws://{address}/").into_client_request().unwrap();
        request.headers_mut().insert("Sec-WebSocket-Protocol", V5.parse().unwrap());
        let (client, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        drop(client);
        tokio::time::timeout(Duration::from_secs(10), served).await.expect("the session ends once its client left").unwrap();
    }
}
