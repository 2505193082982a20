//! `kubectl auth can-i`: `authorization.k8s.io/v1` SelfSubjectAccessReviews and, for
//! `--list`, SelfSubjectRulesReviews. Each is answered by the authorization every request
//! passes (`app::authorize`; its role rules alone, `app::role_allows`, when no object is
//! named), asked of the request kubectl would send through `/k8s` for the verb and resource
//! named, so the answer and the real authorization cannot disagree.

use axum::Extension;
use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use k8s_openapi::api::authorization::v1 as authorization;
use serde::de::DeserializeOwned;

use super::kinds::{self, KINDS};
use super::objects::media_type;
use super::protobuf;
use super::status::{Result, Status};
use crate::auth::Principal;
use crate::state::AppState;

const GROUP_PATH: &str = "/k8s/apis/authorization.k8s.io/v1";
const ACCESS_REVIEWS: &str = "selfsubjectaccessreviews";
const RULES_REVIEWS: &str = "selfsubjectrulesreviews";

/// Whether `path` asks what its caller may do: a read whatever the role, though a POST.
pub fn is_review(path: &str) -> bool {
    path.strip_prefix(GROUP_PATH)
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|plural| [ACCESS_REVIEWS, RULES_REVIEWS].contains(&plural))
}

pub fn router() -> Router<AppState> {
    Router::new()
        .route(&format!("{GROUP_PATH}/{ACCESS_REVIEWS}"), post(access_review))
        .route(&format!("{GROUP_PATH}/{RULES_REVIEWS}"), post(rules_review))
}

/// The review in the body, as JSON or as the protobuf kubectl's typed client sends.
fn review<T: DeserializeOwned>(headers: &HeaderMap, body: &[u8]) -> Result<T> {
    let value = match media_type(headers).as_str() {
        protobuf::MEDIA_TYPE => protobuf::access_review(body)?,
        "application/json" | "" => {
            serde_json::from_slice(body).map_err(|e| Status::bad_request(format!("the body is not valid JSON: {e}")))?
        }
        other => return Err(Status::unsupported_media_type(format!("send the review as application/json (got {other})"))),
    };
    serde_json::from_value(value).map_err(|e| Status::bad_request(format!("the body is not a valid review: {e}")))
}

/// The verbs Kubernetes' authorizers know, each as the method its request uses.
const VERBS: [(&str, Method); 8] = [
    ("get", Method::GET),
    ("list", Method::GET),
    ("watch", Method::GET),
    ("create", Method::POST),
    ("update", Method::PUT),
    ("patch", Method::PATCH),
    ("delete", Method::DELETE),
    ("deletecollection", Method::DELETE),
];

fn method_of(verb: &str) -> Option<Method> {
    VERBS.iter().find(|(name, _)| *name == verb).map(|(_, method)| method.clone())
}

/// The path under `/k8s` of a request for `resource` (and `subresource`) of `group`. A
/// cluster-scoped kind's path has no namespace, though kubectl names its current one.
fn path_of(group: &str, version: &str, namespace: &str, resource: &str, name: &str, subresource: &str) -> String {
    let mut path = String::from(super::PREFIX);
    match (group, kinds::groups().contains(&group)) {
        (_, true) => path.push_str(&kinds::group_path(group)),
        ("", false) => path.push_str("/api/v1"),
        (_, false) => path.push_str(&format!("/apis/{group}/{}", if version.is_empty() { "v1" } else { version })),
    }
    let cluster_scoped = KINDS.iter().any(|e| e.gvk.group == group && e.plural == resource && !e.served.namespaced());
    if !namespace.is_empty() && !cluster_scoped {
        path.push_str(&format!("/namespaces/{namespace}"));
    }
    path.push_str(&format!("/{resource}"));
    if !name.is_empty() || !subresource.is_empty() {
        path.push_str(&format!("/{}", if name.is_empty() { "_" } else { name }));
    }
    if !subresource.is_empty() {
        path.push_str(&format!("/{subresource}"));
    }
    path
}

/// What a review is asked of: one object, which the request's own authorization judges
/// (`app::authorize`), or any object of a kind, which its role's rules alone judge.
#[derive(Clone, Copy)]
enum Asked<'a> {
    Named(&'a AppState),
    Any,
}

/// Whether every `(verb, path)` is allowed, else the first refusal's words.
fn decide(principal: &Principal, of: Asked, asked: impl IntoIterator<Item = (String, String)>) -> std::result::Result<(), String> {
    for (verb, path) in asked {
        let Some(method) = method_of(&verb) else {
            let known: Vec<&str> = VERBS.iter().map(|(name, _)| *name).collect();
            return Err(format!("Shepherd's roles know the verbs {}, not {verb:?}", known.join(", ")));
        };
        let decision = match of {
            Asked::Named(state) => crate::app::authorize(state, principal, &method, &path),
            Asked::Any => crate::app::role_allows(principal, &method, &path),
        };
        decision.map_err(|refusal| refusal.message)?;
    }
    Ok(())
}

async fn access_review(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response> {
    let mut review: authorization::SelfSubjectAccessReview = review(&headers, &body)?;
    let spec = &review.spec;
    let decision = match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (Some(a), _) => {
            let text = |field: &Option<String>| field.clone().unwrap_or_default();
            let (verb, resource) = (text(&a.verb), text(&a.resource));
            // `*` asks for every verb, or every resource this API serves.
            let verbs: Vec<String> = if verb == "*" { VERBS.iter().map(|(v, _)| v.to_string()).collect() } else { vec![verb] };
            let resources: Vec<String> =
                if resource == "*" { KINDS.iter().map(|e| e.plural.to_string()).collect() } else { vec![resource] };
            let (group, version, namespace) = (text(&a.group), text(&a.version), text(&a.namespace));
            let (name, subresource) = (text(&a.name), text(&a.subresource));
            let asked = verbs.iter().flat_map(|verb| {
                resources.iter().map(|resource| (verb.clone(), path_of(&group, &version, &namespace, resource, &name, &subresource)))
            });
            let of = if name.is_empty() { Asked::Any } else { Asked::Named(&state) };
            decide(&principal, of, asked.collect::<Vec<_>>())
        }
        (None, Some(n)) => {
            let path = n.path.clone().unwrap_or_default();
            decide(&principal, Asked::Named(&state), [(n.verb.clone().unwrap_or_default(), path)])
        }
        (None, None) => {
            return Err(Status::bad_request("a SelfSubjectAccessReview needs spec.resourceAttributes or spec.nonResourceAttributes"));
        }
    };
    review.status =
        Some(authorization::SubjectAccessReviewStatus { allowed: decision.is_ok(), reason: decision.err(), ..Default::default() });
    Ok((StatusCode::CREATED, Json(review)).into_response())
}

/// Every resource and subresource this API serves, each with the verbs of it the caller's
/// role allows in the namespace asked.
async fn rules_review(Extension(principal): Extension<Principal>, headers: HeaderMap, body: Bytes) -> Result<Response> {
    let mut review: authorization::SelfSubjectRulesReview = review(&headers, &body)?;
    let namespace = review.spec.namespace.clone().unwrap_or_default();
    let mut rules = Vec::new();
    for entry in KINDS {
        let served = std::iter::once((entry.plural.to_string(), "", entry.verbs))
            .chain(entry.subresources.iter().map(|s| (format!("{}/{}", entry.plural, s.name), s.name, s.verbs)));
        for (resource, subresource, verbs) in served {
            let in_namespace = if entry.served.namespaced() { namespace.as_str() } else { "" };
            let path = path_of(entry.gvk.group, entry.gvk.version, in_namespace, entry.plural, "", subresource);
            let allowed: Vec<String> = verbs
                .iter()
                .filter(|verb| decide(&principal, Asked::Any, [(verb.to_string(), path.clone())]).is_ok())
                .map(|v| v.to_string())
                .collect();
            if !allowed.is_empty() {
                rules.push(authorization::ResourceRule {
                    verbs: allowed,
                    api_groups: Some(vec![entry.gvk.group.to_string()]),
                    resources: Some(vec![resource]),
                    resource_names: None,
                });
            }
        }
    }
    rules.push(authorization::ResourceRule {
        verbs: vec!["create".into()],
        api_groups: Some(vec!["authorization.k8s.io".into()]),
        resources: Some(vec![ACCESS_REVIEWS.into(), RULES_REVIEWS.into()]),
        resource_names: None,
    });
    review.status = Some(authorization::SubjectRulesReviewStatus { resource_rules: rules, ..Default::default() });
    Ok((StatusCode::CREATED, Json(review)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    #[test]
    fn a_request_is_asked_at_the_path_kubectl_would_send_it_to() {
        assert_eq!(path_of("", "", "default", "pods", "", ""), "/k8s/api/v1/namespaces/default/pods");
        assert_eq!(path_of("apps", "", "team", "deployments", "web", "scale"), "/k8s/apis/apps/v1/namespaces/team/deployments/web/scale");
        assert_eq!(path_of("", "", "", "nodes", "n1", ""), "/k8s/api/v1/nodes/n1");
        assert_eq!(path_of("", "", "default", "nodes", "n1", "status"), "/k8s/api/v1/nodes/n1/status", "nodes have no namespace");
        assert_eq!(path_of("batch", "", "a", "jobs", "", ""), "/k8s/apis/batch/v1/namespaces/a/jobs");
        assert!(is_review("/k8s/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"));
        assert!(!is_review("/k8s/apis/authorization.k8s.io/v1/subjectaccessreviews"));
    }

    #[test]
    fn each_role_is_answered_by_the_rules_its_requests_pass() {
        let asked = |role, verb: &str, path: &str| decide(&Principal::new(role, None), Asked::Any, [(verb.to_string(), path.to_string())]);
        let pods = "/k8s/api/v1/namespaces/default/pods";
        assert!(asked(Role::Admin, "create", pods).is_ok());
        assert!(asked(Role::Viewer, "list", pods).is_ok());
        assert!(asked(Role::Viewer, "create", pods).unwrap_err().contains("read-only"));
        assert!(asked(Role::Viewer, "get", "/k8s/api/v1/namespaces/default/secrets").unwrap_err().contains("may not read secrets"));
        let node = Principal::new(Role::Node, Some("n1".into()));
        assert!(
            decide(&node, Asked::Any, [("delete".to_string(), format!("{pods}/web"))]).unwrap_err().contains("may only read through /k8s")
        );
        assert!(asked(Role::Admin, "escalate", pods).unwrap_err().contains("not \"escalate\""));
    }
}
