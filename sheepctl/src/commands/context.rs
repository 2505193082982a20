//! What every subcommand needs: the settings and the client, the clock, how the server
//! judges nodes, and a watch that reconnects, lists again and polls.

use std::time::Duration;

use anyhow::Result;
use chrono::Utc;
use shared::backoff::Backoff;
use shared::model::{Kind, Lease, Time};
use shared::readiness::{DEFAULT_NODE_MONITOR_GRACE, NodeJudge};
use shared::selector::LabelSelector;
use shepherd_client::watcher::{Changes, Collection, Watcher};
use shepherd_client::{Client, Selection};

use crate::settings::Settings;

/// What every subcommand needs.
pub struct Context {
    pub settings: Settings,
    pub client: Client,
}

/// The watch's retries: 200 ms, doubling to 2 s.
const WATCH_BACKOFF: Backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(2));
/// Failures in a row (the server unreachable) before a watch gives up.
const WATCH_ATTEMPTS: u32 = 10;
/// Failed attempts to open the stream before a watch polls the list instead, and how often.
const STREAM_ATTEMPTS: u32 = 3;
const POLL_INTERVAL: Duration = Duration::from_secs(1);

impl Context {
    /// This context in `namespace` instead, when one is given (cp's `NAMESPACE/POD:PATH`).
    pub fn in_namespace(&self, namespace: Option<String>) -> Context {
        let mut settings = self.settings.clone();
        if let Some(namespace) = namespace {
            settings.namespace = namespace;
        }
        Context { settings, client: self.client.clone() }
    }

    pub fn now(&self) -> Time {
        Utc::now()
    }

    /// How the server judges nodes: how long one may go without a heartbeat before it is not
    /// ready (its `--node-monitor-grace`), and the nodes' leases, whose renewals are their
    /// heartbeats.
    pub async fn node_judge(&self) -> Result<NodeJudge> {
        let info = self.client.info().await?;
        let grace =
            if info.node_monitor_grace_ms > 0 { Duration::from_millis(info.node_monitor_grace_ms) } else { DEFAULT_NODE_MONITOR_GRACE };
        let leases = self.client.list::<Lease>(&Selection::default()).await?;
        Ok(NodeJudge::new(grace, leases.items))
    }

    /// A watch of `kind` in `namespace` (every namespace when `None`), of the objects that
    /// match `selector` and the field selector `fields` (the server evaluates it): it
    /// reconnects, lists again, and polls when the server cannot stream.
    pub fn changes(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        selector: Option<LabelSelector>,
        fields: Option<String>,
    ) -> Changes<Collection> {
        let selector = selector.unwrap_or_default();
        let selection = selection(kind, namespace, &selector, fields);
        let source = Collection { client: self.client.clone(), kind, selection };
        let watcher = Watcher::new(source, WATCH_BACKOFF).give_up_after(WATCH_ATTEMPTS).poll_after(STREAM_ATTEMPTS, POLL_INTERVAL);
        Changes::new(watcher).matching(selector)
    }
}

/// What the server selects for a list or watch of `kind`: the namespace (none for a
/// cluster-scoped kind), the label selector and the field selector.
pub fn selection(kind: Kind, namespace: Option<&str>, selector: &LabelSelector, fields: Option<String>) -> Selection {
    Selection {
        namespace: namespace.filter(|_| kind.namespaced()).map(str::to_string),
        label_selector: (!selector.is_empty()).then(|| selector.to_string()),
        field_selector: fields,
    }
}
