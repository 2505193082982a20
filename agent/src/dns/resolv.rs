//! Pods' `/etc/resolv.conf`, as the kubelet writes it for `dnsPolicy: ClusterFirst`: the
//! node's DNS as the nameserver, the search list of the pod's namespace, `ndots:5`. One file
//! per namespace under the agent's state directory, bind-mounted read-only into each of the
//! pod's containers (they share their sandbox's network, not its files).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The resolv.conf of a pod in `namespace` of the cluster `domain`, asking `nameserver`.
pub fn resolv_conf(nameserver: IpAddr, namespace: &str, domain: &str) -> String {
    format!("nameserver {nameserver}\nsearch {namespace}.svc.{domain} svc.{domain} {domain}\noptions ndots:5\n")
}

/// The node's resolv.conf files, one per namespace.
#[derive(Debug, Clone)]
pub struct ResolvConfs {
    dir: PathBuf,
    nameserver: IpAddr,
    domain: String,
}

impl ResolvConfs {
    /// Files under `dir` naming `nameserver` in the cluster `domain`.
    pub fn new(dir: &Path, nameserver: IpAddr, domain: &str) -> ResolvConfs {
        ResolvConfs { dir: dir.to_path_buf(), nameserver, domain: domain.to_string() }
    }

    /// The file of `namespace`, written if it is missing or says something else. A namespace
    /// name is a DNS label, so it is a safe file name.
    pub fn for_namespace(&self, namespace: &str) -> std::io::Result<PathBuf> {
        let path = self.dir.join(namespace).join("resolv.conf");
        let text = resolv_conf(self.nameserver, namespace, &self.domain);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            std::fs::create_dir_all(path.parent().expect("a file has a directory"))?;
            // Renamed into place: a container that has the old file mounted keeps it whole.
            let partial = path.with_extension("partial");
            std::fs::write(&partial, text)?;
            std::fs::rename(&partial, &path)?;
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_asks_the_node_and_searches_its_namespace_first_with_ndots_5() {
        assert_eq!(
            resolv_conf("10.77.0.3".parse().unwrap(), "shop", "cluster.local"),
            "nameserver 10.77.0.3\nsearch shop.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
        );
    }

    #[test]
    fn each_namespace_has_its_file_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let files = ResolvConfs::new(dir.path(), "10.77.0.3".parse().unwrap(), "cluster.local");
        let shop = files.for_namespace("shop").unwrap();
        assert_eq!(shop, dir.path().join("shop/resolv.conf"));
        assert!(std::fs::read_to_string(&shop).unwrap().contains("search shop.svc.cluster.local"));
        use std::os::unix::fs::MetadataExt;
        let written = std::fs::metadata(&shop).unwrap().ino();
        assert_eq!(files.for_namespace("shop").unwrap(), shop);
        assert_eq!(std::fs::metadata(&shop).unwrap().ino(), written, "unchanged, not written again");
        let moved = ResolvConfs::new(dir.path(), "10.77.0.9".parse().unwrap(), "cluster.local");
        assert!(std::fs::read_to_string(moved.for_namespace("shop").unwrap()).unwrap().starts_with("nameserver 10.77.0.9\n"));
        assert_ne!(std::fs::metadata(&shop).unwrap().ino(), written, "a new file renamed into place");
    }
}
