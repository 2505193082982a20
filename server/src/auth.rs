//! Bearer tokens and their roles: `admin` may do anything, `node` may read and write only
//! its own node, the status of pods bound to it and their deletion (plus events), `viewer`
//! may only read.
//! With no token configured the API is open, which `run` allows on loopback only. The layer
//! that applies a role's rules to each request is `app::authenticate`.
//! [`AgentKeys`] remembers which token each node's agent speaks with: the key the server
//! signs what it asks of that agent's API with.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Admin,
    Node,
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Node => "node",
            Role::Viewer => "viewer",
        }
    }
}

/// Who is calling: a token's role, for node tokens the node it speaks for, and the
/// token's fingerprint, by which the audit names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub role: Role,
    pub node: Option<String>,
    /// Set by [`Tokens::add`]; `None` for the caller of a server without tokens.
    fingerprint: Option<String>,
}

/// How many hex digits of a token's SHA-256 name it in the audit: enough to tell a
/// cluster's tokens apart, far too few to find the token from.
const FINGERPRINT_DIGITS: usize = 8;

/// The first [`FINGERPRINT_DIGITS`] hex digits of `token`'s SHA-256
/// (`printf %s TOKEN | sha256sum | cut -c1-8`): what names a token in a log, never the token.
pub fn fingerprint(token: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>()[..FINGERPRINT_DIGITS].to_string()
}

impl Principal {
    /// A principal of `role`, for node tokens speaking for `node`.
    pub fn new(role: Role, node: Option<String>) -> Self {
        Principal { role, node, fingerprint: None }
    }

    /// The caller when no token is configured.
    pub fn anonymous() -> Self {
        Principal::new(Role::Admin, None)
    }

    /// The token as a refusal names it: its role, or the node it speaks for.
    pub(crate) fn describe(&self) -> String {
        match (&self.node, self.role) {
            (Some(node), _) => format!("the token of node {node}"),
            (None, Role::Admin) => "an admin token".to_string(),
            (None, role) => format!("a {} token", role.as_str()),
        }
    }

    /// The caller as an audit line names it, as Kubernetes audits the user: the token's
    /// role (or node) and fingerprint.
    pub(crate) fn audited(&self) -> String {
        match &self.fingerprint {
            Some(fingerprint) => format!("{} (sha256 {fingerprint})", self.describe()),
            None => "an anonymous caller (the server has no tokens)".to_string(),
        }
    }

    /// Allows a write to node `name`: admins, and the node itself.
    pub fn may_write_node(&self, name: &str) -> Result<(), ApiError> {
        match self.role {
            Role::Admin => Ok(()),
            Role::Node if self.node.as_deref() == Some(name) => Ok(()),
            _ => Err(ApiError::forbidden(format!("{} may not write node {name}", self.describe()))),
        }
    }

    /// Allows the delete of a pod bound to `node_name`: admins, and that node (which
    /// confirms that it has stopped the pod's containers).
    pub fn may_delete_pod(&self, pod: &str, node_name: &str) -> Result<(), ApiError> {
        match self.role {
            Role::Admin => Ok(()),
            Role::Node if !node_name.is_empty() && self.node.as_deref() == Some(node_name) => Ok(()),
            _ => Err(ApiError::forbidden(format!(
                "{} may not delete pod {pod}, which is bound to {}",
                self.describe(),
                if node_name.is_empty() { "no node" } else { node_name }
            ))),
        }
    }

    /// Allows recording an event from `source`: a node records only its own agent's.
    pub fn may_record_event_from(&self, source: &str) -> Result<(), ApiError> {
        match (&self.role, &self.node) {
            (Role::Node, Some(node)) if source != shared::model::node_event_source(node) => Err(ApiError::forbidden(format!(
                "{} may record events only from its own agent (source {:?}), not from {source:?}",
                self.describe(),
                shared::model::node_event_source(node)
            ))),
            _ => Ok(()),
        }
    }

    /// Allows a session (`exec`, `attach`) in pod `pod`, bound to `node_name`: a write on the
    /// pod, as Kubernetes asks `create` on `pods/exec`, so admins, and that node alone.
    pub fn may_join_pod(&self, session: &str, pod: &str, node_name: &str) -> Result<(), ApiError> {
        match self.role {
            Role::Admin => Ok(()),
            Role::Node if !node_name.is_empty() && self.node.as_deref() == Some(node_name) => Ok(()),
            Role::Viewer => Err(ApiError::forbidden(format!(
                "a viewer token is read-only, and {session} in pod {pod} needs write rights on it (Kubernetes asks create on pods/{session})"
            ))),
            Role::Node => Err(ApiError::forbidden(format!(
                "{} may not {session} in pod {pod}, which is bound to {}",
                self.describe(),
                if node_name.is_empty() { "no node" } else { node_name }
            ))),
        }
    }

    /// Allows a write to the status of a pod bound to `node_name`.
    pub fn may_write_pod_status(&self, pod: &str, node_name: &str) -> Result<(), ApiError> {
        match self.role {
            Role::Admin => Ok(()),
            Role::Node if !node_name.is_empty() && self.node.as_deref() == Some(node_name) => Ok(()),
            _ => Err(ApiError::forbidden(format!(
                "{} may not write the status of pod {pod}, which is bound to {}",
                self.describe(),
                if node_name.is_empty() { "no node" } else { node_name }
            ))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read the tokens file {path}: {message}")]
    Read { path: String, message: String },
    #[error("{path} line {line}: {message}")]
    Syntax { path: String, line: usize, message: String },
    #[error(
        "the tokens file {path} holds no tokens (only comments or blank lines), so the server would be open to anyone: add a line such as `<token> admin`, or leave out --tokens-file"
    )]
    NoTokens { path: String },
    #[error("{path} line {second}: the token of line {first} again; a token must name one principal, so give each line its own token")]
    Repeated { path: String, first: usize, second: usize },
    #[error(
        "--token is also the token on line {line} of the tokens file {path}; a token must name one principal: leave out --token or that line"
    )]
    FlagInFile { path: String, line: usize },
    #[error(
        "{path} line {second}: a second token for node {node} (the first is on line {first}); the server signs what it asks of a node's agent with the node's token, so each node has one"
    )]
    SecondNodeToken { path: String, node: String, first: usize, second: usize },
}

/// The configured tokens. Empty means the API is open.
#[derive(Clone, Default)]
pub struct Tokens {
    by_token: HashMap<Arc<str>, Principal>,
    /// Each node token by its node's name: what the server signs its requests to that node's
    /// agent API with until the agent has spoken ([`AgentKeys`]).
    by_node: HashMap<String, String>,
    /// The tokens file, and the line of each token read from it.
    file: Option<(String, HashMap<String, usize>)>,
}

/// Never prints a token: only how many there are.
impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} configured)", self.by_token.len())
    }
}

impl Tokens {
    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }

    pub fn add(&mut self, token: &str, principal: Principal) {
        if let (Role::Node, Some(node)) = (principal.role, &principal.node) {
            self.by_node.insert(node.clone(), token.to_string());
        }
        let principal = Principal { fingerprint: Some(fingerprint(token)), ..principal };
        self.by_token.insert(Arc::from(token), principal);
    }

    /// The token of node `node`, if it has a node token.
    pub fn of_node(&self, node: &str) -> Option<&str> {
        self.by_node.get(node).map(String::as_str)
    }

    /// Adds `--token`'s admin token, which must not also be in the tokens file.
    pub fn add_flag_token(&mut self, token: &str) -> Result<(), TokenError> {
        if let Some((path, lines)) = &self.file
            && let Some(&line) = lines.get(token)
        {
            return Err(TokenError::FlagInFile { path: path.clone(), line });
        }
        self.add(token, Principal::new(Role::Admin, None));
        Ok(())
    }

    /// The principal `token` names, and the token as a request's [`Bearer`].
    pub fn lookup(&self, token: &str) -> Option<(Bearer, &Principal)> {
        self.by_token.get_key_value(token).map(|(token, principal)| (Bearer(token.clone()), principal))
    }

    /// The registry user each token signs in to `shepherd registry` as, with the token as its
    /// password (`shared::image`): a node token as its node, admin tokens as `admin`,
    /// `admin-2`, … in the file's order with `--token` first. Viewer tokens get none:
    /// distribution's htpasswd cannot make a user who may pull but not push.
    pub fn registry_users(&self) -> Vec<(String, &str)> {
        let line = |token: &str| self.file.as_ref().and_then(|(_, lines)| lines.get(token).copied()).unwrap_or(0);
        let mut admins: Vec<&str> = self.by_token.iter().filter(|(_, p)| p.role == Role::Admin).map(|(token, _)| token.as_ref()).collect();
        admins.sort_by_key(|token| line(token));
        let mut users: Vec<(String, &str)> =
            admins.into_iter().enumerate().map(|(i, token)| (shared::image::admin_user(i), token)).collect();
        let mut nodes: Vec<(String, &str)> = self.by_node.iter().map(|(node, token)| (node.clone(), token.as_str())).collect();
        nodes.sort();
        users.extend(nodes);
        users
    }

    /// Reads a tokens file: one `<token> <role> [node-name]` per line, role `admin`,
    /// `viewer` or `node` (which needs the node name); `#` starts a comment. A file without
    /// a token is an error: it would silently leave the server open.
    pub fn load(path: &Path) -> Result<Tokens, TokenError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| TokenError::Read { path: shown.clone(), message: e.to_string() })?;
        #[cfg(unix)]
        if let Ok(metadata) = std::fs::metadata(path)
            && let Some(warning) = open_permissions_warning(&shown, std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()))
        {
            tracing::warn!("{warning}");
        }
        let tokens = Tokens::parse(&text, &shown)?;
        if tokens.is_empty() {
            return Err(TokenError::NoTokens { path: shown });
        }
        Ok(tokens)
    }

    pub fn parse(text: &str, path: &str) -> Result<Tokens, TokenError> {
        // Editors on Windows start a UTF-8 file with a byte order mark; it is no part of the first token.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut tokens = Tokens::default();
        let mut lines = HashMap::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let syntax = |message: String| TokenError::Syntax { path: path.to_string(), line: index + 1, message };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let principal = match fields.as_slice() {
                [_, "admin"] => Principal::new(Role::Admin, None),
                [_, "viewer"] => Principal::new(Role::Viewer, None),
                // The rule of a node's metadata.name: any other name could never register.
                [_, "node", node] => match shared::validation::node_name_error(node) {
                    None => Principal::new(Role::Node, Some(node.to_string())),
                    Some(why) => return Err(syntax(format!("not a valid node name: {why}"))),
                },
                [_, "node"] => return Err(syntax("a node token needs the node name: <token> node <node-name>".into())),
                [_, role, ..] if !["admin", "viewer", "node"].contains(role) => {
                    return Err(syntax(format!("unknown role {role:?}: use admin, node or viewer")));
                }
                _ => return Err(syntax("expected <token> <role> [node-name]".into())),
            };
            if fields[0].len() < 8 {
                return Err(syntax("a token must be at least 8 characters long".into()));
            }
            if let Some(&first) = lines.get(fields[0]) {
                return Err(TokenError::Repeated { path: path.to_string(), first, second: index + 1 });
            }
            if let Some(node) = &principal.node
                && let Some(first) = tokens.of_node(node).and_then(|token| lines.get(token))
            {
                let (node, first) = (node.clone(), *first);
                return Err(TokenError::SecondNodeToken { path: path.to_string(), node, first, second: index + 1 });
            }
            lines.insert(fields[0].to_string(), index + 1);
            tokens.add(fields[0], principal);
        }
        tokens.file = Some((path.to_string(), lines));
        Ok(tokens)
    }
}

/// The warning for a tokens file at `path` whose permission bits `mode` let its group or
/// others read or change it, as ssh warns about a private key.
fn open_permissions_warning(path: &str, mode: u32) -> Option<String> {
    (mode & 0o077 != 0).then(|| {
        format!(
            "the tokens file {path} is open to its group or others (mode {:04o}): whoever can read it can use its tokens. Run `chmod 600 {path}`",
            mode & 0o7777
        )
    })
}

/// The token a request authenticated with. The handlers through which a node's agent
/// speaks (registration, lease renewal) give it to [`AgentKeys`].
#[derive(Clone)]
pub struct Bearer(Arc<str>);

/// The token each node's agent last registered or renewed its lease with: the key its agent
/// API checks the server's signatures with (`shepherd_client::agent_auth`), whatever the
/// token's role, so that a fleet's one admin token covers all its nodes. Only principals
/// that may write node N (admins and N's own token) record a key for N. It is kept in
/// memory: after a restart, each node's next renewal records it again, and a node token
/// from the tokens file stands in until then.
#[derive(Default)]
pub struct AgentKeys(Mutex<HashMap<String, Arc<str>>>);

impl AgentKeys {
    /// Remembers that node `node`'s agent speaks with `bearer`'s token.
    pub fn record(&self, node: &str, bearer: &Bearer) {
        let mut keys = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match keys.get_mut(node) {
            // Every renewal lands here: the same token is the same allocation, so most cost
            // one comparison and no allocation.
            Some(key) if Arc::ptr_eq(key, &bearer.0) => {}
            Some(key) => *key = bearer.0.clone(),
            None => {
                keys.insert(node.to_string(), bearer.0.clone());
            }
        }
    }

    /// Forgets a deleted node's key, so that the map does not outgrow the nodes.
    pub fn forget(&self, node: &str) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(node);
    }

    /// What to sign requests to node `node`'s agent with: the token its agent last spoke
    /// with, else its node token in `tokens`; `None` when the server knows neither.
    pub fn signing_key(&self, node: &str, tokens: &Tokens) -> Option<Arc<str>> {
        let recorded = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).get(node).cloned();
        recorded.or_else(|| tokens.of_node(node).map(Arc::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_names_a_token_by_its_fingerprint_with_the_right_article() {
        let tokens = Tokens::parse("admin-secret-token admin\nviewer-secret viewer\nnode-1-secret node node-1\n", "tokens").unwrap();
        let audited = |token: &str| tokens.lookup(token).unwrap().1.audited();
        // `printf %s admin-secret-token | sha256sum`
        assert_eq!(fingerprint("admin-secret-token"), "76559a71");
        assert_eq!(audited("admin-secret-token"), "an admin token (sha256 76559a71)");
        assert_eq!(audited("viewer-secret"), format!("a viewer token (sha256 {})", fingerprint("viewer-secret")));
        assert_eq!(audited("node-1-secret"), format!("the token of node node-1 (sha256 {})", fingerprint("node-1-secret")));
        assert!(!audited("admin-secret-token").contains("secret"), "never the token itself");
        assert_eq!(Principal::anonymous().audited(), "an anonymous caller (the server has no tokens)");
    }

    #[test]
    fn registry_users_are_nodes_and_numbered_admins_without_viewers() {
        let mut tokens =
            Tokens::parse("second-admin admin\nnode-one-secret node node-1\nfirst-admin admin\nviewer-secret viewer\n", "t").unwrap();
        tokens.add_flag_token("flag-admin-token").unwrap();
        let users = tokens.registry_users();
        let expected =
            [("admin", "flag-admin-token"), ("admin-2", "second-admin"), ("admin-3", "first-admin"), ("node-1", "node-one-secret")];
        assert_eq!(users, expected.map(|(u, t)| (u.to_string(), t)));
    }

    #[test]
    fn parses_a_tokens_file_with_every_role() {
        let tokens =
            Tokens::parse("# comment\nadmin-secret admin\nnode-one-secret node node-1  # n1\n\nviewer-secret viewer\n", "t").unwrap();
        assert_eq!(tokens.lookup("admin-secret").unwrap().1.role, Role::Admin);
        assert_eq!(tokens.lookup("node-one-secret").unwrap().1.node.as_deref(), Some("node-1"));
        assert_eq!(tokens.lookup("viewer-secret").unwrap().1.role, Role::Viewer);
    }

    #[test]
    fn rejects_bad_lines_with_their_number() {
        let err = Tokens::parse("abcdefgh admin\nabcdefgh node\n", "tokens").unwrap_err();
        assert_eq!(err.to_string(), "tokens line 2: a node token needs the node name: <token> node <node-name>");
        let err = Tokens::parse("abcdefgh root\n", "tokens").unwrap_err();
        assert!(err.to_string().contains("unknown role \"root\""), "{err}");
        let err = Tokens::parse("short admin\n", "tokens").unwrap_err();
        assert!(err.to_string().contains("at least 8"), "{err}");
    }

    #[test]
    fn a_token_names_one_principal() {
        let err = Tokens::parse("# tokens\nshared-secret admin\nother-secret viewer\nshared-secret node node-1\n", "tokens").unwrap_err();
        assert_eq!(err, TokenError::Repeated { path: "tokens".into(), first: 2, second: 4 });
        assert_eq!(
            err.to_string(),
            "tokens line 4: the token of line 2 again; a token must name one principal, so give each line its own token"
        );
        assert!(Tokens::parse("same-secret admin\nsame-secret admin\n", "tokens").is_err(), "even for the same principal");

        let mut tokens = Tokens::parse("file-secret viewer\n", "/etc/shepherd/tokens").unwrap();
        let err = tokens.add_flag_token("file-secret").unwrap_err();
        assert_eq!(err, TokenError::FlagInFile { path: "/etc/shepherd/tokens".into(), line: 1 });
        assert!(err.to_string().starts_with("--token is also the token on line 1 of the tokens file /etc/shepherd/tokens"), "{err}");
        assert_eq!(tokens.lookup("file-secret").unwrap().1.role, Role::Viewer, "the file's principal stays");
        tokens.add_flag_token("flag-secret").unwrap();
        assert_eq!(tokens.lookup("flag-secret").unwrap().1.role, Role::Admin);
        Tokens::default().add_flag_token("flag-secret").unwrap();
    }

    #[test]
    fn each_node_has_one_token_the_server_signs_with() {
        let tokens = Tokens::parse(
            "admin-secret admin
node-one-secret node node-1
node-two-secret node node-2
",
            "t",
        )
        .unwrap();
        assert_eq!(
            (tokens.of_node("node-1"), tokens.of_node("node-2"), tokens.of_node("node-3")),
            (Some("node-one-secret"), Some("node-two-secret"), None)
        );
        let err = Tokens::parse(
            "node-one-secret node node-1
admin-secret admin
node-one-again node node-1
",
            "t",
        )
        .unwrap_err();
        assert_eq!(err, TokenError::SecondNodeToken { path: "t".into(), node: "node-1".into(), first: 1, second: 3 });
        assert!(err.to_string().starts_with("t line 3: a second token for node node-1 (the first is on line 1)"), "{err}");
    }

    #[test]
    fn the_server_signs_with_the_token_a_node_spoke_with_else_its_node_token() {
        let tokens = Tokens::parse("admin-secret admin\nnode-one-secret node node-1\n", "t").unwrap();
        let keys = AgentKeys::default();
        let key = |node| keys.signing_key(node, &tokens).map(|key| key.to_string());
        assert_eq!((key("node-1").as_deref(), key("sim-0")), (Some("node-one-secret"), None));
        let (admin, _) = tokens.lookup("admin-secret").unwrap();
        for node in ["node-1", "sim-0"] {
            keys.record(node, &admin);
            keys.record(node, &admin);
            assert_eq!(key(node).as_deref(), Some("admin-secret"), "{node}: the token its agent speaks with");
            keys.forget(node);
        }
        assert_eq!((key("node-1").as_deref(), key("sim-0")), (Some("node-one-secret"), None), "a deleted node's key is gone");
    }

    #[test]
    fn a_byte_order_mark_is_no_part_of_the_first_token() {
        let tokens = Tokens::parse("\u{feff}admin-secret admin\n", "t").unwrap();
        assert_eq!(tokens.lookup("admin-secret").unwrap().1.role, Role::Admin);
    }

    #[test]
    fn a_node_token_names_a_valid_node_name() {
        let err = Tokens::parse("admin-secret admin\nnode-secret node N1\n", "t").err().unwrap();
        assert_eq!(
            err.to_string(),
            "t line 2: not a valid node name: \"N1\" is not a valid DNS-1123 name: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
        );
        assert!(Tokens::parse("node-secret node node-1.example\n", "t").is_ok());
    }

    #[test]
    fn a_tokens_file_open_to_others_is_warned_about() {
        assert_eq!(open_permissions_warning("/etc/t", 0o100600), None);
        assert_eq!(open_permissions_warning("/etc/t", 0o100400), None);
        let warning = open_permissions_warning("/etc/t", 0o100644).unwrap();
        assert!(warning.contains("/etc/t is open to its group or others (mode 0644)") && warning.contains("chmod 600 /etc/t"), "{warning}");
        assert!(open_permissions_warning("/etc/t", 0o100620).is_some(), "writable by its group");
    }

    #[test]
    fn a_tokens_file_without_a_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "# admin-secret admin\n\n   # nothing here\n").unwrap();
        let err = Tokens::load(&path).unwrap_err();
        assert!(matches!(err, TokenError::NoTokens { .. }), "{err}");
        assert!(err.to_string().contains("holds no tokens"), "{err}");
        std::fs::write(&path, "admin-secret admin\n").unwrap();
        assert!(!Tokens::load(&path).unwrap().is_empty());
    }

    #[test]
    fn debug_output_hides_the_tokens() {
        let tokens = Tokens::parse("very-secret-token admin\n", "t").unwrap();
        assert_eq!(format!("{tokens:?}"), "Tokens(1 configured)");
    }

    #[test]
    fn a_node_may_write_only_itself() {
        let p = Principal::new(Role::Node, Some("n1".into()));
        assert!(p.may_write_node("n1").is_ok());
        assert!(p.may_write_node("n2").is_err());
        assert!(p.may_write_pod_status("default/a", "n1").is_ok());
        assert!(p.may_write_pod_status("default/a", "").is_err());
        assert!(p.may_delete_pod("default/a", "n1").is_ok());
        assert!(p.may_delete_pod("default/a", "n2").is_err());
        assert!(p.may_delete_pod("default/a", "").is_err());
        assert!(p.may_record_event_from("agent/n1").is_ok());
        for spoofed in ["agent/n2", "scheduler", "api-server", ""] {
            assert!(p.may_record_event_from(spoofed).is_err(), "{spoofed:?}");
        }
        assert!(Principal::anonymous().may_record_event_from("scheduler").is_ok());
    }
}
