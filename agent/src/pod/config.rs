//! What the runtime is told to create for one container of a pod: its engine-level name,
//! labels, limits, environment, hostname, `command` and `args` with their `$(NAME)` references
//! expanded from that environment (as the kubelet's `ExpandContainerCommandAndArgs`), and
//! published ports.

use std::collections::BTreeMap;

use shared::expansion::{expand, in_pairs};
use shared::model::{Container, Pod};

use super::context::NodeContext;
use super::hosts;
use super::termination::grace_period;
use crate::runtime::{
    ContainerConfig, LABEL_CLUSTER, LABEL_CONTAINER, LABEL_GRACE, LABEL_NAMESPACE, LABEL_NODE, LABEL_POD, LABEL_POD_UID, PortMapping,
};
use crate::sandbox::clean;

/// The engine-level name of a pod's container: readable, and unique thanks to the uid and,
/// as the kubelet names them, the attempt (each restart is a new container).
pub fn container_name(pod: &Pod, container: &str, attempt: u32) -> String {
    let uid: String = pod.metadata.uid.chars().filter(char::is_ascii_alphanumeric).take(8).collect();
    format!("shepherd_{}_{}_{}_{uid}_{attempt}", clean(&pod.metadata.namespace), clean(&pod.metadata.name), clean(container))
}

/// What the runtime should be told to create for attempt `attempt` of one container of a
/// pod, with the environment [`super::env`] made for it.
pub fn container_config(ctx: &NodeContext, pod: &Pod, container: &Container, env: Vec<(String, String)>, attempt: u32) -> ContainerConfig {
    let labels = BTreeMap::from([
        (LABEL_POD_UID.to_string(), pod.metadata.uid.clone()),
        (LABEL_NAMESPACE.to_string(), pod.metadata.namespace.clone()),
        (LABEL_POD.to_string(), pod.metadata.name.clone()),
        (LABEL_CONTAINER.to_string(), container.name.clone()),
        (LABEL_NODE.to_string(), ctx.node_name.clone()),
        (LABEL_CLUSTER.to_string(), ctx.cluster.clone()),
        (LABEL_GRACE.to_string(), grace_period(pod).as_secs().to_string()),
    ]);
    let ports = port_mappings(ctx, container);
    let expanded = |words: &[String]| words.iter().map(|word| expand(word, in_pairs(&env))).collect::<Vec<_>>();
    let (command, args) = (expanded(&container.command), expanded(&container.args));
    let hostname = hosts::hostname(pod);
    // As containerd's CRI sets it, unless the container sets its own: the engine would give a
    // claimed warm sandbox's name.
    let mut env = env;
    if !env.iter().any(|(name, _)| name == "HOSTNAME") {
        env.insert(0, ("HOSTNAME".to_string(), hostname.clone()));
    }
    ContainerConfig {
        name: container_name(pod, &container.name, attempt),
        image: container.image.clone(),
        command,
        args,
        env,
        labels,
        memory_limit: container.resources.memory.max(0),
        nano_cpus: container.resources.cpu.max(0) * 1_000_000,
        ports,
        network: ctx.network.clone(),
        network_disabled: false,
        sandbox: String::new(),
        // The sandbox's instead when the container joins one.
        hostname,
        resolv_conf: String::new(),
        // The worker's, once the pod's volumes are ready.
        mounts: Vec::new(),
        stdin: container.stdin,
        stdin_once: container.stdin_once,
        tty: container.tty,
    }
}

/// A container's ports; host ports are published on the node's address unless they name one.
pub fn port_mappings(ctx: &NodeContext, container: &Container) -> Vec<PortMapping> {
    container
        .ports
        .iter()
        .map(|p| PortMapping {
            container_port: p.container_port,
            host_port: p.host_port.unwrap_or(0),
            host_ip: if p.host_ip.is_empty() { ctx.address.clone() } else { p.host_ip.clone() },
            protocol: if p.protocol.is_empty() { "tcp".to_string() } else { p.protocol.to_ascii_lowercase() },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{ctx, pod};

    /// The literal variables of the pod's first container.
    fn own(pod: &Pod) -> Vec<(String, String)> {
        pod.spec.containers[0].env.iter().map(|e| (e.name.clone(), e.value.clone())).collect()
    }

    #[test]
    fn container_config_carries_labels_limits_and_ports_on_the_node_address() {
        let pod = pod();
        let config = container_config(&ctx(), &pod, &pod.spec.containers[0], own(&pod), 0);
        assert_eq!(config.name, "shepherd_default_web-1_web_1234abcd_0");
        assert_eq!(config.labels[LABEL_POD_UID], "1234-abcd-5678");
        assert_eq!(config.labels[LABEL_NAMESPACE], "default");
        assert_eq!(config.labels[LABEL_POD], "web_1");
        assert_eq!(config.labels[LABEL_CONTAINER], "web");
        assert_eq!(config.labels[LABEL_NODE], "n1");
        assert_eq!(config.labels[LABEL_GRACE], "3");
        assert_eq!(config.memory_limit, 64 << 20);
        assert_eq!(config.nano_cpus, 250_000_000);
        let env = [("HOSTNAME", "web_1"), ("A", "1")].map(|(name, value)| (name.to_string(), value.to_string()));
        assert_eq!(config.env, env, "the pod's hostname first, as containerd's CRI sets it");
        let mine = vec![("HOSTNAME".to_string(), "mine".to_string())];
        assert_eq!(container_config(&ctx(), &pod, &pod.spec.containers[0], mine.clone(), 0).env, mine, "the container's own wins");
        assert_eq!(
            config.ports,
            vec![PortMapping { container_port: 80, host_port: 8080, host_ip: "127.0.0.1".into(), protocol: "tcp".into() }]
        );
        assert_eq!(config.network, "shepherd");
        assert_eq!(config.hostname, "web_1", "the pod's name");
    }

    #[test]
    fn command_and_args_take_references_from_the_final_environment() {
        let mut pod = pod();
        let container = &mut pod.spec.containers[0];
        container.command = vec!["$(SHELL_PATH)".into()];
        container.args = vec!["-c".into(), "echo $(GREETING) $(WEB_SERVICE_HOST) $(UNSET) $$(GREETING)".into()];
        let env = [("GREETING", "hello"), ("SHELL_PATH", "/bin/sh"), ("WEB_SERVICE_HOST", "10.96.0.10")];
        let env = env.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
        let config = container_config(&ctx(), &pod, &pod.spec.containers[0], env, 0);
        assert_eq!(config.command, ["/bin/sh"]);
        assert_eq!(config.args, ["-c", "echo hello 10.96.0.10 $(UNSET) $(GREETING)"]);
    }
}
