//! `sheepctl apply -f FILE|DIR|-`: creates each object, or updates it to match the
//! manifest (retrying when someone else wrote it first), and says `created`, `configured`
//! or `unchanged`. With `--wait` it then waits until pods run and deployments are available.

use std::fmt;

use anyhow::{Result, anyhow, bail};
use shared::model::{Kind, Object};
use shepherd_client::Client;
use tokio::time::Instant;

use super::context::Context;
use super::output::print;
use super::wait;
use crate::condition::WaitFor;
use crate::files::{self, Loaded};
use crate::progress::{Mode, Progress};
use crate::settings::{Settings, kind_word};
use crate::view::object_name;

/// The manifest as last applied, so that applying it again is `unchanged` even when the
/// server filled in defaults (kubectl keeps the same record).
pub const LAST_APPLIED: &str = "shepherd.io/last-applied";
/// Attempts when the object keeps changing between our read and our write.
const CONFLICT_ATTEMPTS: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Configured,
    Unchanged,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Created => "created",
            Outcome::Configured => "configured",
            Outcome::Unchanged => "unchanged",
        })
    }
}

pub async fn run(context: &Context, args: &crate::cli::ApplyArgs) -> Result<()> {
    let timeout = shared::parse::duration(&args.timeout)?;
    // Read and check every manifest before changing anything.
    let objects = files::load(&context.client, &args.files)
        .await?
        .into_iter()
        .map(|loaded| resolve(&context.settings, loaded))
        .collect::<Result<Vec<_>>>()?;
    let total = objects.len();
    let mut applied = Vec::new();
    let mut failed = 0;
    for object in objects {
        let name = object_name(&object);
        match apply(&context.client, object).await {
            Ok((stored, outcome)) => {
                print(&format!("{name} {outcome}\n"))?;
                applied.push(stored);
            }
            Err(e) if e.downcast_ref::<shepherd_client::Error>().is_some_and(shepherd_client::Error::is_unreachable) => return Err(e),
            Err(e) if total == 1 => return Err(e.context(format!("cannot apply {name}"))),
            Err(e) => {
                eprintln!("{}", crate::terminal::safe(&format!("error: cannot apply {name}: {e:#}")));
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {total} objects could not be applied (see above)");
    }
    if args.wait {
        let deadline = Instant::now() + timeout;
        let mut progress = Progress::new(Mode::detect(Mode::Lines));
        let running = applied.iter().filter(|o| matches!(o.kind(), Kind::Pod | Kind::Deployment));
        for group in wait::Targets::grouped(running.map(|o| (o.kind(), o.metadata().namespace.as_str(), o.metadata().name.clone()))) {
            wait::until(context, &group, &WaitFor::Running, deadline, &args.timeout, &mut progress).await?;
        }
        progress.finish();
    }
    Ok(())
}

/// Checks a manifest's object and settles its namespace: the manifest's own, else `-n`,
/// and an error when both are given and differ. Fields the server owns are cleared, so the
/// output of `get -o yaml` applies cleanly.
pub fn resolve(settings: &Settings, loaded: Loaded) -> Result<Object> {
    let Loaded { source, mut object } = loaded;
    let kind = object.kind();
    if kind == Kind::Event {
        bail!("{source}: events are recorded by Shepherd itself; apply pods, deployments, services, nodes or namespaces");
    }
    if kind == Kind::Lease {
        bail!("{source}: a node's lease is written by its registration and its agent's renewals; apply the node instead");
    }
    let meta = object.metadata_mut();
    if meta.name.is_empty() {
        bail!("{source}: a {} needs metadata.name", kind_word(kind));
    }
    if kind.namespaced() {
        if meta.namespace.is_empty() {
            meta.namespace = settings.namespace.clone();
        } else if settings.namespace_explicit && meta.namespace != settings.namespace {
            bail!(
                "{source}: {}/{} is in namespace {:?} but -n says {:?}: drop -n or change the manifest",
                kind_word(kind),
                meta.name,
                meta.namespace,
                settings.namespace
            );
        }
    } else {
        meta.namespace.clear();
    }
    meta.uid.clear();
    meta.resource_version = 0;
    meta.generation = 0;
    meta.created_at = None;
    meta.deletion_timestamp = None;
    match &mut object {
        Object::Pod(pod) => pod.status = Default::default(),
        Object::Deployment(deployment) => deployment.status = Default::default(),
        Object::ReplicaSet(rs) => rs.status = Default::default(),
        Object::Service(service) => service.status = Default::default(),
        Object::Namespace(namespace) => namespace.status = Default::default(),
        // A node manifest registers capacity through its status.
        Object::Node(_) | Object::Event(_) | Object::Lease(_) | Object::ConfigMap(_) | Object::Secret(_) => {}
    }
    object.metadata_mut().annotations.remove(LAST_APPLIED);
    let record = serde_json::to_string(&object)?;
    object.metadata_mut().annotations.insert(LAST_APPLIED.to_string(), record);
    Ok(object)
}

/// Creates or updates one object. Returns what the server stored.
pub async fn apply(client: &Client, object: Object) -> Result<(Object, Outcome)> {
    let kind = object.kind();
    let (namespace, name) = (object.metadata().namespace.clone(), object.metadata().name.clone());
    for _ in 0..CONFLICT_ATTEMPTS {
        match client.get_object(kind, &namespace, &name).await {
            Err(e) if e.is_not_found() => {
                match client.create_object(&object).await {
                    Ok(stored) => return Ok((stored, Outcome::Created)),
                    // Someone created it meanwhile: read it and update instead.
                    Err(e) if e.is_conflict() => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
            Ok(existing) => {
                let desired = merged(&existing, &object);
                if desired == existing || last_applied(&existing).is_some_and(|r| Some(r) == last_applied(&object)) {
                    return Ok((existing, Outcome::Unchanged));
                }
                match client.replace_object(&desired).await {
                    Ok(stored) => return Ok((stored, Outcome::Configured)),
                    // It changed after we read it: read it again.
                    Err(e) if e.is_conflict() => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    Err(anyhow!("{}/{name} kept changing while it was being updated ({CONFLICT_ATTEMPTS} conflicts in a row): try again", kind_word(kind)))
}

fn last_applied(object: &Object) -> Option<&str> {
    object.metadata().annotations.get(LAST_APPLIED).map(String::as_str)
}

/// The stored object with the manifest's labels, annotations and spec (a ConfigMap's or a
/// Secret's data): what a PUT sends. Status and the pod's node stay as the server has them.
pub fn merged(existing: &Object, manifest: &Object) -> Object {
    let mut desired = existing.clone();
    let meta = desired.metadata_mut();
    meta.labels = manifest.metadata().labels.clone();
    meta.annotations = manifest.metadata().annotations.clone();
    match (&mut desired, manifest) {
        (Object::Pod(stored), Object::Pod(wanted)) => {
            let node = std::mem::take(&mut stored.spec.node_name);
            stored.spec = wanted.spec.clone();
            stored.spec.node_name = node;
        }
        (Object::Deployment(stored), Object::Deployment(wanted)) => stored.spec = wanted.spec.clone(),
        (Object::Service(stored), Object::Service(wanted)) => stored.spec = wanted.spec.clone(),
        (Object::ReplicaSet(stored), Object::ReplicaSet(wanted)) => stored.spec = wanted.spec.clone(),
        (Object::ConfigMap(stored), Object::ConfigMap(wanted)) => {
            stored.data = wanted.data.clone();
            stored.binary_data = wanted.binary_data.clone();
            stored.immutable = wanted.immutable;
        }
        (Object::Secret(stored), Object::Secret(wanted)) => {
            stored.type_ = wanted.type_.clone();
            stored.data = wanted.data.clone();
            stored.string_data = wanted.string_data.clone();
            stored.immutable = wanted.immutable;
        }
        // Nodes and namespaces have no spec: only their metadata is applied.
        _ => {}
    }
    desired
}

#[cfg(test)]
mod tests {
    use shared::model::{Pod, PodPhase};

    use super::*;

    fn settings(namespace: Option<&str>) -> Settings {
        Settings {
            servers: vec!["http://127.0.0.1:1".into()],
            token: None,
            certificate_authority: None,
            namespace: namespace.unwrap_or("default").into(),
            namespace_explicit: namespace.is_some(),
            all_namespaces: false,
        }
    }

    fn loaded(json: &str) -> Loaded {
        Loaded { source: "pod.json".into(), object: shared::manifest::parse(json).unwrap().remove(0) }
    }

    #[test]
    fn namespaces_come_from_the_manifest_or_the_flag() {
        let object = resolve(&settings(Some("prod")), loaded(r#"{"kind":"Pod","metadata":{"name":"a"}}"#)).unwrap();
        assert_eq!(object.metadata().namespace, "prod");
        let object = resolve(&settings(None), loaded(r#"{"kind":"Pod","metadata":{"name":"a","namespace":"dev"}}"#)).unwrap();
        assert_eq!(object.metadata().namespace, "dev");
        let err = resolve(&settings(Some("prod")), loaded(r#"{"kind":"Pod","metadata":{"name":"a","namespace":"dev"}}"#)).unwrap_err();
        assert_eq!(err.to_string(), "pod.json: pod/a is in namespace \"dev\" but -n says \"prod\": drop -n or change the manifest");
        let node = resolve(&settings(Some("prod")), loaded(r#"{"kind":"Node","metadata":{"name":"n","namespace":"x"}}"#)).unwrap();
        assert_eq!(node.metadata().namespace, "");
    }

    #[test]
    fn refuses_events_and_nameless_objects() {
        let err = resolve(&settings(None), loaded(r#"{"kind":"Event","metadata":{"name":"e"}}"#)).unwrap_err();
        assert!(err.to_string().contains("events are recorded by Shepherd itself"), "{err}");
        let err = resolve(&settings(None), loaded(r#"{"kind":"Service","metadata":{}}"#)).unwrap_err();
        assert_eq!(err.to_string(), "pod.json: a service needs metadata.name");
    }

    #[test]
    fn server_fields_are_cleared_and_the_manifest_is_recorded() {
        let json = r#"{"kind":"Pod","metadata":{"name":"a","uid":"u1","resource_version":9},"status":{"phase":"Running"}}"#;
        let object = resolve(&settings(None), loaded(json)).unwrap();
        let Object::Pod(pod) = &object else { panic!() };
        assert_eq!((pod.metadata.uid.as_str(), pod.metadata.resource_version), ("", 0));
        assert_eq!(pod.status.phase, PodPhase::Pending);
        let record: serde_json::Value = serde_json::from_str(last_applied(&object).unwrap()).unwrap();
        assert_eq!(record["metadata"]["name"], "a");
        assert!(record["metadata"].get("annotations").is_none(), "the record does not contain itself");
        // Resolving the same manifest twice records the same thing.
        assert_eq!(last_applied(&resolve(&settings(None), loaded(json)).unwrap()), last_applied(&object));
    }

    #[test]
    fn a_merge_takes_a_config_maps_and_a_secrets_data_from_the_manifest() {
        let stored = shared::manifest::parse("kind: ConfigMap\nmetadata: {name: page, resource_version: 3}\ndata: {a: one, b: gone}\n");
        let wanted = shared::manifest::parse("kind: ConfigMap\nmetadata: {name: page}\ndata: {a: two}\nimmutable: true\n");
        let Object::ConfigMap(config) = merged(&stored.unwrap()[0], &wanted.unwrap()[0]) else { panic!() };
        assert_eq!(config.metadata.resource_version, 3);
        assert_eq!(config.data, [("a".to_string(), "two".to_string())].into());
        assert!(config.immutable);
        let stored = shared::manifest::parse("kind: Secret\nmetadata: {name: auth}\ndata: {password: b2xk}\n");
        let wanted = shared::manifest::parse("kind: Secret\nmetadata: {name: auth}\ntype: Opaque\nstring_data: {password: new}\n");
        let Object::Secret(secret) = merged(&stored.unwrap()[0], &wanted.unwrap()[0]) else { panic!() };
        assert!(secret.data.is_empty(), "the old value goes: {:?}", secret.data);
        assert_eq!(secret.string_data["password"], "new");
    }

    #[test]
    fn a_merge_keeps_the_servers_status_and_node() {
        let mut stored = Pod::default();
        stored.metadata.resource_version = 7;
        stored.spec.node_name = "node-1".into();
        stored.status.phase = PodPhase::Running;
        let mut wanted = Pod::default();
        wanted.metadata.labels.insert("app".into(), "web".into());
        wanted.spec.restart_policy = "Never".into();
        let Object::Pod(merged) = merged(&Object::Pod(stored), &Object::Pod(wanted)) else { panic!() };
        assert_eq!(merged.metadata.resource_version, 7);
        assert_eq!(merged.metadata.labels["app"], "web");
        assert_eq!(merged.spec.node_name, "node-1");
        assert_eq!(merged.spec.restart_policy, "Never");
        assert_eq!(merged.status.phase, PodPhase::Running);
    }
}
