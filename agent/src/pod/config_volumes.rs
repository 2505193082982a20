//! ConfigMap and Secret volumes: the object's keys (or its `items`) as files with their
//! modes, written by the [`atomic_writer`](super::atomic_writer) into the pod's volume
//! directory; a Secret's on a tmpfs, so that its values never reach the node's disk. The
//! pod's worker writes them on every pass from the server's current object (level-triggered)
//! and looks again every [`REFRESH`], so a change reaches the files of running containers
//! within it, but not a `subPath` mount, which holds the version it started with.

use std::collections::BTreeMap;
use std::time::Duration;

use shared::model::{DEFAULT_FILE_MODE, KeyToPath, Pod, Volume, VolumeSource};

use super::atomic_writer::{self, File, Files};
use super::context::NodeContext;
use super::volumes::{Error, Result, mount_tmpfs_once};

/// How often a pod with ConfigMap or Secret volumes has them written again.
pub const REFRESH: Duration = Duration::from_secs(20);

/// Whether the pod has a ConfigMap or Secret volume.
pub fn has_config_volumes(pod: &Pod) -> bool {
    pod.spec.volumes.iter().any(|v| matches!(v.source(), Some(VolumeSource::ConfigMap(_) | VolumeSource::Secret(_))))
}

/// Writes the files of every ConfigMap and Secret volume of the pod as the server has them now.
pub async fn sync(ctx: &NodeContext, pod: &Pod) -> Result<()> {
    let namespace = &pod.metadata.namespace;
    for volume in &pod.spec.volumes {
        let set_up = |message: String| Error::SetUp { volume: volume.name.clone(), message };
        let (keys, items, default_mode, optional, secret) = match volume.source() {
            Some(VolumeSource::ConfigMap(source)) => {
                let found = ctx.api.config_map(namespace, &source.name).await.map_err(|e| set_up(e.to_string()))?;
                let keys = found.map(|c| {
                    let text = c.data.into_iter().map(|(k, v)| (k, v.into_bytes()));
                    text.chain(c.binary_data).collect::<BTreeMap<_, _>>()
                });
                let keys = keys.ok_or_else(|| format!("configmap {:?} not found", source.name));
                (keys, &source.items, source.default_mode, source.optional.unwrap_or(false), false)
            }
            Some(VolumeSource::Secret(source)) => {
                let found = ctx.api.secret(namespace, &source.secret_name).await.map_err(|e| set_up(e.to_string()))?;
                let keys = found.map(|s| s.data).ok_or_else(|| format!("secret {:?} not found", source.secret_name));
                (keys, &source.items, source.default_mode, source.optional.unwrap_or(false), true)
            }
            _ => continue,
        };
        let keys = match keys {
            Ok(keys) => keys,
            Err(_) if optional => BTreeMap::new(),
            Err(missing) => return Err(set_up(missing)),
        };
        let files = files(keys, items, default_mode, optional).and_then(atomic_writer::payload).map_err(set_up)?;
        write(ctx, pod, volume, &files, secret)?;
    }
    Ok(())
}

/// The files of a volume: each key as a file of its name, or only the `items`, at their paths
/// (a key may go to several).
fn files(keys: BTreeMap<String, Vec<u8>>, items: &[KeyToPath], default_mode: Option<i32>, optional: bool) -> Result<Files, String> {
    let mode = |item_mode: Option<i32>| item_mode.or(default_mode).unwrap_or(DEFAULT_FILE_MODE) as u32;
    if items.is_empty() {
        return Ok(keys.into_iter().map(|(key, content)| (key, File { content, mode: mode(None) })).collect());
    }
    let mut files = Files::new();
    for item in items {
        match keys.get(&item.key).cloned() {
            Some(content) => {
                files.insert(item.path.clone(), File { content, mode: mode(item.mode) });
            }
            None if optional => {}
            None => return Err(format!("references non-existent config key: {}", item.key)),
        }
    }
    Ok(files)
}

fn write(ctx: &NodeContext, pod: &Pod, volume: &Volume, files: &Files, secret: bool) -> Result<()> {
    let path = ctx.volumes.volume_dir(&pod.metadata.uid, volume)?;
    if secret {
        mount_tmpfs_once(&path, "mode=0755")?;
    }
    let version = chrono::Utc::now().format("%Y_%m_%d_%H_%M_%S.%f").to_string();
    let changed = atomic_writer::write(&path, files, &version)
        .map_err(|e| Error::SetUp { volume: volume.name.clone(), message: format!("cannot write its files: {e}") })?;
    if changed {
        tracing::debug!(pod = %pod.metadata.key(), volume = %volume.name, "volume files written");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_pick_keys_to_paths_with_their_modes() {
        let keys = BTreeMap::from([("a".to_string(), b"1".to_vec()), ("b".to_string(), b"2".to_vec())]);
        let all = files(keys.clone(), &[], Some(0o400), false).unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(all["a"].mode, 0o400);
        let items = [KeyToPath { key: "b".into(), path: "dir/b.txt".into(), mode: Some(0o600) }];
        let picked = files(keys.clone(), &items, None, false).unwrap();
        assert_eq!(picked, Files::from([("dir/b.txt".to_string(), File { content: b"2".to_vec(), mode: 0o600 })]));
        // One key at several paths, as an outside tester wrote them: each gets it.
        let twice = [("a", "a"), ("b", "c/b"), ("b", "./c/./d"), ("b", "e//f")].map(|(key, path)| KeyToPath {
            key: key.into(),
            path: path.into(),
            mode: None,
        });
        let picked = files(keys.clone(), &twice, None, false).unwrap();
        assert_eq!(picked.keys().collect::<Vec<_>>(), ["./c/./d", "a", "c/b", "e//f"]);
        assert!(picked.iter().all(|(path, file)| file.content == if path == "a" { b"1" } else { b"2" }));
        let missing = [KeyToPath { key: "c".into(), path: "c".into(), mode: None }];
        assert_eq!(files(keys.clone(), &missing, None, false).unwrap_err(), "references non-existent config key: c");
        assert!(files(keys, &missing, None, true).unwrap().is_empty(), "optional: the key is left out");
    }
}
