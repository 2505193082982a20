//! Real etcd members for the tests of the etcd store: one, or a cluster of three, from
//! Debian's `etcd-server` package, each on loopback ports and in a directory of its own,
//! killed when the fixture is dropped.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::poll;

/// How long members get to elect a leader and answer.
const READY_LIMIT: Duration = Duration::from_secs(30);

struct Member {
    name: String,
    client: String,
    peer: String,
    child: Option<Child>,
}

/// A running etcd cluster on 127.0.0.1.
pub struct Etcd {
    members: Vec<Member>,
    dir: tempfile::TempDir,
}

impl Etcd {
    /// Starts `size` members and returns once the cluster answers.
    pub async fn start(size: usize) -> Etcd {
        let dir = tempfile::tempdir().expect("a directory for etcd");
        let members: Vec<Member> =
            (0..size).map(|i| Member { name: format!("m{i}"), client: free_url(), peer: free_url(), child: None }).collect();
        let mut etcd = Etcd { members, dir };
        for i in 0..size {
            etcd.launch(i);
        }
        etcd.wait_ready().await;
        etcd
    }

    fn launch(&mut self, i: usize) {
        let cluster = self.members.iter().map(|m| format!("{}={}", m.name, m.peer)).collect::<Vec<_>>().join(",");
        let member = &self.members[i];
        let data = self.dir.path().join(&member.name);
        let log = std::fs::File::create(self.dir.path().join(format!("{}.log", member.name))).expect("an etcd log file");
        let child = Command::new("etcd")
            .args(["--name", &member.name, "--data-dir"])
            .arg(&data)
            .args(["--listen-client-urls", &member.client, "--advertise-client-urls", &member.client])
            .args(["--listen-peer-urls", &member.peer, "--initial-advertise-peer-urls", &member.peer])
            .args(["--initial-cluster", &cluster, "--initial-cluster-state", "new", "--initial-cluster-token", "shepherd-test"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd runs (Debian: apt-get install etcd-server)");
        self.members[i].child = Some(child);
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client.clone()).collect()
    }

    /// The process id of every member still running.
    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(|m| m.child.as_ref().map(Child::id)).collect()
    }

    /// Ends member `i` at once, as a crash would.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn wait_ready(&self) {
        let http = reqwest::Client::new();
        for member in &self.members {
            let url = format!("{}/health", member.client);
            poll(READY_LIMIT, &format!("etcd member {} to answer at {url}", member.name), || {
                let request = http.get(&url).send();
                async move {
                    let answer = request.await.ok()?;
                    answer.text().await.ok().filter(|text| text.contains("\"health\":\"true\"")).map(drop)
                }
            })
            .await;
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// `http://127.0.0.1:<port>` of a port free now.
fn free_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    format!("http://{}", listener.local_addr().expect("its address"))
}
