//! Rules that refuse an object the schema accepts, for what it would do on a node: a
//! `hostPath` volume reads and writes the node's own files, so a pod, or a template of pods,
//! with one is refused (403) unless the server runs with `--allow-host-path`, as a
//! PodSecurity `baseline` namespace refuses it in Kubernetes.

use shared::model::{Object, PodSpec};

use crate::error::ApiError;

/// The server flag that allows `hostPath` volumes.
pub const ALLOW_HOST_PATH_FLAG: &str = "--allow-host-path";

/// The pod spec an object runs: a pod's own, or a deployment's or ReplicaSet's template.
fn pod_spec(object: &Object) -> Option<&PodSpec> {
    match object {
        Object::Pod(pod) => Some(&pod.spec),
        Object::Deployment(deployment) => Some(&deployment.spec.template.spec),
        Object::ReplicaSet(rs) => Some(&rs.spec.template.spec),
        _ => None,
    }
}

/// Refuses `object` when it runs a `hostPath` volume and `allow_host_path` is off.
pub fn check(object: &Object, allow_host_path: bool) -> Result<(), ApiError> {
    if allow_host_path {
        return Ok(());
    }
    let Some(spec) = pod_spec(object) else { return Ok(()) };
    let Some(volume) = spec.volumes.iter().find(|v| v.host_path.is_some()) else { return Ok(()) };
    let meta = object.metadata();
    Err(ApiError::forbidden(format!(
        "{} {:?} is forbidden: its volume {:?} is a hostPath, which reads and writes the node's own files; \
         this server allows hostPath volumes only when it runs with {ALLOW_HOST_PATH_FLAG}",
        object.kind().as_str(),
        meta.name,
        volume.name
    )))
}

#[cfg(test)]
mod tests {
    use shared::model::{Deployment, HostPathVolumeSource, ObjectMeta, Pod, Volume};

    use super::*;

    fn host_path_spec() -> PodSpec {
        let host_path = HostPathVolumeSource { path: "/etc".into(), type_: String::new() };
        PodSpec { volumes: vec![Volume { name: "etc".into(), host_path: Some(host_path), ..Volume::default() }], ..PodSpec::default() }
    }

    #[test]
    fn a_host_path_is_forbidden_naming_the_flag_unless_allowed() {
        let pod = Object::Pod(Pod { metadata: ObjectMeta::named("default", "reader"), spec: host_path_spec(), ..Pod::default() });
        let refused = check(&pod, false).unwrap_err();
        assert_eq!(refused.status, axum::http::StatusCode::FORBIDDEN);
        assert!(refused.message.contains("volume \"etc\" is a hostPath"), "{}", refused.message);
        assert!(refused.message.ends_with("only when it runs with --allow-host-path"), "{}", refused.message);
        check(&pod, true).expect("allowed by the flag");

        let mut deployment = Deployment { metadata: ObjectMeta::named("default", "readers"), ..Deployment::default() };
        deployment.spec.template.spec = host_path_spec();
        assert!(check(&Object::Deployment(Box::new(deployment)), false).is_err(), "a template of pods is held to it too");
        let plain = Object::Pod(Pod { metadata: ObjectMeta::named("default", "web"), ..Pod::default() });
        check(&plain, false).expect("no hostPath, nothing to allow");
    }
}
