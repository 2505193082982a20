//! The variables the kubelet gives every container about the Services of its pod's namespace
//! that exist when it starts (unless the pod sets `enable_service_links: false`), named as
//! its `envvars` package names them: `<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT` (the first
//! port), `<NAME>_SERVICE_PORT_<PORT NAME>`, and Docker's link variables `<NAME>_PORT`,
//! `<NAME>_PORT_<port>_<PROTOCOL>` with `_PROTO`, `_PORT` and `_ADDR`. A headless Service, or
//! one without an address yet, has none. The container's own variables win.

use std::collections::HashSet;

use shared::model::{Pod, Service};

use crate::dns::records::HEADLESS;
use crate::services::Services;

/// A Service's name as a variable's prefix: upper case, `-` as `_`.
fn prefix(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

/// The variables of `services`, in their order, each Service's together.
pub fn service_variables<'a>(services: impl IntoIterator<Item = &'a Service>) -> Vec<(String, String)> {
    let mut variables = Vec::new();
    for service in services {
        let ip = service.spec.cluster_ip.as_str();
        let Some(first) = service.spec.ports.first() else { continue };
        if ip.is_empty() || ip == HEADLESS {
            continue;
        }
        let name = prefix(&service.metadata.name);
        variables.push((format!("{name}_SERVICE_HOST"), ip.to_string()));
        variables.push((format!("{name}_SERVICE_PORT"), first.port.to_string()));
        for port in service.spec.ports.iter().filter(|p| !p.name.is_empty()) {
            variables.push((format!("{name}_SERVICE_PORT_{}", prefix(&port.name)), port.port.to_string()));
        }
        // An IPv6 address goes in brackets in a URL.
        let host = if ip.contains(':') { format!("[{ip}]") } else { ip.to_string() };
        for (index, port) in service.spec.ports.iter().enumerate() {
            let protocol = if port.protocol.is_empty() { "tcp".to_string() } else { port.protocol.to_ascii_lowercase() };
            let url = format!("{protocol}://{host}:{}", port.port);
            if index == 0 {
                variables.push((format!("{name}_PORT"), url.clone()));
            }
            let port_prefix = format!("{name}_PORT_{}_{}", port.port, protocol.to_ascii_uppercase());
            variables.push((port_prefix.clone(), url));
            variables.push((format!("{port_prefix}_PROTO"), protocol));
            variables.push((format!("{port_prefix}_PORT"), port.port.to_string()));
            variables.push((format!("{port_prefix}_ADDR"), ip.to_string()));
        }
    }
    variables
}

/// The variables a container of `pod` gets from the Services of its namespace known now, none
/// when the pod turns service links off.
pub fn for_pod(services: &Services, pod: &Pod) -> Vec<(String, String)> {
    match pod.spec.service_links() {
        true => service_variables(services.snapshot().in_namespace(&pod.metadata.namespace)),
        false => Vec::new(),
    }
}

/// A container's environment: its own variables in order, then the service variables it
/// does not set itself.
pub fn with_service_variables(own: Vec<(String, String)>, services: Vec<(String, String)>) -> Vec<(String, String)> {
    let named: HashSet<String> = own.iter().map(|(name, _)| name.clone()).collect();
    let mut environment = own;
    environment.extend(services.into_iter().filter(|(name, _)| !named.contains(name)));
    environment
}

#[cfg(test)]
mod tests {
    use shared::model::{ObjectMeta, ServicePort, ServiceSpec};

    use super::*;

    fn service(name: &str, cluster_ip: &str, ports: &[(&str, i32, &str)]) -> Service {
        let ports = ports
            .iter()
            .map(|(name, port, protocol)| ServicePort {
                name: name.to_string(),
                port: *port,
                target_port: *port,
                protocol: protocol.to_string(),
                ..Default::default()
            })
            .collect();
        Service {
            kind: "Service".into(),
            metadata: ObjectMeta::named("shop", name),
            spec: ServiceSpec { ports, cluster_ip: cluster_ip.into(), ..Default::default() },
            ..Default::default()
        }
    }

    fn text(variables: &[(String, String)]) -> Vec<String> {
        variables.iter().map(|(name, value)| format!("{name}={value}")).collect()
    }

    #[test]
    fn a_service_gives_its_host_ports_and_docker_link_variables_as_the_kubelet_names_them() {
        let redis = service("redis-primary", "10.96.0.11", &[("", 6379, ""), ("metrics", 9121, "TCP"), ("gossip", 7000, "udp")]);
        assert_eq!(
            text(&service_variables([&redis])),
            [
                "REDIS_PRIMARY_SERVICE_HOST=10.96.0.11",
                "REDIS_PRIMARY_SERVICE_PORT=6379",
                "REDIS_PRIMARY_SERVICE_PORT_METRICS=9121",
                "REDIS_PRIMARY_SERVICE_PORT_GOSSIP=7000",
                "REDIS_PRIMARY_PORT=tcp://10.96.0.11:6379",
                "REDIS_PRIMARY_PORT_6379_TCP=tcp://10.96.0.11:6379",
                "REDIS_PRIMARY_PORT_6379_TCP_PROTO=tcp",
                "REDIS_PRIMARY_PORT_6379_TCP_PORT=6379",
                "REDIS_PRIMARY_PORT_6379_TCP_ADDR=10.96.0.11",
                "REDIS_PRIMARY_PORT_9121_TCP=tcp://10.96.0.11:9121",
                "REDIS_PRIMARY_PORT_9121_TCP_PROTO=tcp",
                "REDIS_PRIMARY_PORT_9121_TCP_PORT=9121",
                "REDIS_PRIMARY_PORT_9121_TCP_ADDR=10.96.0.11",
                "REDIS_PRIMARY_PORT_7000_UDP=udp://10.96.0.11:7000",
                "REDIS_PRIMARY_PORT_7000_UDP_PROTO=udp",
                "REDIS_PRIMARY_PORT_7000_UDP_PORT=7000",
                "REDIS_PRIMARY_PORT_7000_UDP_ADDR=10.96.0.11",
            ]
        );
    }

    #[test]
    fn headless_services_and_those_without_an_address_give_none() {
        let headless = service("db", HEADLESS, &[("pg", 5432, "")]);
        let pending = service("web", "", &[("http", 80, "")]);
        let portless = service("empty", "10.96.0.12", &[]);
        assert!(service_variables([&headless, &pending, &portless]).is_empty());
        let v6 = service("v6", "fd00::a", &[("", 80, "")]);
        assert!(text(&service_variables([&v6])).contains(&"V6_PORT=tcp://[fd00::a]:80".to_string()));
    }

    #[test]
    fn the_containers_own_variables_come_first_and_win() {
        let own = vec![("WEB_SERVICE_HOST".to_string(), "mine".to_string()), ("A".to_string(), "1".to_string())];
        let services = service_variables([&service("web", "10.96.0.10", &[("", 80, "")])]);
        let environment = with_service_variables(own, services);
        assert_eq!(&text(&environment)[..3], ["WEB_SERVICE_HOST=mine", "A=1", "WEB_SERVICE_PORT=80"]);
        assert_eq!(environment.iter().filter(|(name, _)| name == "WEB_SERVICE_HOST").count(), 1);
    }

    #[test]
    fn a_pod_gets_its_namespaces_services_unless_it_turns_links_off() {
        let mut other = service("db", "10.96.0.12", &[("", 5432, "")]);
        other.metadata.namespace = "other".into();
        let services = Services::of([service("shop-api", "10.96.0.10", &[("", 80, "")]), other]);
        let mut pod = crate::fixtures::pod();
        pod.metadata.namespace = "shop".into();
        let variables = text(&for_pod(&services, &pod));
        assert!(variables.contains(&"SHOP_API_SERVICE_HOST=10.96.0.10".to_string()), "{variables:?}");
        assert!(!variables.iter().any(|v| v.starts_with("DB_")), "another namespace's: {variables:?}");
        pod.spec.enable_service_links = Some(false);
        assert!(for_pod(&services, &pod).is_empty(), "links turned off");
    }
}
