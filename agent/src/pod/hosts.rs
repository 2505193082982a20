//! A pod's hostname and its `/etc/hosts`, as the kubelet makes them. The hostname is the
//! pod's name, cut to a DNS label's 63 characters. The hosts file names localhost and the
//! pod's address with its hostname; it is written in the pod's directory (it goes with the
//! pod) and bind-mounted into each container that joins the pod's sandbox, beside a
//! `/etc/hostname` that says the same, in place of the files Docker shares from the sandbox,
//! which a warm sandbox made before its pod fills with its own container id. A container
//! without a sandbox is made with the hostname, and Docker's files name it.

use std::io;
use std::path::Path;

use shared::model::{Container, Pod};

use super::volumes::{PodVolumes, Result};
use crate::runtime::Mount;

/// The longest hostname: a DNS label.
const MAX_HOSTNAME: usize = 63;

/// Where the files are mounted in a container.
const ETC_HOSTS: &str = "/etc/hosts";
const ETC_HOSTNAME: &str = "/etc/hostname";

/// The pod's hostname, as the kubelet derives it: its name, cut to 63 characters without
/// the `-` or `.` the cut leaves at its end.
pub fn hostname(pod: &Pod) -> String {
    let name = pod.metadata.name.as_str();
    match name.char_indices().nth(MAX_HOSTNAME) {
        Some((cut, _)) => name[..cut].trim_end_matches(['-', '.']).to_string(),
        None => name.to_string(),
    }
}

/// The kubelet's managed hosts file of a pod at `ip` called `hostname`.
pub fn hosts_file(ip: &str, hostname: &str) -> String {
    format!(
        "# Kubernetes-managed hosts file.\n\
         127.0.0.1\tlocalhost\n\
         ::1\tlocalhost ip6-localhost ip6-loopback\n\
         fe00::0\tip6-localnet\n\
         fe00::0\tip6-mcastprefix\n\
         fe00::1\tip6-allnodes\n\
         fe00::2\tip6-allrouters\n\
         {ip}\t{hostname}\n"
    )
}

/// Writes the hosts and hostname files of the pod at `ip` in its directory, and returns
/// the mounts of those `container` does not mount a volume on (as the kubelet leaves a
/// user's `/etc/hosts` alone). Each is rewritten in place when it says something else, so
/// that every container that has it mounted sees the same file; mounted read-write, as the
/// kubelet mounts its hosts file.
pub fn mounts(volumes: &PodVolumes, pod: &Pod, container: &Container, ip: &str) -> Result<Vec<Mount>> {
    let hostname = hostname(pod);
    let files = [(ETC_HOSTS, "etc-hosts", hosts_file(ip, &hostname)), (ETC_HOSTNAME, "etc-hostname", format!("{hostname}\n"))];
    let mut mounts = Vec::with_capacity(files.len());
    for (target, file, text) in files {
        if container.volume_mounts.iter().any(|m| m.mount_path.trim_end_matches('/') == target) {
            continue;
        }
        let path = volumes.pod_dir_made(&pod.metadata.uid)?.join(file);
        write_if_changed(&path, &text).map_err(|source| super::volumes::Error::Io { action: "write", path: path.clone(), source })?;
        mounts.push(Mount { source: path, target: target.to_string(), read_only: false });
    }
    Ok(mounts)
}

fn write_if_changed(path: &Path, text: &str) -> io::Result<()> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(());
    }
    std::fs::write(path, text)?;
    // As the kubelet's: readable by every user of the container.
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
}

#[cfg(test)]
mod tests {
    use shared::model::VolumeMount;

    use super::*;
    use crate::fixtures::pod;

    fn named(name: &str) -> Pod {
        let mut pod = pod();
        pod.metadata.name = name.into();
        pod
    }

    #[test]
    fn the_hostname_is_the_pods_name_cut_to_63_characters_without_a_trailing_dash_or_dot() {
        assert_eq!(hostname(&named("web")), "web");
        let long = "a".repeat(70);
        assert_eq!(hostname(&named(&long)), "a".repeat(63));
        let exact = "b".repeat(63);
        assert_eq!(hostname(&named(&exact)), exact);
        let cut_at_dashes = format!("{}-.-tail", "c".repeat(60));
        assert_eq!(hostname(&named(&cut_at_dashes)), "c".repeat(60));
    }

    #[test]
    fn the_hosts_file_is_the_kubelets_with_the_pods_address_last() {
        let text = hosts_file("10.77.0.5", "web");
        assert!(text.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"));
        assert!(text.ends_with("fe00::2\tip6-allrouters\n10.77.0.5\tweb\n"), "{text}");
        assert_eq!(text.lines().count(), 8);
    }

    #[test]
    fn the_files_are_written_once_in_the_pods_directory_and_skipped_under_a_volume() {
        let state = tempfile::tempdir().unwrap();
        let volumes = PodVolumes::new(state.path(), "n1");
        let mut pod = named("web");
        let written = mounts(&volumes, &pod, &pod.spec.containers[0], "10.77.0.5").unwrap();
        let targets: Vec<&str> = written.iter().map(|m| m.target.as_str()).collect();
        assert_eq!(targets, [ETC_HOSTS, ETC_HOSTNAME]);
        assert!(written.iter().all(|m| !m.read_only && m.source.starts_with(state.path().join("nodes/n1/pods/1234-abcd-5678"))));
        assert_eq!(std::fs::read_to_string(&written[0].source).unwrap(), hosts_file("10.77.0.5", "web"));
        assert_eq!(std::fs::read_to_string(&written[1].source).unwrap(), "web\n");

        use std::os::unix::fs::MetadataExt;
        let inode = std::fs::metadata(&written[0].source).unwrap().ino();
        let moved = mounts(&volumes, &pod, &pod.spec.containers[0], "10.77.0.9").unwrap();
        assert_eq!(std::fs::metadata(&moved[0].source).unwrap().ino(), inode, "rewritten in place, for the containers that mount it");
        assert!(std::fs::read_to_string(&moved[0].source).unwrap().ends_with("10.77.0.9\tweb\n"));

        pod.spec.containers[0].volume_mounts =
            vec![VolumeMount { name: "own".into(), mount_path: "/etc/hosts".into(), ..Default::default() }];
        let kept = mounts(&volumes, &pod, &pod.spec.containers[0], "10.77.0.9").unwrap();
        assert_eq!(kept.iter().map(|m| m.target.as_str()).collect::<Vec<_>>(), [ETC_HOSTNAME], "the user's /etc/hosts is left alone");
        volumes.tear_down(&pod.metadata.uid).unwrap();
        assert!(!written[0].source.exists(), "the files go with the pod");
    }
}
