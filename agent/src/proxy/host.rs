//! What the service proxy does to the host: reads which of its chains exist
//! (`iptables-save`), writes its nat and filter tables in one `iptables-restore --noflush`
//! run (a commit per table), keeps the jumps from the built-in chains to its own, and lets
//! NodePorts be reached on 127.0.0.1.
//! Each call blocks: run it off the async threads.

use std::io::Write as _;
use std::process::{Command, Stdio};

use super::rules::{Existing, Scope, Table};

/// kube-proxy's setting: DNAT of 127.0.0.1 to a pod needs the kernel to route a loopback
/// source off the loopback interface (the proxy then masquerades it to the bridge address).
pub const ROUTE_LOCALNET: &str = "/proc/sys/net/ipv4/conf/all/route_localnet";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot run {command} (the service proxy needs iptables; Debian: apt-get install iptables): {source}")]
    Spawn { command: &'static str, source: std::io::Error },
    #[error("{command} failed: {message}")]
    Failed { command: String, message: String },
    #[error("cannot set {ROUTE_LOCALNET} (NodePorts on 127.0.0.1 need it): {0}")]
    RouteLocalnet(std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn run(command: &'static str, args: &[&str], input: Option<&str>) -> Result<String> {
    let spawn = |source| Error::Spawn { command, source };
    let mut child = Command::new(command)
        .args(args)
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn)?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).map_err(spawn)?;
    }
    let output = child.wait_with_output().map_err(spawn)?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(Error::Failed {
        command: format!("{command} {}", args.join(" ")),
        message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
    })
}

/// The chains of `scope` that table `name` holds now.
fn existing_chains(scope: &Scope, name: &str) -> Result<Vec<String>> {
    let saved = run("iptables-save", &["-t", name], None)?;
    Ok(saved
        .lines()
        .filter_map(|line| line.strip_prefix(':')?.split_whitespace().next())
        .filter(|chain| scope.owns(chain))
        .map(str::to_string)
        .collect())
}

/// The chains of `scope` the nat and filter tables hold now.
fn existing(scope: &Scope) -> Result<Existing> {
    Ok(Existing { nat: existing_chains(scope, "nat")?, filter: existing_chains(scope, "filter")? })
}

/// Makes the nat and filter tables hold `table` and none of `scope`'s other chains, a commit
/// each; the built-in chains jump to it (jumps added once the chains exist, removed before
/// they go).
pub fn apply(scope: &Scope, table: &Table) -> Result<()> {
    let existing = existing(scope)?;
    let stale = Existing {
        nat: existing.nat.into_iter().filter(|chain| !table.nat.chains.contains(chain)).collect(),
        filter: existing.filter.into_iter().filter(|chain| !table.filter.chains.contains(chain)).collect(),
    };
    if table.is_empty() {
        for jump in jumps(scope) {
            jump.remove()?;
        }
    }
    if !table.is_empty() || stale != Existing::default() {
        run("iptables-restore", &["-w", "--noflush"], Some(&table.restore_text(&stale)))?;
    }
    if !table.is_empty() {
        for jump in jumps(scope) {
            jump.ensure()?;
        }
    }
    Ok(())
}

/// Lets DNAT send what was addressed to 127.0.0.1 elsewhere, as kube-proxy sets it.
pub fn allow_localhost_node_ports() -> Result<()> {
    std::fs::write(ROUTE_LOCALNET, "1").map_err(Error::RouteLocalnet)
}

/// A rule in a built-in chain that jumps to one of the proxy's.
struct Jump {
    table: &'static str,
    chain: &'static str,
    spec: Vec<String>,
}

/// In nat, PREROUTING (from pods and other hosts) and OUTPUT (from the host) go through the
/// Services, POSTROUTING through the masquerade. In filter, new connections go through the
/// rejects, as kube-proxy hooks them: to cluster IPs from OUTPUT and FORWARD, to node ports
/// from INPUT and FORWARD. Each first in its chain, before Docker's and CNI's rules.
fn jumps(scope: &Scope) -> [Jump; 7] {
    let jump = |table, chain, matches: &[&str], comment: &str, target: String| Jump {
        table,
        chain,
        spec: matches.iter().copied().chain(["-m", "comment", "--comment", comment, "-j", &target]).map(String::from).collect(),
    };
    let portals = format!("shepherd service portals {}", scope.tag);
    let external = format!("shepherd externally-visible service portals {}", scope.tag);
    let new = ["-m", "conntrack", "--ctstate", "NEW"];
    [
        jump("nat", "PREROUTING", &[], &portals, scope.services_chain()),
        jump("nat", "OUTPUT", &[], &portals, scope.services_chain()),
        jump("nat", "POSTROUTING", &[], &format!("shepherd service postrouting {}", scope.tag), scope.postrouting_chain()),
        jump("filter", "OUTPUT", &new, &portals, scope.services_chain()),
        jump("filter", "FORWARD", &new, &portals, scope.services_chain()),
        jump("filter", "INPUT", &new, &external, scope.external_services_chain()),
        jump("filter", "FORWARD", &new, &external, scope.external_services_chain()),
    ]
}

impl Jump {
    fn exists(&self) -> Result<bool> {
        let mut args = vec!["-w", "-t", self.table, "-C", self.chain];
        args.extend(self.spec.iter().map(String::as_str));
        match run("iptables", &args, None) {
            Ok(_) => Ok(true),
            Err(Error::Failed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn ensure(&self) -> Result<()> {
        if self.exists()? {
            return Ok(());
        }
        let mut args = vec!["-w", "-t", self.table, "-I", self.chain, "1"];
        args.extend(self.spec.iter().map(String::as_str));
        run("iptables", &args, None).map(drop)
    }

    fn remove(&self) -> Result<()> {
        while self.exists()? {
            let mut args = vec!["-w", "-t", self.table, "-D", self.chain];
            args.extend(self.spec.iter().map(String::as_str));
            run("iptables", &args, None)?;
        }
        Ok(())
    }
}
