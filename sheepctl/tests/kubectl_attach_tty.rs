//! The real kubectl (v1.32, on PATH) with `run --rm -it`, on a terminal as a person types
//! (`script` gives it one): kubectl attaches to the shell, `exit` ends it, and the session
//! closes with a normal close frame carrying the status, never 1006 (abnormal closure),
//! before kubectl deletes the pod. Several runs, since a lost close frame is a race. Fails,
//! never skips, when kubectl, script or Docker is missing.

mod support;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{RemoveNodeContainers, SecureDockerCluster};

const NODE: &str = "attach-node";
const TOKENS: &str = "attach-admin-token admin\nattach-node-token node attach-node\n";
const RUNS: usize = 20;

/// What `child` prints until it ends, as it arrives.
fn printed(child: &mut std::process::Child) -> mpsc::Receiver<Vec<u8>> {
    let mut stdout = child.stdout.take().unwrap();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buffer = [0; 4096];
        while let Ok(read) = stdout.read(&mut buffer) {
            if read == 0 || sender.send(buffer[..read].to_vec()).is_err() {
                break;
            }
        }
    });
    receiver
}

#[test]
fn kubectl_run_rm_it_ends_each_time_with_a_normal_close() {
    let _cleanup = RemoveNodeContainers(NODE);
    let cluster = SecureDockerCluster::start(TOKENS, NODE, "attach-node-token", "attach-admin-token");
    for run in 0..RUNS {
        let pod = format!("tty-{run}");
        let line = format!("kubectl run {pod} --rm -it --image=minimal --restart=Never -- sh");
        let mut child = Command::new("script")
            .args(["-qefc", &line, "/dev/null"])
            .env("KUBECONFIG", &cluster.kubectl.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("script is not on PATH ({e}): util-linux has it"));
        let mut stdin = child.stdin.take().unwrap();
        let output = printed(&mut child);
        let mut transcript = String::new();
        let mut typed = false;
        // Each chunk comes within a minute (the pod starts, then the shell answers), until
        // kubectl ends.
        while let Ok(chunk) = output.recv_timeout(Duration::from_secs(60)) {
            transcript.push_str(&String::from_utf8_lossy(&chunk));
            if !typed && transcript.contains("If you don't see a command prompt") {
                stdin.write_all(b"echo typed-$((6*7))\nexit\n").unwrap();
                typed = true;
            }
        }
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        let said = format!("run {run}:\n{transcript}\n{stderr}");
        assert!(typed, "kubectl never attached: {said}");
        assert!(transcript.contains("typed-42"), "the shell ran what was typed: {said}");
        assert!(!said.contains("1006") && !said.contains("abnormal"), "the session closed abnormally: {said}");
        assert!(status.success(), "{said}");
        assert!(said.contains(&format!("pod \"{pod}\" deleted")), "{said}");
        drop(stdin);
    }
}
