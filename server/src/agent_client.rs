//! The HTTP client the server asks nodes' agents with (pod logs): it follows no redirect, and
//! connects to no address that `shared::validation::unproxyable_address` refuses, whatever
//! an agent endpoint's host name resolves to.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use shared::validation::{UNPROXYABLE_KINDS, unproxyable_address};

use crate::error::ApiError;

/// The addresses of a host name, once found.
type Found = Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>>;

/// Finds the addresses of a host name.
type Lookup = fn(String) -> Found;

/// Every address a host name resolves to is one the server sends no request to.
#[derive(Debug, thiserror::Error)]
#[error("host {host} resolves only to addresses the server sends no request to: {addresses}")]
pub struct RefusedAddresses {
    host: String,
    addresses: String,
}

/// The client for agents, resolving with the system's resolver.
pub fn client() -> reqwest::Client {
    client_resolving_with(system_lookup)
}

fn client_resolving_with(lookup: Lookup) -> reqwest::Client {
    reqwest::Client::builder()
        // A redirect would take a proxied request to wherever an agent endpoint says.
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(AgentResolver { lookup }))
        .build()
        .expect("a client without TLS settings builds")
}

fn system_lookup(host: String) -> Found {
    Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.collect()) })
}

/// Drops the refused addresses of a name; fails when nothing else is left. An address
/// literal in a URL is never resolved: validation refuses those.
struct AgentResolver {
    lookup: Lookup,
}

impl Resolve for AgentResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        let lookup = (self.lookup)(host.clone());
        Box::pin(async move {
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
                lookup.await?.into_iter().partition(|address| unproxyable_address(address.ip()).is_none());
            if allowed.is_empty() && !refused.is_empty() {
                let addresses = refused
                    .iter()
                    .map(|a| format!("{} ({} address)", a.ip(), unproxyable_address(a.ip()).unwrap_or("a refused")))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(Box::new(RefusedAddresses { host, addresses }) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The 502 for a request to node `node`'s agent at `url` that failed before any answer.
pub fn unreachable(node: &str, url: &str, error: &reqwest::Error) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<RefusedAddresses>() {
            return ApiError::bad_gateway(
                format!(
                    "the agent endpoint of node {node} names host {}, which resolves only to {UNPROXYABLE_KINDS} addresses, and the server sends no request to those: give its agent an endpoint on another address (its --address)",
                    refused.host
                ),
                format!("GET {url}: {refused}"),
            );
        }
        source = cause.source();
    }
    ApiError::bad_gateway(format!("cannot reach the agent of node {node}"), format!("GET {url}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name that resolves to 0.0.0.0, which reaches this host, and to a multicast address:
    /// without the resolver's check, the request would reach the listener.
    fn unspecified_and_multicast(_: String) -> Found {
        Box::pin(async { Ok(vec!["0.0.0.0:0".parse().unwrap(), "[ff02::1]:0".parse().unwrap()]) })
    }

    async fn listener() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(|| async { "logs" })).await.unwrap() });
        port
    }

    #[tokio::test]
    async fn a_name_that_resolves_only_to_refused_addresses_is_not_reached() {
        let url = format!("http://agent.test:{}/logs/default/web", listener().await);
        let error = client_resolving_with(unspecified_and_multicast).get(&url).send().await.expect_err("no address is left");
        let refused = unreachable("n1", &url, &error);
        assert_eq!(refused.status, axum::http::StatusCode::BAD_GATEWAY);
        assert!(refused.message.contains("node n1 names host agent.test, which resolves only to link-local"), "{}", refused.message);
        let cause = refused.cause.unwrap_or_default();
        assert!(cause.contains("0.0.0.0 (an unspecified address), ff02::1 (a multicast address)"), "{cause}");
    }

    #[tokio::test]
    async fn a_name_of_a_loopback_address_is_reached() {
        let url = format!("http://localhost:{}/logs/default/web", listener().await);
        let answer = client().get(&url).send().await.unwrap();
        assert_eq!(answer.text().await.unwrap(), "logs");
    }
}
