//! `sheepctl exec` and `sheepctl cp` against a real Docker pod: exec with stdin, apart
//! stderr and a non-zero exit code that becomes sheepctl's, cp both ways (a file, and a
//! directory into a directory), and a hostile tar stream from the pod, which writes nothing
//! outside the destination. Fails, never skips, when Docker is missing.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use support::{RemoveNodeContainers, TestServer};
use tokio_util::sync::CancellationToken;

const NODE: &str = "sheepctl-exec-node";

/// The pod looks for programs in /tmp/hostile first, empty until the hostile part.
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: shell\nspec:\n  containers:\n  - name: main\n    image: minimal\n    command: [sleep, \"3600\"]\n    env:\n    - name: PATH\n      value: /tmp/hostile:/usr/sbin:/usr/bin:/sbin:/bin\n";

/// A tar entry whose name and link are written as they are, `..` and all, as a hostile
/// container's tar could write them.
fn raw_entry(archive: &mut tar::Builder<Vec<u8>>, kind: tar::EntryType, name: &str, link: &str, data: &[u8]) {
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    header.set_entry_type(kind);
    header.set_mode(0o644);
    header.set_size(data.len() as u64);
    header.set_cksum();
    archive.append(&header, data).unwrap();
}

fn hostile_tar() -> Vec<u8> {
    let mut archive = tar::Builder::new(Vec::new());
    raw_entry(&mut archive, tar::EntryType::Regular, "tmp/loot/ok.txt", "", b"fine\n");
    raw_entry(&mut archive, tar::EntryType::Regular, "tmp/loot/../escaped.txt", "", b"escaped\n");
    raw_entry(&mut archive, tar::EntryType::Symlink, "tmp/loot/link", "/etc", b"");
    raw_entry(&mut archive, tar::EntryType::Regular, "tmp/loot/link/through.txt", "", b"not through a link\n");
    raw_entry(&mut archive, tar::EntryType::Link, "tmp/loot/hard", "/etc/passwd", b"");
    raw_entry(&mut archive, tar::EntryType::Regular, "/etc/absolute.txt", "", b"absolute\n");
    archive.into_inner().unwrap()
}

fn exec(server: &TestServer, args: &[&str], stdin: &[u8]) -> std::process::Output {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sheepctl"))
        .args(args)
        .env("SHEPHERD_API", &server.url)
        .env_remove("SHEPHERD_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn sheepctl_execs_and_copies_both_ways_and_a_hostile_tar_stays_inside() {
    let _cleanup = RemoveNodeContainers(NODE);
    let server = TestServer::start();
    let shutdown = CancellationToken::new();
    let node = support::start_docker_node(&server.url, NODE, |_| {}, shutdown.clone());
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("pod.yaml");
    std::fs::write(&manifest, POD).unwrap();
    server.sheepctl().args(["apply", "-f", manifest.to_str().unwrap()]).assert().success();
    server.sheepctl().args(["wait", "--for=Running", "pod/shell", "--timeout=60s"]).assert().success();

    let said = exec(&server, &["exec", "shell", "--", "echo", "hi"], b"");
    assert!(said.status.success(), "{said:?}");
    assert_eq!(text(&said.stdout), "hi\n");
    // Standard input to its end, standard error apart.
    let counted = exec(&server, &["exec", "-i", "shell", "--", "sh", "-c", "wc -c; echo to-stderr >&2"], &[b'x'; 100_000]);
    assert!(counted.status.success(), "{counted:?}");
    assert_eq!(text(&counted.stdout).trim(), "100000");
    assert_eq!(text(&counted.stderr).trim(), "to-stderr");
    let failed = exec(&server, &["exec", "pod/shell", "-c", "main", "--", "sh", "-c", "exit 3"], b"");
    assert_eq!(failed.status.code(), Some(3), "sheepctl exits with the command's code: {failed:?}");
    assert_eq!(text(&failed.stderr).trim(), "command terminated with exit code 3");
    let wrong = exec(&server, &["exec", "shell", "-c", "nope", "--", "true"], b"");
    assert!(text(&wrong.stderr).contains("container nope is not valid for pod shell"), "{wrong:?}");

    // cp is tar over exec: a file to a path and back, a directory into a directory.
    let notes = dir.path().join("notes.txt");
    let contents = "line one\nline two\n".repeat(1000);
    std::fs::write(&notes, &contents).unwrap();
    server.sheepctl().args(["cp", notes.to_str().unwrap(), "shell:/tmp/notes.txt"]).assert().success();
    let lines = exec(&server, &["exec", "shell", "--", "wc", "-l", "/tmp/notes.txt"], b"");
    assert_eq!(text(&lines.stdout).split_whitespace().next(), Some("2000"));
    let back = dir.path().join("back.txt");
    server.sheepctl().args(["cp", "default/shell:/tmp/notes.txt", back.to_str().unwrap()]).assert().success();
    assert_eq!(std::fs::read_to_string(&back).unwrap(), contents);
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("css")).unwrap();
    std::fs::write(site.join("index.html"), "<h1>hi</h1>\n").unwrap();
    std::fs::write(site.join("css/main.css"), "h1 {}\n").unwrap();
    server.sheepctl().args(["cp", site.to_str().unwrap(), "shell:/tmp"]).assert().success();
    let listed = exec(&server, &["exec", "shell", "--", "cat", "/tmp/site/index.html", "/tmp/site/css/main.css"], b"");
    assert_eq!(text(&listed.stdout), "<h1>hi</h1>\nh1 {}\n");
    let copied = dir.path().join("copied");
    server.sheepctl().args(["cp", "shell:/tmp/site", copied.to_str().unwrap()]).assert().success();
    assert_eq!(std::fs::read_to_string(copied.join("css/main.css")).unwrap(), "h1 {}\n");
    let missing = server.sheepctl().args(["cp", "shell:/tmp/none", dir.path().join("none").to_str().unwrap()]).assert().failure();
    assert!(text(&missing.get_output().stderr).contains("command terminated with exit code"), "{missing:?}");

    // A hostile container answers `tar cf` with a stream of its own making.
    let hostile = exec(&server, &["exec", "-i", "shell", "--", "sh", "-c", "cat > /tmp/evil.tar"], &hostile_tar());
    assert!(hostile.status.success(), "{hostile:?}");
    let fake_tar = "mkdir -p /tmp/hostile && printf '#!/bin/sh\\ncat /tmp/evil.tar\\n' > /tmp/hostile/tar && chmod +x /tmp/hostile/tar";
    assert!(exec(&server, &["exec", "shell", "--", "sh", "-c", fake_tar], b"").status.success());
    let loot = dir.path().join("loot");
    let copy = server.sheepctl().args(["cp", "shell:/tmp/loot", loot.to_str().unwrap()]).assert().failure();
    let said = text(&copy.get_output().stderr);
    assert!(said.contains("tar contents corrupted: \"/etc/absolute.txt\""), "{said}");
    assert_eq!(std::fs::read_to_string(loot.join("ok.txt")).unwrap(), "fine\n");
    assert!(said.contains("is outside target destination, skipping"), "{said}");
    assert!(!dir.path().join("escaped.txt").exists(), "`..` climbed out of the destination");
    assert!(said.contains("skipping link") && said.contains("/etc/passwd"), "{said}");
    let link = std::fs::symlink_metadata(loot.join("link")).unwrap();
    assert!(link.is_dir() && !link.file_type().is_symlink(), "no link was made: {link:?}");
    assert_eq!(std::fs::read_to_string(loot.join("link/through.txt")).unwrap(), "not through a link\n");
    assert!(!loot.join("hard").exists());
    assert!(!Path::new("/etc/through.txt").exists() && !Path::new("/etc/absolute.txt").exists());

    shutdown.cancel();
    node.join().unwrap();
}
