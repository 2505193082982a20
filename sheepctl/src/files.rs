//! Reads manifests for `apply -f` and `delete -f`: a file, every `.json`/`.yaml`/`.yml`
//! file of a directory (in name order), or standard input for `-`. Parsing itself is
//! `shared::manifest`; this module adds which file a problem is in.

use std::io::Read;
use std::path::{Path, PathBuf};

use shared::manifest::{self, ManifestError};
use shared::model::Object;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {reason} (check the path, or pass - to read standard input)")]
    Read { path: String, reason: String },
    #[error("invalid manifest {path}: {error}")]
    Manifest { path: String, error: ManifestError },
    #[error("the directory {path} holds no .json, .yaml or .yml file")]
    EmptyDirectory { path: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One object and the file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub source: String,
    pub object: Object,
}

/// Reads every object of every path, in order; stops at the first bad file so that nothing
/// is applied from a half-read set.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Loaded>> {
    let mut loaded = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| Error::Read { path: "standard input".into(), reason: e.to_string() })?;
            loaded.extend(parse("standard input", &text)?);
        } else if path.is_dir() {
            let files = manifests_in(path)?;
            if files.is_empty() {
                return Err(Error::EmptyDirectory { path: path.display().to_string() });
            }
            for file in files {
                loaded.extend(read_file(&file)?);
            }
        } else {
            loaded.extend(read_file(path)?);
        }
    }
    Ok(loaded)
}

fn read_file(path: &Path) -> Result<Vec<Loaded>> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Error::Read { path: name.clone(), reason: io_reason(&e) })?;
    parse(&name, &text)
}

fn parse(source: &str, text: &str) -> Result<Vec<Loaded>> {
    let objects = manifest::parse(text).map_err(|error| Error::Manifest { path: source.to_string(), error })?;
    Ok(objects.into_iter().map(|object| Loaded { source: source.to_string(), object }).collect())
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

    #[test]
    fn a_directory_reads_manifests_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.yaml"), "kind: Service\nmetadata:\n  name: web\n").unwrap();
        std::fs::write(dir.path().join("a.json"), r#"{"kind": "Pod", "metadata": {"name": "p"}}"#).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a manifest").unwrap();
        let loaded = load(&[dir.path().to_path_buf()]).unwrap();
        let kinds: Vec<Kind> = loaded.iter().map(|l| l.object.kind()).collect();
        assert_eq!(kinds, vec![Kind::Pod, Kind::Service]);
        assert!(loaded[0].source.ends_with("a.json"));
    }

    #[test]
    fn problems_name_the_file_and_the_position() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.json");
        let err = load(std::slice::from_ref(&missing)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("cannot read {}: no such file or directory (check the path, or pass - to read standard input)", missing.display())
        );

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"p\"\n}\n").unwrap();
        let err = load(std::slice::from_ref(&bad)).unwrap_err().to_string();
        assert!(err.starts_with(&format!("invalid manifest {}: line ", bad.display())), "{err}");
        assert!(err.contains("column"), "{err}");

        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(load(&[empty.path().to_path_buf()]), Err(Error::EmptyDirectory { .. })));
    }
}
