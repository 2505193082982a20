//! `sheepctl exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]`: the server proxies the
//! session to the node's agent, which runs the command through Docker's exec API. As with
//! kubectl, `-i` feeds it stdin to its end, `-t` gives it a terminal (raw mode here, the
//! window's size sent on each change), and sheepctl exits with the command's exit code.

use anyhow::{Result, bail};
use shared::model::{Kind, Pod, PodPhase};
use shared::remote_command::Options;
use shepherd_client::remote_command::TerminalSize;
use tokio::io::{AsyncRead, AsyncWrite};

use super::context::Context;
use crate::cli::ExecArgs;
use crate::{settings, tty};

/// The annotation that names the container kubectl's exec, logs and cp default to.
const DEFAULT_CONTAINER_ANNOTATION: &str = "kubectl.kubernetes.io/default-container";

/// A remote command's non-zero exit: sheepctl exits with its code, as kubectl does.
#[derive(Debug, thiserror::Error)]
#[error("command terminated with exit code {0}")]
pub struct RemoteExit(pub i64);

pub async fn run(context: &Context, args: &ExecArgs) -> Result<()> {
    let name = settings::name_of(Kind::Pod, &args.pod)?;
    let container = container(context, &name, args.container.as_deref()).await?;
    let mut tty = args.tty;
    let raw = if tty { tty::RawMode::enter()? } else { None };
    if tty && raw.is_none() {
        eprintln!("Unable to use a TTY - input is not a terminal or the right kind of file");
        tty = false;
    }
    let options = Options { container, command: args.command.clone(), stdin: args.stdin, stdout: true, stderr: !tty, tty };
    let stdin = args.stdin.then(tokio::io::stdin);
    let sizes: Box<dyn futures::Stream<Item = TerminalSize> + Unpin> =
        if tty { Box::new(tty::sizes()?) } else { Box::new(futures::stream::empty()) };
    let code = execute(context, &name, &options, stdin, tokio::io::stdout(), tokio::io::stderr(), sizes).await;
    drop(raw);
    match code? {
        0 => Ok(()),
        code => Err(RemoteExit(code).into()),
    }
}

/// The container of pod `name` a session joins: `wanted`, else the one the pod's
/// `kubectl.kubernetes.io/default-container` annotation names, else the first, which is
/// said when there are several. A pod that has ended runs nothing more.
pub async fn container(context: &Context, name: &str, wanted: Option<&str>) -> Result<String> {
    let pod: Pod = context.client.get(&context.settings.namespace, name).await?;
    if matches!(pod.status.phase, PodPhase::Succeeded | PodPhase::Failed) {
        bail!("cannot exec into a container in a completed pod; current phase is {}", pod.status.phase.as_str());
    }
    let names: Vec<&str> = pod.spec.containers.iter().map(|c| c.name.as_str()).collect();
    if let Some(wanted) = wanted {
        return pod.container_for(wanted).map(str::to_string).map_err(|refusal| anyhow::anyhow!("{refusal}: it has {}", names.join(", ")));
    }
    if let Some(named) = pod.metadata.annotations.get(DEFAULT_CONTAINER_ANNOTATION).filter(|n| names.contains(&n.as_str())) {
        return Ok(named.clone());
    }
    let Some(first) = names.first() else { bail!("pod {name} has no containers") };
    if names.len() > 1 {
        eprintln!("Defaulted container {first:?} out of: {}", names.join(", "));
    }
    Ok(first.to_string())
}

/// Runs one session in pod `name` with these streams; answers the command's exit code.
pub async fn execute(
    context: &Context,
    name: &str,
    options: &Options,
    stdin: Option<impl AsyncRead + Unpin>,
    stdout: impl AsyncWrite + Unpin,
    stderr: impl AsyncWrite + Unpin,
    sizes: impl futures::Stream<Item = TerminalSize> + Unpin,
) -> Result<i64> {
    let session = context.client.exec(&context.settings.namespace, name, options).await?;
    Ok(session.run(stdin, stdout, stderr, sizes).await?)
}
