//! SQLite persistence in WAL mode: one row per object (its JSON), one row for the global
//! revision, and one transaction per group commit, fsynced before any caller hears back.
//! A background thread checkpoints the WAL so that commits never wait for it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};
use shared::model::Object;

use super::cached::{PersistedChange, Persistence, Snapshot};
use super::{Result, StoreError};

pub struct SqlitePersistence {
    path: PathBuf,
    connection: Option<Connection>,
    checkpointer: Option<Checkpointer>,
}

/// How often the background thread copies the WAL into the database file.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(500);

/// Checkpoints from its own connection, so that no commit stalls while the WAL is copied
/// into the database (the writer's connection has auto-checkpoint off).
struct Checkpointer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: JoinHandle<()>,
}

impl Checkpointer {
    fn start(path: &Path) -> Result<Checkpointer> {
        let connection = Connection::open(path).map_err(|e| backend(path, "cannot open a checkpoint connection to", e))?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = stop.clone();
        let shown = path.display().to_string();
        let thread = std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || {
                let (lock, wake) = &*signal;
                let mut stopped = lock.lock().expect("checkpoint lock");
                while !*stopped {
                    stopped = wake.wait_timeout(stopped, CHECKPOINT_INTERVAL).expect("checkpoint lock").0;
                    if let Err(e) = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                        tracing::warn!("checkpoint of {shown} failed: {e}");
                    }
                }
            })
            .map_err(|e| backend(path, "cannot start the checkpoint thread for", e))?;
        Ok(Checkpointer { stop, thread })
    }

    fn stop(self) {
        let (lock, wake) = &*self.stop;
        *lock.lock().expect("checkpoint lock") = true;
        wake.notify_all();
        let _ = self.thread.join();
    }
}

fn backend(path: &Path, what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("{what} {}: {e}", path.display()))
}

impl SqlitePersistence {
    /// Opens (or creates) `shepherd.db` in `dir`.
    pub fn open(dir: &Path) -> Result<SqlitePersistence> {
        std::fs::create_dir_all(dir).map_err(|e| backend(dir, "cannot create the data directory", e))?;
        let path = dir.join("shepherd.db");
        let connection = Connection::open(&path).map_err(|e| backend(&path, "cannot open", e))?;
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 PRAGMA wal_autocheckpoint = 0;
                 CREATE TABLE IF NOT EXISTS objects (
                     kind TEXT NOT NULL,
                     key TEXT NOT NULL,
                     resource_version INTEGER NOT NULL,
                     body TEXT NOT NULL,
                     PRIMARY KEY (kind, key)
                 );
                 CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);",
            )
            .map_err(|e| backend(&path, "cannot prepare the schema in", e))?;
        let checkpointer = Checkpointer::start(&path)?;
        Ok(SqlitePersistence { path, connection: Some(connection), checkpointer: Some(checkpointer) })
    }

    fn connection(&mut self) -> Result<&mut Connection> {
        self.connection.as_mut().ok_or(StoreError::Closed)
    }
}

impl Drop for SqlitePersistence {
    fn drop(&mut self) {
        if let Some(checkpointer) = self.checkpointer.take() {
            checkpointer.stop();
        }
    }
}

impl Persistence for SqlitePersistence {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn load(&mut self) -> Result<Snapshot> {
        let path = self.path.clone();
        let connection = self.connection()?;
        let revision: u64 = connection
            .query_row("SELECT value FROM meta WHERE name = 'revision'", [], |row| row.get::<_, i64>(0))
            .optional()
            .map_err(|e| backend(&path, "cannot read the revision from", e))?
            .unwrap_or(0) as u64;
        let mut statement = connection.prepare("SELECT kind, key, body FROM objects").map_err(|e| backend(&path, "cannot read", e))?;
        let rows = statement
            .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?, row.get::<_, String>(2)?)))
            .map_err(|e| backend(&path, "cannot read", e))?;
        let mut objects = Vec::new();
        for row in rows {
            let (kind, key, body) = row.map_err(|e| backend(&path, "cannot read a row of", e))?;
            let object: Object =
                serde_json::from_str(&body).map_err(|e| backend(&path, &format!("the stored {kind} {key:?} is not valid JSON in"), e))?;
            if object.metadata().resource_version > revision {
                return Err(backend(
                    &path,
                    &format!(
                        "the stored {kind} {key:?} has resource_version {} past the revision {revision} of",
                        object.metadata().resource_version
                    ),
                    "the database is inconsistent",
                ));
            }
            objects.push(object);
        }
        Ok(Snapshot { revision, objects })
    }

    fn commit(&mut self, changes: &[PersistedChange<'_>], revision: u64) -> Result<()> {
        let path = self.path.clone();
        let fail = |e: rusqlite::Error| backend(&path, "cannot commit to", e);
        let connection = self.connection()?;
        let tx = connection.transaction().map_err(fail)?;
        {
            let mut upsert = tx
                .prepare_cached(
                    "INSERT INTO objects (kind, key, resource_version, body) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (kind, key) DO UPDATE SET resource_version = excluded.resource_version, body = excluded.body",
                )
                .map_err(fail)?;
            let mut delete = tx.prepare_cached("DELETE FROM objects WHERE kind = ?1 AND key = ?2").map_err(fail)?;
            for change in changes {
                let kind = change.kind.as_str();
                match change.object {
                    Some(object) => {
                        let body = serde_json::to_string(object).map_err(|e| backend(&path, "cannot encode an object for", e))?;
                        upsert.execute(params![kind, change.key, object.metadata().resource_version as i64, body]).map_err(fail)?;
                    }
                    None => {
                        delete.execute(params![kind, change.key]).map_err(fail)?;
                    }
                }
            }
            tx.execute(
                "INSERT INTO meta (name, value) VALUES ('revision', ?1) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                params![revision as i64],
            )
            .map_err(fail)?;
        }
        tx.commit().map_err(fail)
    }

    fn close(&mut self) -> Result<()> {
        if let Some(checkpointer) = self.checkpointer.take() {
            checkpointer.stop();
        }
        if let Some(connection) = self.connection.take() {
            connection.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").map_err(|e| backend(&self.path, "cannot checkpoint", e))?;
            connection.close().map_err(|(_, e)| backend(&self.path, "cannot close", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use shared::model::{ObjectMeta, Pod};

    use super::*;
    use crate::store::{CachedStore, Change, Key, Store, Txn, Write};
    use shared::model::Kind;

    #[tokio::test]
    async fn a_reopened_store_has_every_object_and_continues_the_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = CachedStore::open(Box::new(SqlitePersistence::open(dir.path()).unwrap()), 100).unwrap();
        for name in ["a", "b", "c"] {
            let pod = Object::Pod(Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Pod::default() });
            store.commit(Txn::new().with(Write::new(Key::of(&pod), move |_, _| Ok(Change::Put(pod))))).await.unwrap();
        }
        store.commit(Txn::new().with(Write::new(Key::new(Kind::Pod, "default", "b"), |_, _| Ok(Change::Delete)))).await.unwrap();
        store.close().await;

        let store = CachedStore::open(Box::new(SqlitePersistence::open(dir.path()).unwrap()), 100).unwrap();
        assert_eq!(store.revision(), 4);
        assert_eq!(store.oldest_revision(), 4);
        let (_, pods) = store.list(Kind::Pod, Some("default"));
        let names: Vec<_> = pods.iter().map(|p| (p.metadata().name.clone(), p.metadata().resource_version)).collect();
        assert_eq!(names, vec![("a".to_string(), 1), ("c".to_string(), 3)]);
        store.close().await;
    }
}
