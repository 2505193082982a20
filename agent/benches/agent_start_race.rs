//! `cargo bench -p agent --bench agent_start_race -- [RUNS]`: RUNS (default 100) agent-start
//! races (a fresh server, a `shepherd-agent --runtime simulated` process starting, the
//! reference pod applied at the same moment), with the time from the create to bound and to
//! Running: median, p99, max, and how many pods were still Pending past 2 s.

#[path = "../tests/support/start_race.rs"]
mod start_race;

use std::time::Duration;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn report(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let late = times.iter().filter(|t| **t > Duration::from_secs(2)).count();
    println!(
        "{what:>8}: median {:>7.1?}  p99 {:>7.1?}  max {:>7.1?}  past 2 s: {late} of {}",
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.last().copied().unwrap_or_default(),
        times.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let runs: usize = std::env::args().skip(1).find(|a| !a.starts_with('-')).and_then(|a| a.parse().ok()).unwrap_or(100);
    let (mut bound, mut running) = (Vec::new(), Vec::new());
    for run in 1..=runs {
        match start_race::agent_start_race(env!("CARGO_BIN_EXE_shepherd-agent"), Duration::from_secs(30)).await {
            Ok(outcome) => {
                bound.push(outcome.bound_after);
                running.push(outcome.running_after);
            }
            Err(why) => println!("run {run}: {why}"),
        }
    }
    println!("{runs} agent-start races, {} reached Running", running.len());
    report("bound", bound);
    report("Running", running);
}
