//! Reads manifests for `apply -f` and `delete -f`: a file, every `.json`/`.yaml`/`.yml`
//! file of a directory (in name order), or standard input for `-`. Parsing itself is
//! `shared::manifest`; a manifest written Kubernetes' way goes to the server, which reads it
//! as `/k8s` does. This module adds which file a problem is in.

use std::io::Read;
use std::path::{Path, PathBuf};

use shared::manifest::{self, ManifestError};
use shared::model::Object;
use shepherd_client::Client;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {reason} (check the path, or pass - to read standard input)")]
    Read { path: String, reason: String },
    #[error("invalid manifest {path}: {error}")]
    Manifest { path: String, error: ManifestError },
    #[error("the directory {path} holds no .json, .yaml or .yml file")]
    EmptyDirectory { path: String },
    /// The server refused a Kubernetes manifest: its message names the document and field.
    #[error("invalid manifest {path}: {reason}")]
    Refused { path: String, reason: String },
    /// A Kubernetes manifest could not be sent to the server, which reads it.
    #[error("cannot read the Kubernetes manifest {path}: {cause}")]
    Unsent { path: String, cause: shepherd_client::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One object and the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub source: String,
    pub object: Object,
}

/// Reads every object of every path, in order; stops at the first bad file so that nothing
/// is applied from a half-read set. `client` reads the manifests written Kubernetes' way.
pub async fn load(client: &Client, paths: &[PathBuf]) -> Result<Vec<Loaded>> {
    let mut loaded = Vec::new();
    for (source, text) in read(paths)? {
        let objects = match manifest::kubernetes_documents(&text) {
            Some(_) => client.parse_manifest(&text).await.map_err(|e| match e {
                shepherd_client::Error::Api { status, .. } if status.code == 400 => {
                    Error::Refused { path: source.clone(), reason: status.message }
                }
                e => Error::Unsent { path: source.clone(), cause: e },
            })?,
            None => manifest::parse(&text).map_err(|error| Error::Manifest { path: source.clone(), error })?,
        };
        loaded.extend(objects.into_iter().map(|object| Loaded { source: source.clone(), object }));
    }
    Ok(loaded)
}

/// The text of every manifest `paths` name, with where it came from.
fn read(paths: &[PathBuf]) -> Result<Vec<(String, String)>> {
    let mut texts = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| Error::Read { path: "standard input".into(), reason: e.to_string() })?;
            texts.push(("standard input".to_string(), text));
        } else if path.is_dir() {
            let files = manifests_in(path)?;
            if files.is_empty() {
                return Err(Error::EmptyDirectory { path: path.display().to_string() });
            }
            for file in files {
                texts.push(read_file(&file)?);
            }
        } else {
            texts.push(read_file(path)?);
        }
    }
    Ok(texts)
}

fn read_file(path: &Path) -> Result<(String, String)> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Error::Read { path: name.clone(), reason: io_reason(&e) })?;
    Ok((name, text))
}

fn manifests_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::Read { path: dir.display().to_string(), reason: io_reason(&e) })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "json" | "yaml" | "yml")))
        .collect();
    files.sort();
    Ok(files)
}

/// `no such file or directory` rather than `No such file or directory (os error 2)`.
fn io_reason(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::InvalidData => "it is not UTF-8 text".to_string(),
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use shared::model::Kind;

    use super::*;

    /// A client of no server: Shepherd's own manifests never reach it.
    fn offline() -> Client {
        Client::new("http://127.0.0.1:1", None).unwrap()
    }

    #[tokio::test]
    async fn a_directory_reads_manifests_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.yaml"), "kind: Service\nmetadata:\n  name: web\n").unwrap();
        std::fs::write(dir.path().join("a.json"), r#"{"kind": "Pod", "metadata": {"name": "p"}}"#).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a manifest").unwrap();
        let loaded = load(&offline(), &[dir.path().to_path_buf()]).await.unwrap();
        let kinds: Vec<Kind> = loaded.iter().map(|l| l.object.kind()).collect();
        assert_eq!(kinds, vec![Kind::Pod, Kind::Service]);
        assert!(loaded[0].source.ends_with("a.json"));
    }

    #[tokio::test]
    async fn problems_name_the_file_and_the_position() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.json");
        let err = load(&offline(), std::slice::from_ref(&missing)).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("cannot read {}: no such file or directory (check the path, or pass - to read standard input)", missing.display())
        );

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"p\"\n}\n").unwrap();
        let err = load(&offline(), std::slice::from_ref(&bad)).await.unwrap_err().to_string();
        assert!(err.starts_with(&format!("invalid manifest {}: line ", bad.display())), "{err}");
        assert!(err.contains("column"), "{err}");

        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(load(&offline(), &[empty.path().to_path_buf()]).await, Err(Error::EmptyDirectory { .. })));
    }
}
