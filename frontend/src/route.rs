//! The dashboard's pages and their URLs. Routes live in the fragment (`#/pods/default/web`)
//! so any static server, the `shepherd` server or `python3 -m http.server`, serves every
//! page from the one `index.html` at `/`.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Cluster,
    Apply,
    Pod { namespace: String, name: String },
    Events,
    Deployments,
    Services,
    Nodes,
    Simulator,
    NotFound(String),
}

impl Route {
    /// Reads a location hash (`#/nodes`, `#/pods/ns/name`, `` or `#` for the cluster view).
    pub fn parse(hash: &str) -> Route {
        let path = hash.trim_start_matches('#').trim_start_matches('/');
        let path = path.split(['?', '#']).next().unwrap_or("");
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        match parts.as_slice() {
            [] | ["cluster"] => Route::Cluster,
            ["apply"] => Route::Apply,
            ["pods", namespace, name] => Route::Pod { namespace: decode(namespace), name: decode(name) },
            ["events"] => Route::Events,
            ["deployments"] => Route::Deployments,
            ["services"] => Route::Services,
            ["nodes"] => Route::Nodes,
            ["simulator"] => Route::Simulator,
            _ => Route::NotFound(path.to_string()),
        }
    }

    /// The `href` that leads here.
    pub fn href(&self) -> String {
        match self {
            Route::Cluster => "#/".to_string(),
            Route::Apply => "#/apply".to_string(),
            Route::Pod { namespace, name } => format!("#/pods/{}/{}", encode(namespace), encode(name)),
            Route::Events => "#/events".to_string(),
            Route::Deployments => "#/deployments".to_string(),
            Route::Services => "#/services".to_string(),
            Route::Nodes => "#/nodes".to_string(),
            Route::Simulator => "#/simulator".to_string(),
            Route::NotFound(path) => format!("#/{path}"),
        }
    }

    /// Pages that talk to the server; the simulator does not.
    pub fn needs_server(&self) -> bool {
        !matches!(self, Route::Simulator)
    }
}

/// Object names are DNS labels, but a hand-typed URL may hold anything: escape the few
/// characters that would break the fragment.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(byte as char),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_page() {
        assert_eq!(Route::parse(""), Route::Cluster);
        assert_eq!(Route::parse("#/"), Route::Cluster);
        assert_eq!(Route::parse("#/apply"), Route::Apply);
        assert_eq!(Route::parse("#/pods/default/web-server"), Route::Pod { namespace: "default".into(), name: "web-server".into() });
        assert_eq!(Route::parse("#/nodes/"), Route::Nodes);
        assert_eq!(Route::parse("#/simulator?x=1"), Route::Simulator);
        assert_eq!(Route::parse("#/nope/x"), Route::NotFound("nope/x".into()));
    }

    #[test]
    fn href_and_parse_round_trip() {
        for route in [
            Route::Cluster,
            Route::Apply,
            Route::Pod { namespace: "team a".into(), name: "web/0%".into() },
            Route::Events,
            Route::Deployments,
            Route::Services,
            Route::Nodes,
            Route::Simulator,
        ] {
            assert_eq!(Route::parse(&route.href()), route);
        }
    }

    #[test]
    fn only_the_simulator_works_without_a_server() {
        assert!(!Route::Simulator.needs_server());
        assert!(Route::Cluster.needs_server());
    }
}
