//! `sheepctl cp SRC DEST`, one of them `[NAMESPACE/]POD:PATH`: tar over exec, as kubectl's
//! cp. To a pod, sheepctl writes the tar and the container's `tar -xmf -` unpacks it; from a
//! pod, the container's `tar cf -` writes it and sheepctl unpacks it, refusing what a hostile
//! container could put in the stream to write outside the destination: entries outside the
//! copied path, `..` that climbs out of it, and links (skipped with a warning, as kubectl).

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context as _, Result, anyhow, bail};
use shared::remote_command::Options;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::runtime::Handle;

use super::context::Context;
use super::exec::{RemoteExit, container, execute};
use crate::cli::CpArgs;

/// One side of a copy: a local path, or a path in a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Spec {
    Local(PathBuf),
    Remote { namespace: Option<String>, pod: String, path: String },
}

/// Reads `[[NAMESPACE/]POD:]PATH` as kubectl does: a colon makes it a pod's path.
fn spec(text: &str) -> Result<Spec> {
    let wrong = || anyhow!("{text:?} must match the canonical format: [[namespace/]pod:]file/path");
    let Some((pod, path)) = text.split_once(':') else { return Ok(Spec::Local(PathBuf::from(text))) };
    let (namespace, pod) = match pod.split('/').collect::<Vec<_>>().as_slice() {
        [pod] => (None, pod.to_string()),
        [namespace, pod] => (Some(namespace.to_string()), pod.to_string()),
        _ => return Err(wrong()),
    };
    if pod.is_empty() || path.is_empty() {
        return Err(wrong());
    }
    Ok(Spec::Remote { namespace, pod, path: path.to_string() })
}

pub async fn run(context: &Context, args: &CpArgs) -> Result<()> {
    match (spec(&args.source)?, spec(&args.destination)?) {
        (Spec::Local(source), Spec::Remote { namespace, pod, path }) => {
            let context = context.in_namespace(namespace);
            to_pod(&context, &source, &pod, &path, args.container.as_deref()).await
        }
        (Spec::Remote { namespace, pod, path }, Spec::Local(destination)) => {
            let context = context.in_namespace(namespace);
            from_pod(&context, &pod, &path, &destination, args.container.as_deref()).await
        }
        (Spec::Local(_), Spec::Local(_)) => bail!("one of src or dest must be a remote file specification: POD:PATH"),
        (Spec::Remote { .. }, Spec::Remote { .. }) => bail!("one of src or dest must be a local file specification"),
    }
}

/// Runs `command` in the pod's container with these streams; a non-zero exit is an error.
async fn run_in_pod(
    context: &Context,
    pod: &str,
    container: &str,
    command: &[&str],
    stdin: Option<impl AsyncRead + Unpin>,
    stdout: impl AsyncWrite + Unpin,
) -> Result<()> {
    let options = Options {
        container: container.to_string(),
        command: command.iter().map(|part| part.to_string()).collect(),
        stdin: stdin.is_some(),
        stdout: true,
        stderr: true,
        tty: false,
    };
    match execute(context, pod, &options, stdin, stdout, tokio::io::stderr(), futures::stream::empty()).await? {
        0 => Ok(()),
        code => Err(RemoteExit(code).into()),
    }
}

async fn to_pod(context: &Context, source: &Path, pod: &str, destination: &str, container: Option<&str>) -> Result<()> {
    std::fs::symlink_metadata(source).map_err(|_| anyhow!("{} doesn't exist in local filesystem", source.display()))?;
    let container = self::container(context, pod, container).await?;
    // Into a directory that exists, as kubectl: the source keeps its name there.
    let is_directory =
        run_in_pod(context, pod, &container, &["test", "-d", destination], None::<tokio::io::Empty>, tokio::io::sink()).await;
    let destination = match (is_directory, source.file_name()) {
        (Ok(()), Some(name)) => format!("{}/{}", destination.trim_end_matches('/'), name.to_string_lossy()),
        _ => destination.to_string(),
    };
    let (directory, name) = match destination.trim_end_matches('/').rsplit_once('/') {
        Some(("", name)) => ("/".to_string(), name.to_string()),
        Some((directory, name)) => (directory.to_string(), name.to_string()),
        None => (".".to_string(), destination.clone()),
    };
    let (reader, writer) = tokio::io::duplex(64 * 1024);
    let source = source.to_path_buf();
    let runtime = Handle::current();
    let packing = tokio::task::spawn_blocking(move || -> Result<()> {
        let mut builder = tar::Builder::new(Blocking { inner: writer, runtime });
        // Links go as links, as kubectl sends them.
        builder.follow_symlinks(false);
        if source.is_dir() {
            builder.append_dir_all(&name, &source)?;
        } else {
            builder.append_path_with_name(&source, &name)?;
        }
        builder.into_inner()?.flush()?;
        Ok(())
    });
    let command = ["tar", "-xmf", "-", "-C", directory.as_str()];
    let unpacked = run_in_pod(context, pod, &container, &command, Some(reader), tokio::io::stdout()).await;
    let packed = packing.await?;
    // A pod whose tar failed stopped reading: its error says why, the packing's does not.
    unpacked?;
    packed.context("cannot send the files")
}

async fn from_pod(context: &Context, pod: &str, source: &str, destination: &Path, container: Option<&str>) -> Result<()> {
    let container = self::container(context, pod, container).await?;
    let prefix = prefix_of(source);
    let (reader, writer) = tokio::io::duplex(64 * 1024);
    let runtime = Handle::current();
    let destination = destination.to_path_buf();
    let unpacking = tokio::task::spawn_blocking(move || unpack(Blocking { inner: reader, runtime }, &prefix, &destination));
    let packed = run_in_pod(context, pod, &container, &["tar", "cf", "-", source], None::<tokio::io::Empty>, writer).await;
    let unpacked = unpacking.await?;
    packed?;
    unpacked
}

/// The name the pod's tar gives `source`, as kubectl reckons it: without leading slashes and
/// `.`, `..` and `../` shortcuts, which tar drops too.
fn prefix_of(source: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in source.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

/// Unpacks the tar `stream` of a pod's `prefix` into `destination`, writing only files and
/// directories inside it and warning of what it skips. An entry outside `prefix` means the
/// stream was tampered with, and ends the copy.
fn unpack(stream: impl Read, prefix: &str, destination: &Path) -> Result<()> {
    let mut archive = tar::Archive::new(stream);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some(rest) = name.strip_prefix(prefix) else { bail!("tar contents corrupted: {name:?} is not under {prefix:?}") };
        let Some(target) = inside(destination, rest) else {
            eprintln!("warning: file {name:?} is outside target destination, skipping");
            continue;
        };
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            std::fs::create_dir_all(&target).with_context(|| format!("cannot create {}", target.display()))?;
            continue;
        }
        if kind.is_symlink() || kind.is_hard_link() {
            let link = entry.link_name_bytes().map(|l| String::from_utf8_lossy(&l).into_owned()).unwrap_or_default();
            eprintln!("warning: skipping link: {:?} -> {link:?}", target.display().to_string());
            continue;
        }
        if !kind.is_file() {
            eprintln!("warning: skipping {:?}: neither a file nor a directory", target.display().to_string());
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let mut file = std::fs::File::create(&target).with_context(|| format!("cannot create {}", target.display()))?;
        std::io::copy(&mut entry, &mut file).with_context(|| format!("cannot write {}", target.display()))?;
    }
    Ok(())
}

/// `destination` joined with the path `rest` of a tar entry, if that stays inside it: a
/// leading `/` is dropped, `..` may climb back only as far as it went down.
fn inside(destination: &Path, rest: &str) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in Path::new(rest).components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(parts.iter().fold(destination.to_path_buf(), |path, part| path.join(part)))
}

/// A blocking thread's view of an async stream, for the tar crate, which reads and writes
/// with `std::io`.
struct Blocking<T> {
    inner: T,
    runtime: Handle,
}

impl<T: AsyncRead + Unpin> Read for Blocking<T> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        self.runtime.block_on(self.inner.read(buffer))
    }
}

impl<T: AsyncWrite + Unpin> Write for Blocking<T> {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        self.runtime.block_on(self.inner.write(buffer))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.runtime.block_on(self.inner.flush())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_as_kubectl_reads_them() {
        assert_eq!(spec("notes.txt").unwrap(), Spec::Local("notes.txt".into()));
        let remote = |namespace: Option<&str>, pod: &str, path: &str| Spec::Remote {
            namespace: namespace.map(str::to_string),
            pod: pod.into(),
            path: path.into(),
        };
        assert_eq!(spec("web:/tmp/x").unwrap(), remote(None, "web", "/tmp/x"));
        assert_eq!(spec("shop/web:x").unwrap(), remote(Some("shop"), "web", "x"));
        for wrong in [":x", "a/b/c:x", "web:"] {
            assert!(spec(wrong).unwrap_err().to_string().contains("canonical format"), "{wrong}");
        }
    }

    #[test]
    fn prefixes_drop_what_tar_drops() {
        assert_eq!(prefix_of("/tmp/notes.txt"), "tmp/notes.txt");
        assert_eq!(prefix_of("../../etc/./passwd"), "etc/passwd");
        assert_eq!(prefix_of("/"), "");
    }

    #[test]
    fn entries_stay_inside_the_destination() {
        let destination = Path::new("/home/me/out");
        assert_eq!(inside(destination, ""), Some(destination.to_path_buf()));
        assert_eq!(inside(destination, "/a/b"), Some(destination.join("a/b")));
        assert_eq!(inside(destination, "a/../b"), Some(destination.join("b")));
        assert_eq!(inside(destination, "/../../etc/passwd"), None);
        assert_eq!(inside(destination, "a/../../x"), None);
    }
}
