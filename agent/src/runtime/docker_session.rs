//! Exec and attach on Docker: a command run beside a container's process through the
//! engine's exec API, or the container's own process joined through attach, each with its
//! output, input, terminal size and exit code. Docker cannot kill an exec: the session ends
//! an abandoned one (a client gone, an exec probe timed out) by its host PID, as the
//! kubelet's runtime ends a stream's process.

use async_trait::async_trait;
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::exec::{ResizeExecOptions, StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::query_parameters::{AttachContainerOptionsBuilder, ResizeContainerTTYOptionsBuilder, WaitContainerOptions};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use shared::remote_command::Options;

use super::seam::{Attached, AttachedProcess, Error, Output, Result};

/// How many times the exit code of an exec whose output ended is asked for before giving
/// up, and how long apart: the engine records it a moment after it closes the output.
const EXIT_CODE_TRIES: u32 = 100;
const EXIT_CODE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(10);

fn failed(action: &'static str, container: &str, error: BollardError) -> Error {
    Error::Container { action, container: container.to_string(), message: error.to_string() }
}

/// The engine's output with stdin's echo dropped and a terminal's output as stdout.
fn output(
    stream: impl Stream<Item = Result<LogOutput, BollardError>> + Send + 'static,
    container: &str,
) -> BoxStream<'static, Result<Output>> {
    let container = container.to_string();
    stream
        .filter_map(move |chunk| {
            let chunk = match chunk {
                Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => Some(Ok(Output::Stdout(message))),
                Ok(LogOutput::StdErr { message }) => Some(Ok(Output::Stderr(message))),
                Ok(LogOutput::StdIn { .. }) => None,
                Err(e) => Some(Err(failed("read the output of", &container, e))),
            };
            std::future::ready(chunk)
        })
        .boxed()
}

pub(super) async fn exec(docker: &Docker, id: &str, options: &Options) -> Result<Attached> {
    let config = ExecConfig {
        cmd: Some(options.command.clone()),
        attach_stdin: Some(options.stdin),
        attach_stdout: Some(options.stdout),
        attach_stderr: Some(options.stderr),
        tty: Some(options.tty),
        ..Default::default()
    };
    let exec = docker.create_exec(id, config).await.map_err(|e| failed("exec in", id, e))?;
    let start = StartExecOptions { detach: false, tty: options.tty, output_capacity: None };
    match docker.start_exec(&exec.id, Some(start)).await.map_err(|e| failed("exec in", id, e))? {
        StartExecResults::Attached { output: stream, input } => Ok(Attached {
            output: output(stream, id),
            input,
            process: Box::new(ExecProcess { docker: docker.clone(), exec: exec.id, container: id.to_string() }),
        }),
        StartExecResults::Detached => {
            Err(Error::Container { action: "exec in", container: id.to_string(), message: "the engine started the exec detached".into() })
        }
    }
}

pub(super) async fn attach(docker: &Docker, id: &str, options: &Options) -> Result<Attached> {
    let query =
        AttachContainerOptionsBuilder::new().stream(true).stdin(options.stdin).stdout(options.stdout).stderr(options.stderr).build();
    let joined = docker.attach_container(id, Some(query)).await.map_err(|e| failed("attach to", id, e))?;
    Ok(Attached {
        output: output(joined.output, id),
        input: joined.input,
        process: Box::new(ContainerProcess { docker: docker.clone(), container: id.to_string() }),
    })
}

/// A command the session started.
struct ExecProcess {
    docker: Docker,
    exec: String,
    container: String,
}

#[async_trait]
impl AttachedProcess for ExecProcess {
    async fn resize(&self, width: u16, height: u16) -> Result<()> {
        let size = ResizeExecOptions { height, width };
        self.docker.resize_exec(&self.exec, size).await.map_err(|e| failed("resize the exec terminal of", &self.container, e))
    }

    async fn exit_code(&self) -> Result<i64> {
        for _ in 0..EXIT_CODE_TRIES {
            let inspected = self.docker.inspect_exec(&self.exec).await.map_err(|e| failed("inspect an exec in", &self.container, e))?;
            if let (Some(false), Some(code)) = (inspected.running, inspected.exit_code) {
                return Ok(code);
            }
            tokio::time::sleep(EXIT_CODE_INTERVAL).await;
        }
        Err(Error::Container {
            action: "read the exit code of an exec in",
            container: self.container.clone(),
            message: "its output ended, but the engine still reports it running".into(),
        })
    }

    async fn abandon(&self) -> Result<()> {
        let inspected = self.docker.inspect_exec(&self.exec).await.map_err(|e| failed("inspect an exec in", &self.container, e))?;
        let pid = inspected.pid.and_then(|pid| i32::try_from(pid).ok()).filter(|&pid| pid > 0);
        if let (Some(true), Some(pid)) = (inspected.running, pid) {
            // Its process group first (a terminal's session leads one), then the process; a
            // process that is gone already is no failure.
            // SAFETY: kill has no memory effects; a wrong PID fails with ESRCH.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
        Ok(())
    }
}

/// A container's own process, which outlives the session.
struct ContainerProcess {
    docker: Docker,
    container: String,
}

#[async_trait]
impl AttachedProcess for ContainerProcess {
    async fn resize(&self, width: u16, height: u16) -> Result<()> {
        let size = ResizeContainerTTYOptionsBuilder::new().w(i32::from(width)).h(i32::from(height)).build();
        self.docker.resize_container_tty(&self.container, size).await.map_err(|e| failed("resize the terminal of", &self.container, e))
    }

    async fn exit_code(&self) -> Result<i64> {
        let mut waiting = self.docker.wait_container(&self.container, None::<WaitContainerOptions>);
        match waiting.next().await {
            Some(Ok(exit)) => Ok(exit.status_code),
            // bollard reports a non-zero exit as an error that holds the code.
            Some(Err(BollardError::DockerContainerWaitError { code, .. })) => Ok(code),
            Some(Err(e)) => Err(failed("wait for", &self.container, e)),
            None => Err(Error::Container { action: "wait for", container: self.container.clone(), message: "no answer".into() }),
        }
    }

    async fn abandon(&self) -> Result<()> {
        Ok(())
    }
}
