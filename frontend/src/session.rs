//! App-wide state that is not the cluster: the page shown, the namespace picked, the token
//! and whether the server asked for one, and what the server said about itself.

use std::rc::Rc;

use shared::api::Info;
use yew::Reducible;

use crate::api::Client;
use crate::route::Route;

/// Local-storage keys.
pub const TOKEN_KEY: &str = "shepherd.token";
pub const NAMESPACE_KEY: &str = "shepherd.namespace";
/// The namespace switcher's value for "every namespace".
pub const ALL_NAMESPACES: &str = "*";

/// Can the dashboard talk to a server?
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Server {
    #[default]
    Unknown,
    /// Boxed: an answer is large, and most sessions hold `Unknown` for a moment only.
    Up(Box<Info>),
    Down(String),
}

/// The header's line about the server: what it is, its store, its scheduler and which
/// server leads (its identity, as `GET /api/v1/info` says).
pub fn server_line(info: &Info) -> String {
    let leader = if info.leader.is_empty() { "none" } else { info.leader.as_str() };
    format!("{} {} · {} · scheduler {} · leader {leader}", info.name, info.version, info.store, info.scheduler_profile)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub route: Route,
    /// `None` shows every namespace.
    pub namespace: Option<String>,
    pub token: Option<String>,
    /// The server answered 401: show the login dialog, with its message.
    pub login: Option<String>,
    pub server: Server,
}

impl Session {
    /// A session from the saved token and namespace and the current URL.
    pub fn restore(route: Route, token: Option<String>, namespace: Option<String>) -> Self {
        let namespace = match namespace.as_deref() {
            None | Some("") => Some(shared::model::DEFAULT_NAMESPACE.to_string()),
            Some(ALL_NAMESPACES) => None,
            Some(ns) => Some(ns.to_string()),
        };
        Session { route, namespace, token: token.filter(|t| !t.is_empty()), login: None, server: Server::Unknown }
    }

    pub fn client(&self) -> Client {
        Client::new(self.token.as_deref())
    }

    /// The namespace new objects go to when a manifest names none.
    pub fn target_namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(shared::model::DEFAULT_NAMESPACE)
    }

    /// How long a node may go without a heartbeat before it is not ready: the server's
    /// `--node-monitor-grace`, or its default until the server has said.
    pub fn node_monitor_grace(&self) -> std::time::Duration {
        match &self.server {
            Server::Up(info) if info.node_monitor_grace_ms > 0 => std::time::Duration::from_millis(info.node_monitor_grace_ms),
            _ => shared::readiness::DEFAULT_NODE_MONITOR_GRACE,
        }
    }

    /// The value saved in local storage for the namespace.
    pub fn namespace_setting(&self) -> &str {
        self.namespace.as_deref().unwrap_or(ALL_NAMESPACES)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum SessionAction {
    Navigate(Route),
    /// `None` = all namespaces.
    SetNamespace(Option<String>),
    /// A request answered 401.
    Unauthorized(String),
    /// The user entered a token (empty = none).
    LogIn(String),
    LogOut,
    /// What `GET /api/v1/info` answered.
    ServerInfo(Result<Info, String>),
}

impl Reducible for Session {
    type Action = SessionAction;

    fn reduce(self: Rc<Self>, action: SessionAction) -> Rc<Self> {
        let mut next = (*self).clone();
        match action {
            SessionAction::Navigate(route) => next.route = route,
            SessionAction::SetNamespace(namespace) => next.namespace = namespace,
            SessionAction::Unauthorized(message) => next.login = Some(message),
            SessionAction::LogIn(token) => {
                next.token = Some(token).filter(|t| !t.is_empty());
                next.login = None;
            }
            SessionAction::LogOut => next.token = None,
            SessionAction::ServerInfo(Ok(info)) => {
                if info.auth_required && next.token.is_none() {
                    next.login = Some("This server requires a token.".to_string());
                }
                next.server = Server::Up(Box::new(info));
            }
            SessionAction::ServerInfo(Err(message)) => next.server = Server::Down(message),
        }
        if next == *self { self } else { Rc::new(next) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Rc<Session> {
        Rc::new(Session::restore(Route::Cluster, None, None))
    }

    #[test]
    fn the_header_names_the_leader() {
        let info = Info {
            name: "shepherd".into(),
            version: "0.1.0".into(),
            store: "memory".into(),
            scheduler_profile: "spread".into(),
            ..Info::default()
        };
        assert_eq!(
            server_line(&Info { leader: "host_1".into(), ..info.clone() }),
            "shepherd 0.1.0 · memory · scheduler spread · leader host_1"
        );
        assert!(server_line(&info).ends_with("· leader none"));
    }

    #[test]
    fn restores_the_default_namespace_or_all() {
        assert_eq!(session().namespace.as_deref(), Some("default"));
        let all = Session::restore(Route::Cluster, Some(String::new()), Some(ALL_NAMESPACES.into()));
        assert_eq!(all.namespace, None);
        assert_eq!(all.token, None);
        assert_eq!(all.namespace_setting(), ALL_NAMESPACES);
        assert_eq!(all.target_namespace(), "default");
    }

    #[test]
    fn a_401_asks_for_a_token_and_logging_in_clears_it() {
        let s = session().reduce(SessionAction::Unauthorized("missing bearer token".into()));
        assert_eq!(s.login.as_deref(), Some("missing bearer token"));
        let s = s.reduce(SessionAction::LogIn("secret".into()));
        assert_eq!((s.login.clone(), s.token.as_deref()), (None, Some("secret")));
        assert_eq!(s.client(), Client::new(Some("secret")));
        let s = s.reduce(SessionAction::LogOut);
        assert_eq!(s.token, None);
    }

    #[test]
    fn a_server_that_requires_auth_prompts_only_without_a_token() {
        let info = Info { auth_required: true, ..Default::default() };
        let s = session().reduce(SessionAction::ServerInfo(Ok(info.clone())));
        assert!(s.login.is_some());
        let with_token = Rc::new(Session::restore(Route::Cluster, Some("t".into()), None));
        assert!(with_token.reduce(SessionAction::ServerInfo(Ok(info))).login.is_none());
    }

    #[test]
    fn unchanged_state_is_the_same_rc() {
        let s = session();
        assert!(Rc::ptr_eq(&s, &s.clone().reduce(SessionAction::Navigate(Route::Cluster))));
    }
}
