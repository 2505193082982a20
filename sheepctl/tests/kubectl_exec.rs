//! The real kubectl (v1.32, on PATH) runs commands in a real Docker pod through Shepherd's
//! `pods/exec` and `pods/attach`, over HTTPS with tokens as a cluster runs: exec with stdin
//! and with an exit code, `cp` both ways, `run -i --rm` (attach), and the refusals: a container the pod does not have, a viewer, another node's token,
//! a request to the agent the server did not sign, and a dropped session, which leaves no
//! process behind. Fails, never skips, when kubectl or Docker is missing.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{RemoveNodeContainers, SecureDockerCluster};

const NODE: &str = "exec-node";
const TOKENS: &str = "exec-admin-token admin\nexec-viewer-token viewer\nexec-node-token node exec-node\nother-node-token node other-node\n";

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: shell\nspec:\n  containers:\n  - name: main\n    image: minimal\n    command: [sleep, \"3600\"]\n";

/// The processes of the pod's container, as `docker top` lists them.
fn processes_of_the_container() -> String {
    let filter = format!("label={}=shell", agent::runtime::LABEL_POD);
    let containers =
        Command::new("docker").args(["ps", "-q", "--filter", &filter, "--filter", "label=shepherd.container=main"]).output().unwrap();
    let id = String::from_utf8_lossy(&containers.stdout).trim().to_string();
    assert!(!id.is_empty(), "the pod's container runs");
    String::from_utf8_lossy(&Command::new("docker").args(["top", &id]).output().unwrap().stdout).into_owned()
}

#[test]
fn kubectl_execs_copies_and_is_refused_as_kubernetes_would() {
    let _cleanup = RemoveNodeContainers(NODE);
    let cluster = SecureDockerCluster::start(TOKENS, NODE, "exec-node-token", "exec-admin-token");
    let (server, dir, kubectl) = (&cluster.server, &cluster.dir, &cluster.kubectl);
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, POD).unwrap();
    assert!(kubectl.run(&["apply", "-f", pod.to_str().unwrap()]).contains("pod/shell created"));
    let ready = kubectl.run(&["wait", "--for=condition=Ready", "pod/shell", "--timeout=60s"]);
    assert!(ready.contains("condition met"), "{ready}");

    assert_eq!(kubectl.run(&["exec", "shell", "--", "echo", "hi"]), "hi\n");
    // Standard input to its end (the v5 close signal), and standard error apart.
    let mut cat = kubectl
        .command(&["exec", "-i", "shell", "--", "sh", "-c", "wc -c; echo to-stderr >&2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    cat.stdin.take().unwrap().write_all(&[b'x'; 100_000]).unwrap();
    let counted = cat.wait_with_output().unwrap();
    assert!(counted.status.success(), "{counted:?}");
    assert_eq!(String::from_utf8_lossy(&counted.stdout).trim(), "100000");
    assert_eq!(String::from_utf8_lossy(&counted.stderr).trim(), "to-stderr");
    let failed = kubectl.output(&["exec", "shell", "--", "sh", "-c", "exit 3"]);
    assert_eq!(failed.status.code(), Some(3), "kubectl exits with the command's code: {failed:?}");
    assert!(String::from_utf8_lossy(&failed.stderr).contains("command terminated with exit code 3"), "{failed:?}");

    // A container the pod does not have: the server refuses it before any upgrade, in
    // kube-apiserver's words, which kubectl prints as Kubernetes' (kubectl attach and logs
    // check the container themselves).
    let wrong = kubectl.output(&["exec", "shell", "-c", "nope", "--", "true"]);
    let said = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success(), "{said}");
    assert_eq!(said.trim(), "Error from server (BadRequest): container nope is not valid for pod shell");

    // cp is tar over exec, both ways.
    let local = dir.path().join("notes.txt");
    let contents = "line one\nline two\n".repeat(1000);
    std::fs::write(&local, &contents).unwrap();
    kubectl.run(&["cp", local.to_str().unwrap(), "shell:/tmp/notes.txt"]);
    assert_eq!(kubectl.run(&["exec", "shell", "--", "wc", "-l", "/tmp/notes.txt"]).split_whitespace().next(), Some("2000"));
    let back = dir.path().join("back.txt");
    kubectl.run(&["cp", "shell:/tmp/notes.txt", back.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&back).unwrap(), contents);

    // run -i --rm: the pod keeps its stdin open, kubectl attaches, feeds it to its end, then
    // deletes the pod.
    let mut run = kubectl
        .command(&["run", "once", "--image=minimal", "--restart=Never", "--rm", "-i", "--", "tr", "a-z", "A-Z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    run.stdin.take().unwrap().write_all(b"shout\n").unwrap();
    let ran = run.wait_with_output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
    assert!(ran.status.success(), "{out}\n{err}");
    assert!(out.contains("SHOUT"), "{out}\n{err}");
    assert!(format!("{out}{err}").contains("pod \"once\" deleted"), "{out}\n{err}");

    // A viewer may not, nor may another node; the pod's own node may, as its kubelet can.
    let viewer = kubectl.output(&["--token", "exec-viewer-token", "exec", "shell", "--", "true"]);
    let said = String::from_utf8_lossy(&viewer.stderr);
    assert!(!viewer.status.success() && said.contains("Forbidden") && said.contains("needs write rights"), "{said}");
    let other = kubectl.output(&["--token", "other-node-token", "exec", "shell", "--", "true"]);
    let said = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success() && said.contains("the token of node other-node may not exec in pod default/shell"), "{said}");
    assert_eq!(kubectl.run(&["--token", "exec-node-token", "exec", "shell", "--", "echo", "own"]), "own\n");

    // The agent opens no session the server did not sign.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (status, said) = runtime.block_on(async {
        let trusting = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(server.trust().unwrap().as_bytes()).unwrap())
            .build()
            .unwrap();
        let node: serde_json::Value = trusting
            .get(format!("{}/api/v1/nodes/{NODE}", server.url))
            .bearer_auth("exec-admin-token")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let endpoint = node["status"]["agent_endpoint"].as_str().unwrap().to_string();
        let unsigned = reqwest::Client::new()
            .get(format!("{endpoint}/exec/default/shell?command=true&stdout=true"))
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("Sec-WebSocket-Protocol", shared::remote_command::V5)
            .send()
            .await
            .unwrap();
        (unsigned.status(), unsigned.text().await.unwrap())
    });
    assert_eq!(status, 401, "{said}");
    assert!(said.contains("signed by the API server"), "{said}");

    // A session whose client goes away ends its process in the container.
    let mut dropped =
        kubectl.command(&["exec", "shell", "--", "sleep", "4242"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    shepherd_testing::poll_blocking(Duration::from_secs(20), "the exec's process to run", || {
        processes_of_the_container().contains("sleep 4242").then_some(())
    });
    dropped.kill().unwrap();
    dropped.wait().unwrap();
    shepherd_testing::poll_blocking(Duration::from_secs(20), "the dropped session's process to end", || {
        (!processes_of_the_container().contains("sleep 4242")).then_some(())
    });
}
