//! A pod's volumes on its node, kept as the kubelet keeps them, in a directory of the pod
//! (`<state dir>/nodes/<node>/pods/<uid>/volumes/<plugin>/<name>`; agents of several nodes
//! may share a state directory): an emptyDir is a directory there (a
//! tmpfs mounted on it for medium `Memory`), a hostPath is the node's own path, checked
//! against its `type`, and a configMap or secret volume a directory of files that
//! [`super::config_volumes`] writes; a `subPath` is bound by [`super::sub_path`]. The
//! directories down to the volumes are 0750, as the kubelet keeps them: a Secret's files
//! keep their modes, and no other user of the node reaches them. The directory belongs to the pod, not to a container, so a restarted
//! container finds it as it was; it goes when the pod is torn down, or, for a pod the agent
//! no longer knows (it restarted meanwhile), with the orphan sweep.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use shared::model::{Container, HostPathVolumeSource, MEDIUM_MEMORY, Pod, Volume, VolumeSource};

use super::sub_path;
use crate::runtime::Mount;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("MountVolume.SetUp failed for volume {volume:?}: {message}")]
    SetUp { volume: String, message: String },
    /// The kubelet's words, which name no path of the node.
    #[error("failed to prepare subPath for volumeMount {volume:?} of container {container:?}")]
    SubPath { volume: String, container: String },
    #[error("cannot {action} {}: {source}", path.display())]
    Io { action: &'static str, path: PathBuf, source: io::Error },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn io_error<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io { action, path: path.to_path_buf(), source }
}

/// The volumes of a node's pods, under one directory.
#[derive(Debug, Clone)]
pub struct PodVolumes {
    root: PathBuf,
}

impl PodVolumes {
    /// The volumes of node `node`'s pods under `state_dir`.
    pub fn new(state_dir: &Path, node: &str) -> Self {
        PodVolumes { root: state_dir.join("nodes").join(node).join("pods") }
    }

    fn pod_dir(&self, uid: &str) -> PathBuf {
        self.root.join(uid)
    }

    /// The directory of the pod `uid`, made if missing (0750, as down to its volumes): where
    /// its other files live (its hosts file, [`super::hosts`]), so that they go with it.
    pub fn pod_dir_made(&self, uid: &str) -> Result<PathBuf> {
        let dir = self.pod_dir(uid);
        for dir in [self.root.as_path(), &dir] {
            private_dir_all(dir)?;
        }
        Ok(dir)
    }

    /// Where volume `volume` of the pod `uid` lives on the node.
    pub fn volume_path(&self, uid: &str, volume: &Volume) -> PathBuf {
        let plugin = match volume.source() {
            Some(VolumeSource::HostPath(host_path)) => return PathBuf::from(&host_path.path),
            Some(VolumeSource::ConfigMap(_)) => "configmap",
            Some(VolumeSource::Secret(_)) => "secret",
            Some(VolumeSource::EmptyDir(_)) | None => "empty-dir",
        };
        self.pod_dir(uid).join("volumes").join(plugin).join(&volume.name)
    }

    /// Makes the directories down to volume `volume` of the pod `uid` readable by the agent
    /// alone (0750, as the kubelet keeps its pods' directories), and returns its path.
    pub fn volume_dir(&self, uid: &str, volume: &Volume) -> Result<PathBuf> {
        let path = self.volume_path(uid, volume);
        if matches!(volume.source(), Some(VolumeSource::HostPath(_))) {
            // The node's own path, not the agent's to close.
            return Ok(path);
        }
        let parent = path.parent().expect("a volume's path has a parent");
        for dir in [self.root.as_path(), &self.pod_dir(uid), &self.pod_dir(uid).join("volumes"), parent] {
            private_dir_all(dir)?;
        }
        Ok(path)
    }

    /// Makes the volumes that `container` mounts ready, and returns its mounts. Repeating it
    /// changes nothing: a volume made once is kept, with what the containers wrote in it. As
    /// in Kubernetes, ConfigMap and Secret volumes are always mounted read-only.
    pub fn mounts(&self, pod: &Pod, container: &Container) -> Result<Vec<Mount>> {
        let volumes: HashMap<&str, &Volume> = pod.spec.volumes.iter().map(|v| (v.name.as_str(), v)).collect();
        let uid = pod.metadata.uid.as_str();
        let mut mounts = Vec::with_capacity(container.volume_mounts.len());
        for (index, mount) in container.volume_mounts.iter().enumerate() {
            let set_up = |message: String| Error::SetUp { volume: mount.name.clone(), message };
            let volume = volumes.get(mount.name.as_str()).ok_or_else(|| set_up("the pod declares no such volume".into()))?;
            let mut read_only = mount.read_only;
            let path = match volume.source() {
                Some(VolumeSource::EmptyDir(empty_dir)) => {
                    let path = self.volume_dir(uid, volume)?;
                    let size = (empty_dir.size_limit > 0).then_some(empty_dir.size_limit);
                    set_up_empty_dir(&path, empty_dir.medium == MEDIUM_MEMORY, size).map_err(|e| set_up(e.to_string()))?;
                    path
                }
                Some(VolumeSource::HostPath(host_path)) => {
                    check_host_path(host_path).map_err(set_up)?;
                    self.volume_path(uid, volume)
                }
                // Written by `config_volumes::sync` before any container is made.
                Some(VolumeSource::ConfigMap(_) | VolumeSource::Secret(_)) => {
                    read_only = true;
                    self.volume_path(uid, volume)
                }
                None => return Err(set_up("the volume has no source".into())),
            };
            let source = match mount.sub_path.as_str() {
                "" => path,
                sub_path => {
                    let target =
                        self.pod_dir(uid).join(sub_path::DIRECTORY).join(&mount.name).join(&container.name).join(index.to_string());
                    sub_path::bind(&path, sub_path, &target).map_err(|detail| {
                        // As the kubelet: the detail names the node's paths, so only the log has it.
                        tracing::warn!(pod = %pod.metadata.key(), container = %container.name, volume = %mount.name, "{detail}");
                        Error::SubPath { volume: mount.name.clone(), container: container.name.clone() }
                    })?
                }
            };
            mounts.push(Mount { source, target: mount.mount_path.clone(), read_only });
        }
        Ok(mounts)
    }

    /// Unmounts and removes the volumes of the pod `uid` (nothing when it has none). Its
    /// containers must be gone: a running one would keep its mounts.
    pub fn tear_down(&self, uid: &str) -> Result<()> {
        let dir = self.pod_dir(uid);
        if !dir.exists() {
            return Ok(());
        }
        for mount_point in mounted_under(&dir) {
            unmount(&mount_point)?;
        }
        std::fs::remove_dir_all(&dir).map_err(io_error("remove the volumes of pod", &dir))
    }

    /// The uids of the pods that have volumes on this node.
    pub fn pods_with_volumes(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.root) else { return Vec::new() };
        entries.flatten().filter_map(|e| e.file_name().to_str().map(str::to_string)).collect()
    }
}

/// An emptyDir: a directory anyone in the pod may write, as the kubelet makes it (0777),
/// with a tmpfs on it when it is held in memory (of `size` bytes, else the tmpfs default,
/// half the node's memory).
fn set_up_empty_dir(path: &Path, memory: bool, size: Option<i64>) -> Result<()> {
    std::fs::create_dir_all(path).map_err(io_error("create the directory", path))?;
    if memory {
        let options = match size {
            Some(bytes) => format!("mode=0777,size={bytes}"),
            None => "mode=0777".to_string(),
        };
        mount_tmpfs_once(path, &options)?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).map_err(io_error("open up the directory", path))
}

/// A hostPath as its `type` wants it: a directory or file made if it should be, else
/// present and of that kind.
fn check_host_path(source: &HostPathVolumeSource) -> Result<(), String> {
    let path = Path::new(&source.path);
    let found = std::fs::metadata(path);
    let kind = |ok: bool, what: &str| if ok { Ok(()) } else { Err(format!("hostPath type check failed: {} is not {what}", source.path)) };
    match (source.type_.as_str(), found) {
        ("", _) => Ok(()),
        ("DirectoryOrCreate", Err(_)) => {
            std::fs::create_dir_all(path).map_err(|e| format!("cannot create directory {}: {e}", source.path))?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).map_err(|e| e.to_string())
        }
        ("FileOrCreate", Err(_)) => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("cannot create directory {}: {e}", parent.display()))?;
            }
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot create file {}: {e}", source.path))?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).map_err(|e| e.to_string())
        }
        (_, Err(e)) => Err(format!("hostPath type check failed: {} does not exist ({e})", source.path)),
        ("DirectoryOrCreate" | "Directory", Ok(m)) => kind(m.is_dir(), "a directory"),
        ("FileOrCreate" | "File", Ok(m)) => kind(m.is_file(), "a file"),
        ("Socket", Ok(m)) => kind(m.file_type().is_socket(), "a socket"),
        ("CharDevice", Ok(m)) => kind(m.file_type().is_char_device(), "a character device"),
        ("BlockDevice", Ok(m)) => kind(m.file_type().is_block_device(), "a block device"),
        (other, Ok(_)) => Err(format!("unknown hostPath type {other:?}")),
    }
}

/// The mount points at or under `dir`, deepest first, from the agent's mount table.
fn mounted_under(dir: &Path) -> Vec<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<PathBuf> = table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(field.replace("\\040", " ")))
        .filter(|point| point.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Io {
        action: "mount",
        path: path.to_path_buf(),
        source: io::Error::from(io::ErrorKind::InvalidInput),
    })
}

/// Whether something is mounted at `path`.
pub(super) fn is_mount_point(path: &Path) -> bool {
    mounted_under(path).iter().any(|m| m == path)
}

/// Makes `path` a directory that only its owner and group may enter (0750), as are those it
/// makes on the way.
pub(super) fn private_dir_all(path: &Path) -> Result<()> {
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o750)
        .create(path)
        .map_err(io_error("create the directory", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o750)).map_err(io_error("close the directory", path))
}

/// Makes `path` a directory with a tmpfs on it, unless one is there already.
pub(super) fn mount_tmpfs_once(path: &Path, options: &str) -> Result<()> {
    std::fs::create_dir_all(path).map_err(io_error("create the directory", path))?;
    if is_mount_point(path) {
        return Ok(());
    }
    let target = c_path(path)?;
    let options = CString::new(options).expect("mount options hold no NUL");
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let done = unsafe {
        libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), libc::MS_NOSUID | libc::MS_NODEV, options.as_ptr().cast())
    };
    if done != 0 {
        return Err(io_error("mount a tmpfs on", path)(io::Error::last_os_error()));
    }
    Ok(())
}

/// Detaches the mount at `path` (lazily: a process still in it keeps it until it leaves).
pub(super) fn unmount(path: &Path) -> Result<()> {
    let target = c_path(path)?;
    // SAFETY: `target` is a NUL-terminated string that outlives the call.
    if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } != 0 {
        let error = io::Error::last_os_error();
        // Not mounted (any more): nothing to undo.
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err(io_error("unmount", path)(error));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use shared::model::{EmptyDirVolumeSource, VolumeMount};

    use super::*;
    use crate::fixtures::pod;

    fn volume(name: &str, empty_dir: EmptyDirVolumeSource) -> Volume {
        Volume { name: name.into(), empty_dir: Some(empty_dir), ..Volume::default() }
    }

    fn mount(name: &str, path: &str, sub_path: &str, read_only: bool) -> VolumeMount {
        VolumeMount { name: name.into(), mount_path: path.into(), sub_path: sub_path.into(), read_only }
    }

    #[test]
    fn an_empty_dir_belongs_to_the_pod_and_goes_with_it() {
        let state = tempfile::tempdir().unwrap();
        let volumes = PodVolumes::new(state.path(), "n1");
        let mut pod = pod();
        pod.spec.volumes = vec![volume("data", EmptyDirVolumeSource::default())];
        pod.spec.containers[0].volume_mounts = vec![mount("data", "/data", "", false), mount("data", "/logs", "logs/web", true)];
        let mounts = volumes.mounts(&pod, &pod.spec.containers[0]).unwrap();
        let pod_dir = state.path().join("nodes/n1/pods/1234-abcd-5678");
        let dir = pod_dir.join("volumes/empty-dir/data");
        let bound = pod_dir.join("volume-subpaths/data/web/1");
        assert_eq!(mounts[0], Mount { source: dir.clone(), target: "/data".into(), read_only: false });
        assert_eq!(mounts[1], Mount { source: bound.clone(), target: "/logs".into(), read_only: true });
        assert!(dir.join("logs/web").is_dir(), "a missing subPath is made");
        std::fs::write(dir.join("logs/web/seen"), "through the bind").unwrap();
        assert_eq!(std::fs::read_to_string(bound.join("seen")).unwrap(), "through the bind", "the subPath is bound on the agent's target");
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o777);
        for private in [state.path().join("nodes/n1/pods"), pod_dir.clone(), pod_dir.join("volumes"), pod_dir.join("volume-subpaths")] {
            let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o750, "{} is not for other users of the node", private.display());
        }

        std::fs::write(dir.join("kept"), "written by a container").unwrap();
        assert_eq!(volumes.mounts(&pod, &pod.spec.containers[0]).unwrap(), mounts, "the same mounts again");
        assert!(dir.join("kept").exists(), "a second set-up keeps what the pod wrote");
        assert_eq!(volumes.pods_with_volumes(), ["1234-abcd-5678"]);
        volumes.tear_down(&pod.metadata.uid).unwrap();
        assert!(!is_mount_point(&bound), "the subPath's bind is undone");
        assert!(!state.path().join("nodes/n1/pods/1234-abcd-5678").exists());
        assert!(volumes.pods_with_volumes().is_empty());
        volumes.tear_down(&pod.metadata.uid).expect("tearing down twice is fine");
    }

    #[test]
    fn a_sub_path_that_a_container_linked_outside_the_volume_is_refused() {
        let state = tempfile::tempdir().unwrap();
        let volumes = PodVolumes::new(state.path(), "n1");
        let mut pod = pod();
        pod.spec.volumes = vec![volume("data", EmptyDirVolumeSource::default())];
        pod.spec.containers[0].volume_mounts = vec![mount("data", "/data", "", false)];
        volumes.mounts(&pod, &pod.spec.containers[0]).unwrap();
        let dir = volumes.volume_path(&pod.metadata.uid, &pod.spec.volumes[0]);
        std::os::unix::fs::symlink("/etc", dir.join("escape")).unwrap();
        std::fs::create_dir(dir.join("inside")).unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("inside/deeper")).unwrap();
        for sub_path in ["escape", "escape/ssl", "inside/deeper", "inside/deeper/made"] {
            pod.spec.containers[0].volume_mounts = vec![mount("data", "/etc-of-the-node", sub_path, false)];
            let refused = volumes.mounts(&pod, &pod.spec.containers[0]).unwrap_err().to_string();
            assert_eq!(refused, "failed to prepare subPath for volumeMount \"data\" of container \"web\"", "{sub_path}");
        }
        assert!(!Path::new("/etc/ssl/made").exists());
        // A link that stays inside the volume is followed, as the kubelet follows it.
        std::os::unix::fs::symlink("inside", dir.join("alias")).unwrap();
        pod.spec.containers[0].volume_mounts = vec![mount("data", "/alias", "alias", false)];
        volumes.mounts(&pod, &pod.spec.containers[0]).unwrap();
        volumes.tear_down(&pod.metadata.uid).unwrap();
    }

    #[test]
    fn a_sub_path_bound_once_is_not_redirected_by_a_link_made_later() {
        let state = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let volumes = PodVolumes::new(state.path(), "n1");
        let mut pod = pod();
        pod.spec.volumes = vec![volume("data", EmptyDirVolumeSource::default())];
        pod.spec.containers[0].volume_mounts = vec![mount("data", "/esc", "esc", false)];
        let bound = volumes.mounts(&pod, &pod.spec.containers[0]).unwrap().remove(0).source;
        let dir = volumes.volume_path(&pod.metadata.uid, &pod.spec.volumes[0]);
        // What a container of the pod can do to the volume once the mount is made.
        std::fs::remove_dir(dir.join("esc")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.join("esc")).unwrap();
        assert!(std::fs::write(bound.join("written"), "x").is_err(), "the bind holds the removed directory, not the link");
        assert!(!outside.path().join("written").exists());
        let refused = volumes.mounts(&pod, &pod.spec.containers[0]).unwrap_err();
        assert!(matches!(refused, Error::SubPath { .. }), "{refused}");
        volumes.tear_down(&pod.metadata.uid).unwrap();
    }

    #[test]
    fn config_map_and_secret_volumes_are_mounted_read_only() {
        use shared::model::{ConfigMapVolumeSource, SecretVolumeSource};

        let state = tempfile::tempdir().unwrap();
        let volumes = PodVolumes::new(state.path(), "n1");
        let mut pod = pod();
        let config_map = ConfigMapVolumeSource { name: "site".into(), ..Default::default() };
        let secret = SecretVolumeSource { secret_name: "db".into(), ..Default::default() };
        pod.spec.volumes = vec![
            Volume { name: "cm".into(), config_map: Some(config_map), ..Volume::default() },
            Volume { name: "secret".into(), secret: Some(secret), ..Volume::default() },
        ];
        pod.spec.containers[0].volume_mounts = vec![mount("cm", "/cm", "", false), mount("secret", "/secret", "", false)];
        let mounts = volumes.mounts(&pod, &pod.spec.containers[0]).unwrap();
        assert_eq!(mounts.iter().map(|m| m.read_only).collect::<Vec<_>>(), [true, true]);
    }

    #[test]
    fn a_host_path_is_checked_against_its_type() {
        let state = tempfile::tempdir().unwrap();
        let host = |path: &Path, type_: &str| HostPathVolumeSource { path: path.to_string_lossy().into_owned(), type_: type_.into() };
        let made = state.path().join("made/here");
        check_host_path(&host(&made, "DirectoryOrCreate")).unwrap();
        assert!(made.is_dir());
        let file = state.path().join("made/file");
        check_host_path(&host(&file, "FileOrCreate")).unwrap();
        assert!(file.is_file());
        check_host_path(&host(&made, "Directory")).unwrap();
        check_host_path(&host(&file, "File")).unwrap();
        assert_eq!(
            check_host_path(&host(&file, "Directory")).unwrap_err(),
            format!("hostPath type check failed: {} is not a directory", file.display())
        );
        assert!(check_host_path(&host(&state.path().join("missing"), "File")).unwrap_err().contains("does not exist"));
        check_host_path(&host(&state.path().join("missing"), "")).expect("no type checks nothing");
    }
}
