//! The files of a configMap or secret volume, written as the kubelet's AtomicWriter writes
//! them, so that a reader never sees half an update: each version goes into a new hidden
//! directory (`..<timestamp>`), the `..data` link is swapped to it in one rename, and each
//! top-level name is a link through `..data` (`key -> ..data/key`). A `subPath` mount binds
//! the file or directory a version held when the container started, so it keeps that version,
//! as in Kubernetes.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The link that names the current version.
pub const DATA_DIR: &str = "..data";
const DATA_DIR_TMP: &str = "..data_tmp";

/// One file of a version: its content and mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub content: Vec<u8>,
    pub mode: u32,
}

/// Files by their path relative to the volume (`key`, or an item's `conf/app.yaml`).
pub type Files = BTreeMap<String, File>;

/// The files of a volume with their paths as the kubelet's `validatePayload` takes them:
/// relative, with no `..` part and not starting with `..` (the writer's own names), cleaned
/// (`./c/./d` is `c/d`, `e//f` is `e/f`). Beyond it, two paths may not name one file, nor may
/// one file be the directory of another (`a` and `a/b`): the error names both paths, where the
/// kubelet's writer fails half-way with the system's `File exists` or `Not a directory`.
pub fn payload(files: Files) -> Result<Files, String> {
    let mut cleaned = Files::new();
    let mut given = BTreeMap::new();
    for (path, file) in files {
        let clean = clean_path(&path)?;
        if let Some(other) = given.insert(clean.clone(), path.clone()) {
            return Err(format!("item paths {other:?} and {path:?} name the same file"));
        }
        cleaned.insert(clean, file);
    }
    for path in cleaned.keys() {
        if let Some((dir, _)) = path.match_indices('/').map(|(i, _)| path.split_at(i)).find(|(dir, _)| cleaned.contains_key(*dir)) {
            let (file, inner) = (&given[dir], &given[path]);
            return Err(format!("item paths {file:?} and {inner:?} conflict: {file:?} is a file, so it cannot hold {inner:?}"));
        }
    }
    Ok(cleaned)
}

fn clean_path(path: &str) -> Result<String, String> {
    let invalid = |why: &str| Err(format!("invalid item path {path:?}: {why}"));
    if path.starts_with('/') {
        return invalid("must be a relative path");
    }
    if path.split('/').any(|part| part == "..") {
        return invalid("must not contain '..'");
    }
    if path.starts_with("..") {
        return invalid("must not start with '..'");
    }
    let clean = path.split('/').filter(|part| !part.is_empty() && *part != ".").collect::<Vec<_>>().join("/");
    if clean.is_empty() {
        return invalid("must name a file");
    }
    Ok(clean)
}

/// Makes `dir` hold exactly `files`, whose paths [`payload`] has checked; returns whether
/// anything changed (nothing does when the current version already holds them).
pub fn write(dir: &Path, files: &Files, version: &str) -> io::Result<bool> {
    std::fs::create_dir_all(dir)?;
    let data = dir.join(DATA_DIR);
    let current = std::fs::read_link(&data).ok();
    if let Some(current) = &current
        && holds(&dir.join(current), files)
    {
        return Ok(false);
    }
    let name = format!("..{version}");
    let staged = dir.join(&name);
    if staged.exists() {
        std::fs::remove_dir_all(&staged)?;
    }
    std::fs::create_dir(&staged)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o755))?;
    for (path, file) in files {
        let target = staged.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, &file.content)?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(file.mode))?;
    }
    // The swap: a new link beside the old, renamed over it in one step.
    let tmp = dir.join(DATA_DIR_TMP);
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&name, &tmp)?;
    std::fs::rename(&tmp, &data)?;
    let top: BTreeSet<&str> = files.keys().filter_map(|p| p.split('/').next()).collect();
    for entry in &top {
        let link = dir.join(entry);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA_DIR).join(entry), &link)?;
        }
    }
    // Names the new version no longer has, and the old version itself.
    for entry in std::fs::read_dir(dir)?.flatten() {
        let file_name = entry.file_name();
        let Some(name_str) = file_name.to_str() else { continue };
        let stale_link = !name_str.starts_with("..") && !top.contains(name_str);
        if stale_link {
            std::fs::remove_file(entry.path())?;
        }
    }
    if let Some(old) = current.filter(|old| old.as_os_str() != name.as_str()) {
        std::fs::remove_dir_all(dir.join(old))?;
    }
    Ok(true)
}

/// Whether the version directory `version` holds exactly `files`.
fn holds(version: &Path, files: &Files) -> bool {
    let mut found = 0;
    for (path, file) in files {
        let target = version.join(path);
        let same = std::fs::read(&target).is_ok_and(|content| content == file.content)
            && std::fs::metadata(&target).is_ok_and(|m| m.permissions().mode() & 0o7777 == file.mode);
        if !same {
            return false;
        }
        found += 1;
    }
    count_files(version) == found
}

fn count_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| {
            let path: PathBuf = e.path();
            if path.is_dir() { count_files(&path) } else { 1 }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(entries: &[(&str, &str, u32)]) -> Files {
        entries.iter().map(|(path, content, mode)| (path.to_string(), File { content: content.as_bytes().to_vec(), mode: *mode })).collect()
    }

    #[test]
    fn paths_are_cleaned_and_a_file_in_the_way_of_another_is_named() {
        let given = files(&[("a", "1", 0o644), ("./c/./d", "2", 0o644), ("e//f", "3", 0o644), ("g/", "4", 0o644)]);
        let cleaned = payload(given).unwrap();
        assert_eq!(cleaned.keys().collect::<Vec<_>>(), ["a", "c/d", "e/f", "g"]);
        let dir = tempfile::tempdir().unwrap();
        assert!(write(dir.path(), &cleaned, "1").unwrap());
        assert_eq!(std::fs::read_to_string(dir.path().join("c/d")).unwrap(), "2", "through the link c -> ..data/c");
        assert_eq!(std::fs::read_to_string(dir.path().join("e/f")).unwrap(), "3");

        for (paths, error) in [
            (&["a", "a/b"][..], r#"item paths "a" and "a/b" conflict: "a" is a file, so it cannot hold "a/b""#),
            (&["x/a", "./x//a/b/c"], r#"item paths "x/a" and "./x//a/b/c" conflict: "x/a" is a file, so it cannot hold "./x//a/b/c""#),
            (&["c/d", "./c/./d"], r#"item paths "./c/./d" and "c/d" name the same file"#),
            (&["/etc/passwd"], r#"invalid item path "/etc/passwd": must be a relative path"#),
            (&["a/../../b"], r#"invalid item path "a/../../b": must not contain '..'"#),
            (&["..data"], r#"invalid item path "..data": must not start with '..'"#),
            (&["./"], r#"invalid item path "./": must name a file"#),
        ] {
            let given: Vec<_> = paths.iter().map(|path| (*path, "x", 0o644)).collect();
            assert_eq!(payload(files(&given)).unwrap_err(), error, "{paths:?}");
        }
        assert!(payload(files(&[("a/b", "1", 0o644), ("a/c", "2", 0o644), ("ab", "3", 0o644)])).is_ok(), "siblings and a longer name");
    }

    #[test]
    fn a_new_version_is_swapped_in_through_the_data_link() {
        let dir = tempfile::tempdir().unwrap();
        let volume = dir.path().join("conf");
        assert!(write(&volume, &files(&[("index.html", "v1", 0o644), ("conf/app.yaml", "a: 1", 0o600)]), "1").unwrap());
        assert_eq!(std::fs::read_to_string(volume.join("index.html")).unwrap(), "v1");
        assert_eq!(std::fs::read_link(volume.join("index.html")).unwrap(), Path::new("..data/index.html"));
        assert_eq!(std::fs::read_link(volume.join(DATA_DIR)).unwrap(), Path::new("..1"));
        assert_eq!(std::fs::metadata(volume.join("conf/app.yaml")).unwrap().permissions().mode() & 0o777, 0o600);
        // What a subPath mount would have bound: the file of version 1 itself.
        let pinned = volume.join("index.html").canonicalize().unwrap();

        assert!(!write(&volume, &files(&[("index.html", "v1", 0o644), ("conf/app.yaml", "a: 1", 0o600)]), "2").unwrap(), "no change");
        assert!(write(&volume, &files(&[("index.html", "v2", 0o644)]), "3").unwrap());
        assert_eq!(std::fs::read_to_string(volume.join("index.html")).unwrap(), "v2");
        assert_eq!(std::fs::read_link(volume.join(DATA_DIR)).unwrap(), Path::new("..3"));
        assert!(std::fs::symlink_metadata(volume.join("conf")).is_err(), "a key that went is gone");
        assert!(!volume.join("..1").exists() && !pinned.exists(), "the old version is removed");
        let names: BTreeSet<String> =
            std::fs::read_dir(&volume).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, BTreeSet::from(["..3".to_string(), "..data".to_string(), "index.html".to_string()]));
    }
}
