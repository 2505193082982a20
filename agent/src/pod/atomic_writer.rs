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

/// Makes `dir` hold exactly `files`; returns whether anything changed (nothing does when the
/// current version already holds them).
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
