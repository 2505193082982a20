//! `sheepctl port-forward pod/NAME|svc/NAME [LOCAL:]REMOTE...`: listens on 127.0.0.1 only, as
//! kubectl does by default, and forwards each connection through the server to the pod's
//! port (the agent connects inside the pod). A Service is resolved as kubectl resolves it:
//! to its most ready pod, and each service port to the port its pods listen on.

use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use shared::model::{Kind, Pod, PodPhase, Service};
use shared::selector::LabelSelector;
use shepherd_client::Selection;
use shepherd_client::port_forward::PortForward;
use tokio::net::TcpListener;

use super::context::Context;
use crate::cli::PortForwardArgs;
use crate::settings;

/// One port to forward: where this side listens, and the pod's port it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Forwarding {
    local: u16,
    remote: u16,
}

pub async fn run(context: &Context, args: &PortForwardArgs) -> Result<()> {
    let namespace = &context.settings.namespace;
    let (kind, name) = match args.target.split_once('/') {
        None => (Kind::Pod, args.target.clone()),
        Some(_) => settings::slash_target(&args.target)?,
    };
    let (pod, forwardings) = match kind {
        Kind::Pod => {
            let pod: Pod = context.client.get(namespace, &name).await?;
            let forwardings = args.ports.iter().map(|spec| pod_forwarding(&pod, spec)).collect::<Result<Vec<_>>>()?;
            (pod, forwardings)
        }
        Kind::Service => {
            let service: Service = context.client.get(namespace, &name).await?;
            let pod = pod_of_service(context, &service).await?;
            let forwardings = args.ports.iter().map(|spec| service_forwarding(&service, spec)).collect::<Result<Vec<_>>>()?;
            (pod, forwardings)
        }
        other => bail!("port-forward takes a pod or a service, not a {}", settings::kind_word(other)),
    };
    if pod.status.phase != PodPhase::Running {
        bail!("unable to forward port because pod is not running. Current status={}", pod.status.phase.as_str());
    }
    let forward = Arc::new(context.client.port_forward(namespace, &pod.metadata.name).await?);
    let (lost_tx, mut lost) = tokio::sync::mpsc::channel::<String>(1);
    for forwarding in forwardings {
        let listener = TcpListener::bind(("127.0.0.1", forwarding.local))
            .await
            .map_err(|e| anyhow!("cannot listen on 127.0.0.1:{}: {e}", forwarding.local))?;
        let local = listener.local_addr()?.port();
        println!("Forwarding from 127.0.0.1:{local} -> {}", forwarding.remote);
        tokio::spawn(accept(listener, local, forwarding.remote, forward.clone(), lost_tx.clone()));
    }
    tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        _ = forward.closed() => Err(anyhow!("lost connection to pod")),
        Some(why) = lost.recv() => Err(anyhow!("lost connection to pod: {why}")),
    }
}

/// Forwards each connection `listener` accepts; as kubectl, the first that fails ends all.
async fn accept(listener: TcpListener, local: u16, remote: u16, forward: Arc<PortForward>, lost: tokio::sync::mpsc::Sender<String>) {
    while let Ok((connection, _)) = listener.accept().await {
        println!("Handling connection for {local}");
        let (forward, lost) = (forward.clone(), lost.clone());
        tokio::spawn(async move {
            if let Err(e) = forward.forward(remote, connection).await {
                eprintln!("error: an error occurred forwarding {local} -> {remote}: {e}");
                let _ = lost.send(format!("an error occurred forwarding {local} -> {remote}")).await;
            }
        });
    }
}

/// The pod a Service forwards to, as kubectl picks it: of the pods its selector matches,
/// a ready one, else a running one, the oldest first.
async fn pod_of_service(context: &Context, service: &Service) -> Result<Pod> {
    let name = &service.metadata.name;
    if service.spec.selector.is_empty() {
        bail!("service {name} has no selector, so no pod to forward to");
    }
    let selector = LabelSelector::from_labels(service.spec.selector.clone()).to_string();
    let selection = Selection { namespace: Some(context.settings.namespace.clone()), label_selector: Some(selector), field_selector: None };
    let mut pods = context.client.list::<Pod>(&selection).await?.items;
    pods.sort_by_key(|pod| (!pod.is_ready(), pod.status.phase != PodPhase::Running, pod.metadata.created_at));
    pods.into_iter().next().ok_or_else(|| anyhow!("no pod matches the selector of service {name}"))
}

/// `[LOCAL:]REMOTE`: the local port (0 picks a free one; omitted, the same as REMOTE's number)
/// and the remote port as the user wrote it, a number or a name.
fn split_spec(spec: &str) -> Result<(Option<u16>, &str)> {
    let (local, remote) = match spec.split_once(':') {
        Some((local, remote)) => (Some(local), remote),
        None => (None, spec),
    };
    let local = match local {
        None => None,
        Some("") => Some(0),
        Some(text) => Some(text.parse::<u16>().map_err(|_| anyhow!("invalid local port {text:?} in {spec:?}"))?),
    };
    if remote.is_empty() {
        bail!("{spec:?} names no remote port: use [LOCAL:]REMOTE, e.g. 8080:80");
    }
    Ok((local, remote))
}

fn port_number(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|port| *port > 0)
}

/// A pod's port, by number or by the name one of its containers gives it.
fn pod_forwarding(pod: &Pod, spec: &str) -> Result<Forwarding> {
    let (local, remote) = split_spec(spec)?;
    let number = match port_number(remote) {
        Some(number) => number,
        None => pod
            .spec
            .containers
            .iter()
            .flat_map(|c| &c.ports)
            .find(|p| p.name == remote)
            .and_then(|p| u16::try_from(p.container_port).ok())
            .ok_or_else(|| anyhow!("Pod '{}' does not have a named port '{remote}'", pod.metadata.name))?,
    };
    Ok(Forwarding { local: local.unwrap_or(number), remote: number })
}

/// A service port, by number or name, turned into the port its pods listen on.
fn service_forwarding(service: &Service, spec: &str) -> Result<Forwarding> {
    let (local, remote) = split_spec(spec)?;
    let name = &service.metadata.name;
    let port = match port_number(remote) {
        Some(number) => service.spec.ports.iter().find(|p| p.port == i32::from(number)),
        None => service.spec.ports.iter().find(|p| p.name == remote),
    };
    let port = port.ok_or_else(|| anyhow!("Service {name} does not have a service port {remote}"))?;
    let target = if port.target_port == 0 { port.port } else { port.target_port };
    let remote = u16::try_from(target).map_err(|_| anyhow!("service {name} targets port {target}, which is not a port"))?;
    let service_port = u16::try_from(port.port).unwrap_or(remote);
    Ok(Forwarding { local: local.unwrap_or(service_port), remote })
}

#[cfg(test)]
mod tests {
    use shared::model::{Container, ContainerPort, ObjectMeta, PodSpec, ServicePort, ServiceSpec};

    use super::*;

    fn pod() -> Pod {
        let http = ContainerPort { name: "http".into(), container_port: 8080, ..Default::default() };
        let spec =
            PodSpec { containers: vec![Container { name: "web".into(), ports: vec![http], ..Default::default() }], ..Default::default() };
        Pod { metadata: ObjectMeta::named("default", "web"), spec, ..Default::default() }
    }

    fn service() -> Service {
        let ports = vec![
            ServicePort { name: "web".into(), port: 80, target_port: 8080, ..Default::default() },
            ServicePort { name: "same".into(), port: 9000, target_port: 0, ..Default::default() },
        ];
        Service { metadata: ObjectMeta::named("default", "shop"), spec: ServiceSpec { ports, ..Default::default() }, ..Default::default() }
    }

    #[test]
    fn pod_ports_by_number_or_name_and_local_ports_as_kubectl_reads_them() {
        let forwarding = |spec| pod_forwarding(&pod(), spec).map_err(|e| e.to_string());
        assert_eq!(forwarding("8080:80"), Ok(Forwarding { local: 8080, remote: 80 }));
        assert_eq!(forwarding("80"), Ok(Forwarding { local: 80, remote: 80 }));
        assert_eq!(forwarding(":80"), Ok(Forwarding { local: 0, remote: 80 }));
        assert_eq!(forwarding("9000:http"), Ok(Forwarding { local: 9000, remote: 8080 }));
        assert_eq!(forwarding("db"), Err("Pod 'web' does not have a named port 'db'".into()));
        assert!(forwarding("x:80").unwrap_err().contains("invalid local port"));
        assert!(forwarding("8080:").unwrap_err().contains("names no remote port"));
    }

    #[test]
    fn service_ports_turn_into_their_target_ports() {
        let forwarding = |spec| service_forwarding(&service(), spec).map_err(|e| e.to_string());
        assert_eq!(forwarding("8888:80"), Ok(Forwarding { local: 8888, remote: 8080 }));
        assert_eq!(forwarding("80"), Ok(Forwarding { local: 80, remote: 8080 }), "the local port is the service port");
        assert_eq!(forwarding("web"), Ok(Forwarding { local: 80, remote: 8080 }));
        assert_eq!(forwarding("9000"), Ok(Forwarding { local: 9000, remote: 9000 }), "no target port: the port itself");
        assert_eq!(forwarding("81"), Err("Service shop does not have a service port 81".into()));
    }
}
