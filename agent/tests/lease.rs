//! The lease loop on tokio's paused clock, against the fake API: a renewal every interval,
//! and the node's status only when it changed, after the report interval, or with the first
//! renewal after a gap (when node lifecycle may have marked the node Unknown).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use agent::node::{Heartbeats, lease_loop};
use common::FakeApi;
use tokio_util::sync::CancellationToken;

#[tokio::test(start_paused = true)]
async fn the_status_is_sent_only_when_it_changed_after_the_report_interval_or_after_a_gap() {
    let api = FakeApi::new();
    let cpu = Arc::new(AtomicI64::new(4000));
    let shutdown = CancellationToken::new();
    let heartbeats = Heartbeats { lease_renew_interval: Duration::from_secs(10), node_status_report_interval: Duration::from_secs(300) };
    let running = {
        let (api, cpu, shutdown) = (api.clone(), cpu.clone(), shutdown.clone());
        tokio::spawn(async move {
            let node = shepherd_testing::node("n1");
            let status = |now| {
                let mut current = node.clone();
                current.capacity.cpu = cpu.load(Ordering::SeqCst);
                current.heartbeat(now)
            };
            lease_loop(api.as_ref(), &node, &status, heartbeats, &shutdown).await;
        })
    };
    let start = tokio::time::Instant::now();
    let until = |seconds: u64| tokio::time::sleep_until(start + Duration::from_secs(seconds));

    until(95).await;
    assert_eq!((api.renewals(), api.heartbeats()), (9, 0), "renewals only: registration reported the status");

    cpu.store(2000, Ordering::SeqCst);
    until(105).await;
    assert_eq!((api.renewals(), api.heartbeats()), (10, 1), "the changed status goes with the next renewal");

    until(395).await;
    assert_eq!(api.heartbeats(), 1, "unchanged: nothing more until the report interval has passed");
    until(405).await;
    assert_eq!((api.renewals(), api.heartbeats()), (40, 2), "five minutes after the last report");

    // The server is away for four renewals; the first renewal after the gap reports the status.
    api.down.store(true, Ordering::SeqCst);
    until(445).await;
    api.down.store(false, Ordering::SeqCst);
    until(455).await;
    assert_eq!((api.renewals(), api.heartbeats()), (41, 3), "a renewal 50s after the one before, more than half the lease's 40s");
    until(495).await;
    assert_eq!((api.renewals(), api.heartbeats()), (45, 3));

    shutdown.cancel();
    running.await.unwrap();
}
