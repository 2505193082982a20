//! A `subPath` mount made safe as the kubelet's `pkg/volume/util/subpath` makes it: a
//! container may turn any name in a volume into a symbolic link, so the runtime is never
//! handed a path inside the volume. The path is resolved once and refused unless it stays
//! inside the volume, then opened one component at a time without following links, and what
//! was opened is bind-mounted (through `/proc/self/fd/N`) on a target of the agent's own
//! (`<pod>/volume-subpaths/<volume>/<container>/<index>`), which the runtime binds in turn.
//! A link made after the check cannot redirect a mount that already holds the file itself.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// The directory of the pod under which subPath mounts are bound, as the kubelet names it.
pub const DIRECTORY: &str = "volume-subpaths";

/// Binds `sub_path` of the volume at `volume` on `target`, making it as a directory (with the
/// volume's mode) if it is missing; returns `target`. A target that already holds the same
/// file is kept; one that holds another (a ConfigMap's newer version) is bound again.
pub fn bind(volume: &Path, sub_path: &str, target: &Path) -> Result<PathBuf, String> {
    let root = volume.canonicalize().map_err(|e| format!("cannot resolve the volume {}: {e}", volume.display()))?;
    make_missing_dirs(&root, sub_path)?;
    let resolved =
        root.join(sub_path).canonicalize().map_err(|e| format!("cannot resolve subPath {sub_path:?} in {}: {e}", root.display()))?;
    let inside = resolved
        .strip_prefix(&root)
        .map_err(|_| format!("subPath {sub_path:?} resolves to {}, outside the volume {}", resolved.display(), root.display()))?;
    let opened = open_no_follow(&root, inside, libc::O_PATH)?;
    let found = fstat(&opened).map_err(|e| format!("cannot read what {} holds: {e}", resolved.display()))?;
    if super::volumes::is_mount_point(target) {
        let held = std::fs::metadata(target).map_err(|e| format!("cannot read {}: {e}", target.display()))?;
        if (held.dev(), held.ino()) == (found.st_dev, found.st_ino) {
            return Ok(target.to_path_buf());
        }
        super::volumes::unmount(target).map_err(|e| e.to_string())?;
    }
    let parent = target.parent().expect("a subPath target has a parent");
    super::volumes::private_dir_all(parent).map_err(|e| e.to_string())?;
    let made = match found.st_mode & libc::S_IFMT == libc::S_IFDIR {
        true => std::fs::create_dir(target).or_else(|e| if e.kind() == io::ErrorKind::AlreadyExists { Ok(()) } else { Err(e) }),
        // A file is a target for anything that is not a directory.
        false => std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(target).map(drop),
    };
    made.map_err(|e| format!("cannot make the subPath target {}: {e}", target.display()))?;
    let source = c_string(&fd_path(&opened))?;
    let destination = c_string(target)?;
    // SAFETY: both are NUL-terminated strings that outlive the call; the other pointers are null.
    let done = unsafe { libc::mount(source.as_ptr(), destination.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) };
    if done != 0 {
        return Err(format!("cannot bind {} on {}: {}", resolved.display(), target.display(), io::Error::last_os_error()));
    }
    Ok(target.to_path_buf())
}

fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

fn c_string(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| format!("{} holds a NUL byte", path.display()))
}

fn open_at(dir: Option<&OwnedFd>, name: &Path, flags: i32) -> io::Result<OwnedFd> {
    let name = CString::new(name.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let dir = dir.map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd);
    // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is an open descriptor or AT_FDCWD.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `inside` under `root` one component at a time, following no link: directories on the
/// way, then the last component with `last_flags`.
fn open_no_follow(root: &Path, inside: &Path, last_flags: i32) -> Result<OwnedFd, String> {
    let refused = |e: io::Error| format!("cannot open {} without following links: {e}", root.join(inside).display());
    let mut current = open_at(None, root, libc::O_PATH | libc::O_DIRECTORY).map_err(refused)?;
    let names: Vec<&std::ffi::OsStr> = inside.components().filter(|c| matches!(c, Component::Normal(_))).map(|c| c.as_os_str()).collect();
    for (i, name) in names.iter().enumerate() {
        let flags = if i + 1 == names.len() { last_flags } else { libc::O_PATH | libc::O_DIRECTORY };
        current = open_at(Some(&current), Path::new(name), flags).map_err(refused)?;
    }
    // An O_PATH descriptor of a link is the link itself: it was made after the path was resolved.
    if fstat(&current).map_err(refused)?.st_mode & libc::S_IFMT == libc::S_IFLNK {
        return Err(refused(io::Error::other("it is a symbolic link")));
    }
    Ok(current)
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value for fstat to fill.
    let mut found: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `found` outlives the call.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut found) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(found)
}

/// Makes the missing directories of `sub_path` under `root` one at a time, each made in the
/// directory opened before it without following links, with the volume's mode.
fn make_missing_dirs(root: &Path, sub_path: &str) -> Result<(), String> {
    let mode = std::fs::metadata(root).map_err(|e| format!("cannot read {}: {e}", root.display()))?.permissions().mode() & 0o7777;
    let mut existing = root.to_path_buf();
    let mut missing = Vec::new();
    for component in Path::new(sub_path).components() {
        let next = existing.join(component);
        if missing.is_empty() && std::fs::symlink_metadata(&next).is_ok() {
            existing = next;
        } else {
            missing.push(component.as_os_str().to_owned());
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let resolved = existing.canonicalize().map_err(|e| format!("cannot resolve {}: {e}", existing.display()))?;
    let inside =
        resolved.strip_prefix(root).map_err(|_| format!("subPath {sub_path:?} resolves to {}, outside the volume", resolved.display()))?;
    let mut dir = open_no_follow(root, inside, libc::O_PATH | libc::O_DIRECTORY)?;
    for name in missing {
        let c_name = CString::new(name.as_bytes()).map_err(|_| format!("subPath {sub_path:?} holds a NUL byte"))?;
        // SAFETY: `c_name` is NUL-terminated and outlives the call; `dir` is an open directory.
        if unsafe { libc::mkdirat(dir.as_raw_fd(), c_name.as_ptr(), mode) } != 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::AlreadyExists {
                return Err(format!("cannot make subPath {sub_path:?}: {error}"));
            }
        }
        dir = open_at(Some(&dir), Path::new(&name), libc::O_RDONLY | libc::O_DIRECTORY)
            .map_err(|e| format!("cannot open subPath {sub_path:?}: {e}"))?;
        // mkdirat's mode passes through the umask; the kubelet sets the volume's mode on.
        // SAFETY: `dir` is an open directory.
        if unsafe { libc::fchmod(dir.as_raw_fd(), mode) } != 0 {
            return Err(format!("cannot set the mode of subPath {sub_path:?}: {}", io::Error::last_os_error()));
        }
    }
    Ok(())
}
