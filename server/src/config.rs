//! The server's validated settings: where data lives, who may call, which scheduler
//! profile runs and the timings of every loop. `main` turns flags into a [`Config`];
//! tests build one with short timings.

use std::path::PathBuf;
use std::time::Duration;

use crate::auth::Tokens;
use crate::service_addresses::ServiceRanges;
use crate::store::{Encryption, EtcdSettings, History};
use crate::tls::Identity;

#[derive(Debug, Clone)]
pub struct Config {
    /// Where the SQLite database lives; `None` keeps everything in memory (unless `etcd`).
    pub data_dir: Option<PathBuf>,
    /// Store the objects in etcd instead (the data directory then holds only files such as
    /// the made TLS certificate).
    pub etcd: Option<EtcdSettings>,
    /// The keys Secrets are encrypted with in the store (`--encryption-key-file`); none
    /// stores them as they are.
    pub encryption: Encryption,
    pub tokens: Tokens,
    /// `spread` or `bin-pack`.
    pub scheduler_profile: String,
    /// Whether the server runs its scheduler loop (tests of manual binding turn it off).
    pub run_scheduler: bool,
    /// How many changes a watch can replay before 410 Gone; a streaming watcher is ended
    /// when it holds half as many unread ([`History::unread_limit`]).
    pub watch_history: usize,
    /// How old a change a watch can replay, at most `watch_history` of them.
    pub watch_history_age: Duration,
    /// How many deletions, at most `watch_history_age` old, are kept past the history for
    /// watchers that resume from the state ([`History::deletions`]).
    pub kept_deletions: usize,
    pub bookmark_interval: Duration,
    /// How long a watch from a revision newer than the store's waits for the store to reach
    /// it before it is refused: a client failing over from another server on the same etcd
    /// resumes from a revision this server's cache may not have yet (kube-apiserver waits 3 s
    /// for a too-large resourceVersion).
    pub watch_catch_up: Duration,
    /// The scheduler's safety-net sweep of Pending pods without a node.
    pub scheduler_sweep: Duration,
    /// A node with no heartbeat for this long becomes NotReady (Ready=Unknown).
    pub node_monitor_grace: Duration,
    /// Pods on a node NotReady for this long are marked Failed with reason NodeLost.
    pub pod_eviction_grace: Duration,
    /// How often the node lifecycle controller looks at every node.
    pub node_monitor_period: Duration,
    /// How long past a terminating pod's grace period its agent may take to confirm the
    /// deletion before the pod garbage collector removes the pod anyway.
    pub termination_confirm_slack: Duration,
    /// Full resync of the pod garbage collector (it also requeues each pod at its deadline).
    pub pod_gc_period: Duration,
    /// Full resync of the deployment and endpoints controllers.
    pub controller_resync: Duration,
    /// Events older than this (by last_timestamp) are deleted.
    pub event_ttl: Duration,
    /// The most events kept: beyond it the oldest are deleted, so that a burst of pods
    /// cannot fill memory with their events.
    pub event_limit: usize,
    /// The built dashboard (`dist/` of `cargo xtask frontend`), served outside `/api`.
    pub dashboard_dir: Option<PathBuf>,
    /// Serve HTTPS with this certificate; `None` serves plain HTTP.
    pub tls: Option<Identity>,
    /// A connection that has not sent a request's whole headers this long after it began
    /// (or after its last answer, when kept alive) is closed: a slowloris holds no slot.
    /// 32 s is kube-apiserver's; it must outlast the agent's 10 s lease-renewal pause,
    /// because the same timer closes an idle kept-alive connection.
    pub header_read_timeout: Duration,
    /// A request body not whole this long after its headers gets a 408. Only the request
    /// is bounded: watch and log streams answer for as long as they like.
    pub body_read_timeout: Duration,
    /// Whether the scheduler and the controllers run only on the elected leader, and its timings.
    pub leader_election: LeaderElection,
    /// This server's identity in the leases; `None` makes one, `<hostname>_<uuid>` as client-go does.
    pub server_id: Option<String>,
    /// Where clients reach this server, announced in its identity lease; `None` is the
    /// address it listens on.
    pub advertise_url: Option<String>,
    /// Whether pods may have `hostPath` volumes (`--allow-host-path`; see [`crate::admission`]).
    pub allow_host_path: bool,
    /// Where Services' cluster IPs and node ports come from.
    pub service_ranges: ServiceRanges,
}

/// client-go's leader election settings (`--leader-elect*` of kube-scheduler and
/// kube-controller-manager), with their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderElection {
    /// Off: this server runs the scheduler and the controllers without asking, as before.
    pub leader_elect: bool,
    /// How long a candidate waits, from when it saw the lease last change, before it takes it.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops acting.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader to renew.
    pub retry_period: Duration,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            leader_elect: true,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// client-go's jitter factor: the renew deadline must outlast a retry period stretched by it.
pub const LEADER_ELECTION_JITTER: f64 = 1.2;

impl LeaderElection {
    /// client-go's checks (`NewLeaderElector`): the lease outlasts the renew deadline, so a
    /// leader stops before anyone may take its lease, and the deadline leaves room for retries.
    pub fn validate(&self) -> Result<(), String> {
        if self.retry_period.is_zero() {
            return Err("--leader-elect-retry-period must be greater than zero".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "--leader-elect-lease-duration ({:?}) must be greater than --leader-elect-renew-deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= LEADER_ELECTION_JITTER * self.retry_period.as_secs_f64() {
            return Err(format!(
                "--leader-elect-renew-deadline ({:?}) must be greater than {LEADER_ELECTION_JITTER} times --leader-elect-retry-period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: None,
            etcd: None,
            encryption: Encryption::default(),
            tokens: Tokens::default(),
            scheduler_profile: "spread".into(),
            run_scheduler: true,
            watch_history: DEFAULT_WATCH_HISTORY,
            watch_history_age: DEFAULT_WATCH_HISTORY_AGE,
            kept_deletions: DEFAULT_KEPT_DELETIONS,
            bookmark_interval: Duration::from_secs(5),
            watch_catch_up: Duration::from_secs(3),
            scheduler_sweep: Duration::from_secs(2),
            node_monitor_grace: shared::readiness::DEFAULT_NODE_MONITOR_GRACE,
            pod_eviction_grace: Duration::from_secs(60),
            node_monitor_period: Duration::from_secs(5),
            termination_confirm_slack: Duration::from_secs(30),
            pod_gc_period: Duration::from_secs(20),
            controller_resync: Duration::from_secs(30),
            event_ttl: Duration::from_secs(3600),
            event_limit: 20_000,
            dashboard_dir: None,
            tls: None,
            header_read_timeout: Duration::from_secs(32),
            body_read_timeout: Duration::from_secs(30),
            leader_election: LeaderElection::default(),
            server_id: None,
            advertise_url: None,
            allow_host_path: false,
            service_ranges: ServiceRanges::default(),
        }
    }
}

/// The largest request body the API reads: kube-apiserver's (`--max-request-bytes`' 3 MiB),
/// so that a ConfigMap or Secret just under its own 1 MiB limit, sent as base64 or YAML,
/// reaches validation and its 422 rather than a 413.
pub const BODY_LIMIT: usize = 3 * 1024 * 1024;

/// Twice the 20,000 unread changes a streaming watcher may hold.
pub const DEFAULT_WATCH_HISTORY: usize = 40_000;

/// More than a deployment of 150,000 pods deletes: each holds a deleted object's last state
/// (about 1.5 KB) until it is as old as the history allows.
pub const DEFAULT_KEPT_DELETIONS: usize = 200_000;

/// Kubernetes' watch cache keeps 75 s of changes.
pub const DEFAULT_WATCH_HISTORY_AGE: Duration = Duration::from_secs(75);

impl Config {
    /// What the store's watch history keeps.
    pub fn history(&self) -> History {
        History { changes: self.watch_history, deletions: self.kept_deletions, age: Some(self.watch_history_age) }
    }

    /// An in-memory server with the default timings.
    pub fn in_memory() -> Self {
        Config::default()
    }

    /// A durable server under `dir`.
    pub fn durable(dir: impl Into<PathBuf>) -> Self {
        Config { data_dir: Some(dir.into()), ..Config::default() }
    }
}

/// The default data directory: `$XDG_DATA_HOME/shepherd`, else `~/.local/share/shepherd`,
/// else `./shepherd-data`.
pub fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("shepherd");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".local/share/shepherd");
    }
    PathBuf::from("shepherd-data")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_election_timings_are_checked_as_client_go_checks_them() {
        assert_eq!(LeaderElection::default().validate(), Ok(()));
        let secs = |lease, renew, retry| LeaderElection {
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
            leader_elect: true,
        };
        assert!(secs(10, 10, 2).validate().unwrap_err().contains("--leader-elect-lease-duration"));
        assert!(secs(15, 12, 10).validate().unwrap_err().contains("1.2 times --leader-elect-retry-period"));
        assert!(secs(15, 6, 5).validate().unwrap_err().contains("--leader-elect-renew-deadline"));
        assert!(secs(15, 10, 0).validate().unwrap_err().contains("greater than zero"));
        assert_eq!(secs(15, 7, 5).validate(), Ok(()));
    }
}
