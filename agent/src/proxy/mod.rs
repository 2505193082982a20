//! The node's service proxy, as kube-proxy's iptables mode: from the Services the node
//! watches ([`crate::services`]), with their ready endpoints, it programs the nat rules that
//! send a Service's cluster IP and port, and its NodePort on the node's addresses (127.0.0.1
//! included), to one of its pods, and the filter rules that refuse them at once while it has
//! none ([`rules`] builds them, [`host`] writes them).
//!
//! The whole table is written in one `iptables-restore --noflush` run of the proxy's own
//! chains, never flushed first: established connections keep their conntrack entries, and a
//! restarted agent writes the same rules over the old ones with no moment without them. A
//! Service's chains go when it goes; the top chains and the jumps stay while the proxy runs (they
//! hold the localnet guard) and go with `--remove-containers-on-exit`.
//!
//! Level-triggered, as kube-proxy's periodic sync: at each change of the Services, and every
//! [`SYNC_PERIOD`] whatever happened, the rules of all of them are built again and written
//! over what the host holds, so that a rule someone removed, or one a missed event left out,
//! comes back.
//!
//! One proxy per cluster on a host: the rules are the same for every node of a cluster (any
//! local address serves a NodePort, as kube-proxy's `--dst-type LOCAL`), so the agents of one
//! cluster that share a host (tests run several) take turns under a host lock per cluster,
//! and the one holding it programs; another takes over when it stops. Clusters' chains carry
//! their cluster's tag, so that two clusters on one host never touch each other's.
//!
//! Only nodes on the CNI pod network run it (the pod subnet is theirs; the simulated runtime
//! has no pods to reach). It sets `net.ipv4.conf.all.route_localnet=1`, as kube-proxy does,
//! for NodePorts on 127.0.0.1.

pub mod host;
pub mod rules;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::iptables::Lock;
use crate::services::Services;
use rules::{Scope, Table};

/// How often an agent without its cluster's proxy lock tries to take it, and how soon a
/// failed write is tried again.
const RETRY: Duration = Duration::from_secs(2);
/// How often the whole table is written again without a change, kube-proxy's `--sync-period`.
pub const SYNC_PERIOD: Duration = Duration::from_secs(30);

fn lock_path(scope: &Scope) -> PathBuf {
    PathBuf::from(format!("/run/shepherd-proxy-{}.lock", scope.tag))
}

/// Runs the proxy of `scope` until `shutdown`; with `remove_on_exit`, its rules go too.
pub async fn run(services: Arc<Services>, scope: Scope, remove_on_exit: bool, shutdown: CancellationToken) {
    let lock = loop {
        match Lock::try_take(&lock_path(&scope)) {
            Ok(Some(lock)) => break lock,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the service proxy does not run");
                return;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY) => {}
            _ = shutdown.cancelled() => return,
        }
    };
    if let Err(e) = tokio::task::spawn_blocking(host::allow_localhost_node_ports).await.expect("no panic") {
        tracing::warn!(error = %e, "NodePorts will not answer on 127.0.0.1");
    }
    tracing::info!(cluster_tag = %scope.tag, "service proxy programming the nat table");
    let mut updates = services.subscribe();
    let mut written: Option<Table> = None;
    loop {
        let snapshot = updates.borrow_and_update().clone();
        // Before the first list an empty view would take every rule away.
        if snapshot.synced {
            let wanted = rules::table(&scope, snapshot.services.values());
            if written.as_ref() != Some(&wanted) {
                written = write(&scope, wanted).await;
            }
        }
        tokio::select! {
            changed = updates.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep(if written.is_none() { RETRY } else { SYNC_PERIOD }), if snapshot.synced => written = None,
            _ = shutdown.cancelled() => break,
        }
    }
    match remove_on_exit {
        true => {
            write(&scope, Table::default()).await;
            lock.remove();
        }
        false => drop(lock),
    }
}

/// Writes `table`; what was written, or `None` when it failed (and is to be tried again).
async fn write(scope: &Scope, table: Table) -> Option<Table> {
    let (scope, wanted) = (scope.clone(), table.clone());
    match tokio::task::spawn_blocking(move || host::apply(&scope, &wanted)).await.expect("no panic") {
        Ok(()) => Some(table),
        Err(e) => {
            tracing::warn!(error = %e, "cannot program the service proxy's rules; trying again");
            None
        }
    }
}
