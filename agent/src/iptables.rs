//! The node-wide iptables rules of the CNI pod network, in place of per-pod ones (as
//! Kubernetes' kubenet does): one masquerade rule for pod traffic that leaves the pod subnet,
//! and FORWARD accept rules for the pod bridge, whose policy Docker sets to DROP. Every agent
//! on a host installs the same rules: each is checked (`iptables -C`) and added only when
//! missing, under a lock the host's agents share. They stay when the agent stops.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

use crate::subnet::Subnet;

/// What the host's agents lock while they check and add rules, so that two starting at once
/// add each rule once.
const LOCK: &str = "/run/shepherd-agent-iptables.lock";
/// Marks the rules as Shepherd's in `iptables -S`.
const COMMENT: &str = "shepherd pod network";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot run iptables (the CNI pod network needs it; Debian: apt-get install iptables): {0}")]
    Spawn(std::io::Error),
    #[error("cannot lock {}: {source}", .path.display())]
    Lock { path: std::path::PathBuf, source: std::io::Error },
    #[error("iptables cannot add the rule `{rule}`: {message}")]
    Add { rule: String, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One rule: its table, its chain and what it matches and does, in the order `iptables -S`
/// prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub table: &'static str,
    pub chain: &'static str,
    pub spec: Vec<String>,
}

impl Rule {
    /// `matches`, Shepherd's comment, then `-j target`: the order `iptables -S` prints.
    fn new(table: &'static str, chain: &'static str, matches: &[&str], target: &str) -> Rule {
        let spec = matches.iter().copied().chain(["-m", "comment", "--comment", COMMENT, "-j", target]).map(String::from).collect();
        Rule { table, chain, spec }
    }

    fn run(&self, action: &[&str]) -> Result<std::process::Output> {
        Command::new("iptables").args(["-w", "-t", self.table]).args(action).args(&self.spec).output().map_err(Error::Spawn)
    }

    fn exists(&self) -> Result<bool> {
        Ok(self.run(&["-C", self.chain])?.status.success())
    }

    /// FORWARD rules go first, before anything a host firewall appends (Docker puts its own
    /// DOCKER-USER jump back above them when it restarts); the masquerade rule goes last.
    fn add(&self) -> Result<()> {
        let output = if self.table == "filter" { self.run(&["-I", self.chain, "1"])? } else { self.run(&["-A", self.chain])? };
        if output.status.success() {
            return Ok(());
        }
        Err(Error::Add { rule: self.to_string(), message: String::from_utf8_lossy(&output.stderr).trim().to_string() })
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let spec: Vec<String> = self.spec.iter().map(|s| if s.contains(' ') { format!("{s:?}") } else { s.clone() }).collect();
        write!(f, "-t {} -A {} {}", self.table, self.chain, spec.join(" "))
    }
}

/// The rules pods on `bridge` with addresses from `subnet` need:
/// - masquerade what leaves the subnet through another interface (the bridge plugin's
///   `ipMasq` did it per pod; multicast excepted, as it does);
/// - accept what pods send, replies to them, and connections a host port's DNAT sends to
///   them (the firewall plugin accepted the first two per pod).
pub fn rules(subnet: &Subnet, bridge: &str) -> Vec<Rule> {
    let subnet = subnet.to_string();
    vec![
        Rule::new("nat", "POSTROUTING", &["-s", &subnet, "!", "-d", "224.0.0.0/4", "!", "-o", bridge], "MASQUERADE"),
        Rule::new("filter", "FORWARD", &["-s", &subnet, "-i", bridge], "ACCEPT"),
        Rule::new(
            "filter",
            "FORWARD",
            &["-d", &subnet, "-o", bridge, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED,DNAT"],
            "ACCEPT",
        ),
    ]
}

/// Adds whichever of `rules` are missing; returns how many were.
pub fn ensure(rules: &[Rule]) -> Result<usize> {
    let lock = Lock::take(Path::new(LOCK))?;
    let mut added = 0;
    for rule in rules {
        if !rule.exists()? {
            rule.add()?;
            added += 1;
        }
    }
    drop(lock);
    Ok(added)
}

/// An exclusive `flock` on a file, released when the file closes (dropped, or the process dies).
#[derive(Debug)]
pub(crate) struct Lock {
    held: std::fs::File,
    path: std::path::PathBuf,
}

impl Lock {
    /// Waits until the lock is ours.
    fn take(path: &Path) -> Result<Lock> {
        Self::flock(path, libc::LOCK_EX).map(|lock| lock.expect("a blocking flock returns only once taken"))
    }

    /// The lock if no one holds it, else `None`.
    pub(crate) fn try_take(path: &Path) -> Result<Option<Lock>> {
        Self::flock(path, libc::LOCK_EX | libc::LOCK_NB)
    }

    /// Lets the lock go and removes its file, so that locks no one will ask for again do not
    /// pile up. Whoever opened the file before it went takes a lock on a file no one else
    /// finds, which [`Lock::flock`] sees, and opens the path anew.
    pub(crate) fn remove(self) {
        // Already gone is as good.
        let _ = std::fs::remove_file(&self.path);
        drop(self.held);
    }

    fn flock(path: &Path, operation: libc::c_int) -> Result<Option<Lock>> {
        use std::os::unix::fs::MetadataExt;
        let failed = |source| Error::Lock { path: path.to_path_buf(), source };
        loop {
            let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).map_err(failed)?;
            // SAFETY: a valid descriptor; without LOCK_NB, flock blocks until the lock is ours.
            if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
                let (ours, named) = (file.metadata().map_err(failed)?, std::fs::metadata(path).ok());
                if named.is_some_and(|named| (named.dev(), named.ino()) == (ours.dev(), ours.ino())) {
                    return Ok(Some(Lock { held: file, path: path.to_path_buf() }));
                }
                continue;
            }
            return match std::io::Error::last_os_error() {
                busy if busy.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
                error => Err(failed(error)),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_waited_for_while_its_file_is_removed_is_taken_on_the_file_the_path_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("proxy.lock");
        let first = Lock::try_take(&path).unwrap().expect("free");
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || Lock::take(&path).unwrap())
        };
        // Until the kernel lists the waiter as blocked on this very file.
        let inode = format!(":{} ", std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap()));
        let blocked = || std::fs::read_to_string("/proc/locks").unwrap().lines().any(|l| l.contains(" -> ") && l.contains(&inode));
        while !blocked() {
            std::thread::yield_now();
        }
        first.remove();
        let second = waiter.join().unwrap();
        assert!(Lock::try_take(&path).unwrap().is_none(), "the waiter holds the file at the path, not the removed one");
        second.remove();
        assert!(!path.exists());
        assert!(Lock::try_take(&path).unwrap().is_some(), "free again");
    }

    #[test]
    fn the_rules_cover_the_subnet_on_the_bridge_and_say_whose_they_are() {
        let rules = rules(&Subnet::parse("10.77.0.0/16").unwrap(), "shepherd0");
        let text: Vec<String> = rules.iter().map(Rule::to_string).collect();
        assert_eq!(
            text,
            [
                "-t nat -A POSTROUTING -s 10.77.0.0/16 ! -d 224.0.0.0/4 ! -o shepherd0 -m comment --comment \"shepherd pod network\" -j MASQUERADE",
                "-t filter -A FORWARD -s 10.77.0.0/16 -i shepherd0 -m comment --comment \"shepherd pod network\" -j ACCEPT",
                "-t filter -A FORWARD -d 10.77.0.0/16 -o shepherd0 -m conntrack --ctstate RELATED,ESTABLISHED,DNAT -m comment --comment \"shepherd pod network\" -j ACCEPT",
            ]
        );
    }
}
