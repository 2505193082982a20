//! `shepherd-agent bootstrap-image`: builds the tiny `minimal` image from the host's static
//! busybox with no registry — a root filesystem tar made in memory, imported the way
//! `docker import` does. The reference manifests use `image: "minimal"`.

use std::path::Path;
use std::process::Command;

use bollard::Docker;
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures::StreamExt;

/// Where Debian's busybox-static installs its binary.
pub const DEFAULT_BUSYBOX: &str = "/bin/busybox";
pub const MINIMAL_IMAGE: &str = "minimal";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read busybox at {path}: {source} (Debian: apt-get install busybox-static)")]
    ReadBusybox { path: String, source: std::io::Error },
    #[error("{path} does not list its applets ({message}); it must be a static busybox (Debian: busybox-static)")]
    Applets { path: String, message: String },
    #[error("failed to build the root filesystem of image {image}: {source}")]
    Tar { image: String, source: std::io::Error },
    #[error("failed to import image {image} into Docker: {message}")]
    Import { image: String, message: String },
    #[error("invalid image name {0:?}: use a plain repository name such as minimal or minimal:1")]
    InvalidName(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What `bootstrap` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Imported,
    AlreadyPresent,
}

/// The applets a busybox binary offers, with their install paths (`bin/sh`, `usr/bin/env`).
pub fn applets(busybox: &Path) -> Result<Vec<String>> {
    let path = busybox.display().to_string();
    let output =
        Command::new(busybox).arg("--list-full").output().map_err(|e| Error::Applets { path: path.clone(), message: e.to_string() })?;
    if !output.status.success() {
        return Err(Error::Applets { path, message: String::from_utf8_lossy(&output.stderr).trim().to_string() });
    }
    let mut applets: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| l.trim().trim_start_matches('/').to_string())
        .filter(|l| !l.is_empty() && !l.contains(".."))
        .collect();
    if !applets.iter().any(|a| a == "bin/sh") {
        applets.push("bin/sh".to_string());
    }
    applets.sort();
    applets.dedup();
    Ok(applets)
}

/// The root filesystem as an uncompressed tar: busybox at `/bin/busybox`, a symlink per
/// applet, the usual empty directories, and an `/etc/passwd` with root and nobody.
pub fn rootfs_tar(busybox_binary: &[u8], applets: &[String]) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut dirs: Vec<String> =
        ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "tmp", "root", "home", "proc", "sys", "dev", "var", "var/tmp", "run"]
            .map(String::from)
            .to_vec();
    for applet in applets {
        if let Some((parent, _)) = applet.rsplit_once('/')
            && !dirs.iter().any(|d| d == parent)
        {
            dirs.push(parent.to_string());
        }
    }
    for dir in &dirs {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(if dir == "tmp" || dir == "var/tmp" { 0o1777 } else { 0o755 });
        header.set_size(0);
        header.set_mtime(0);
        tar.append_data(&mut header, format!("{dir}/"), std::io::empty())?;
    }
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o755);
    header.set_size(busybox_binary.len() as u64);
    header.set_mtime(0);
    tar.append_data(&mut header, "bin/busybox", busybox_binary)?;
    for applet in applets.iter().filter(|a| a.as_str() != "bin/busybox") {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_mode(0o777);
        header.set_size(0);
        header.set_mtime(0);
        tar.append_link(&mut header, applet, "/bin/busybox")?;
    }
    let files: [(&str, &str); 3] = [
        ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"),
        ("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
        ("etc/hostname", "minimal\n"),
    ];
    for (path, text) in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(0o644);
        header.set_size(text.len() as u64);
        header.set_mtime(0);
        tar.append_data(&mut header, path, text.as_bytes())?;
    }
    tar.into_inner()
}

/// Splits `name[:tag]`, refusing anything that is not a plain local repository name.
fn parse_name(image: &str) -> Result<(&str, &str)> {
    let (repo, tag) = image.split_once(':').unwrap_or((image, "latest"));
    let valid_repo = !repo.is_empty()
        && repo.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c))
        && !repo.starts_with(['.', '-', '/']);
    let valid_tag = !tag.is_empty() && tag.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if valid_repo && valid_tag { Ok((repo, tag)) } else { Err(Error::InvalidName(image.to_string())) }
}

/// Imports `image` built from the busybox at `busybox`, unless it is already present
/// (or `force` asks to build it again).
pub async fn bootstrap(docker: &Docker, image: &str, busybox: &Path, force: bool) -> Result<Outcome> {
    let (repo, tag) = parse_name(image)?;
    let reference = format!("{repo}:{tag}");
    if !force && docker.inspect_image(&reference).await.is_ok() {
        return Ok(Outcome::AlreadyPresent);
    }
    let binary = std::fs::read(busybox).map_err(|source| Error::ReadBusybox { path: busybox.display().to_string(), source })?;
    let applets = applets(busybox)?;
    let tar = rootfs_tar(&binary, &applets).map_err(|source| Error::Tar { image: reference.clone(), source })?;
    let options = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(repo)
        .tag(tag)
        .message("built by shepherd-agent bootstrap-image from the host's busybox")
        .changes(vec!["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(), "CMD [\"/bin/sh\"]".to_string()])
        .build();
    let mut progress = docker.create_image(Some(options), Some(bollard::body_full(tar.into())), None);
    while let Some(step) = progress.next().await {
        step.map_err(|e| Error::Import { image: reference.clone(), message: e.to_string() })?;
    }
    if docker.inspect_image(&reference).await.is_err() {
        return Err(Error::Import { image: reference, message: "the engine accepted the tar but does not list the image".into() });
    }
    Ok(Outcome::Imported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rootfs_holds_busybox_and_its_links() {
        let applets = vec!["bin/sh".to_string(), "usr/bin/env".to_string(), "bin/sleep".to_string()];
        let tar = rootfs_tar(b"\x7fELF fake", &applets).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            if entry.header().entry_type() == tar::EntryType::Symlink {
                assert_eq!(entry.link_name().unwrap().unwrap().display().to_string(), "/bin/busybox", "{path}");
            }
            seen.push(path);
        }
        for wanted in ["bin/busybox", "bin/sh", "usr/bin/env", "bin/sleep", "etc/passwd", "tmp/"] {
            assert!(seen.iter().any(|p| p == wanted), "{wanted} missing from {seen:?}");
        }
    }

    #[test]
    fn image_names_are_checked() {
        assert_eq!(parse_name("minimal").unwrap(), ("minimal", "latest"));
        assert_eq!(parse_name("minimal:1").unwrap(), ("minimal", "1"));
        assert!(parse_name("Minimal").is_err());
        assert!(parse_name("").is_err());
        assert!(parse_name("minimal:").is_err());
    }

    #[test]
    fn host_busybox_lists_a_shell() {
        let path = Path::new(DEFAULT_BUSYBOX);
        assert!(path.exists(), "{DEFAULT_BUSYBOX} is missing: install busybox-static (apt-get install busybox-static)");
        let applets = applets(path).unwrap();
        assert!(applets.iter().any(|a| a == "bin/sh"));
        assert!(applets.iter().any(|a| a.ends_with("/sleep")));
    }
}
