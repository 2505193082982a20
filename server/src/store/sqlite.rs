//! SQLite persistence in WAL mode: one row per object (its JSON, kept under its
//! resource_version), the global revision when deletes moved it past them, and one
//! transaction per group commit, fsynced before any caller hears back.
//! A background thread checkpoints the WAL so that commits never wait for it. A Secret's
//! row holds its encrypted value (a blob) when a key file is given ([`Encryption`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, params};
use shared::model::{Kind, Object};

use super::encryption::Encryption;
use super::error::{Result, StoreError};
use super::key::Key;
use super::persistence::{PersistedChange, Persistence, Snapshot};

pub struct SqlitePersistence {
    path: PathBuf,
    connection: Option<Connection>,
    checkpointer: Option<Checkpointer>,
    encryption: Encryption,
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
    /// Opens (or creates) `shepherd.db` in `dir`, moving a store of the first layout to
    /// the current one. Secrets are written with `encryption` and read with it.
    pub fn open(dir: &Path, encryption: Encryption) -> Result<SqlitePersistence> {
        std::fs::create_dir_all(dir).map_err(|e| backend(dir, "cannot create the data directory", e))?;
        let path = dir.join("shepherd.db");
        let mut connection = Connection::open(&path).map_err(|e| backend(&path, "cannot open", e))?;
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = FULL;
                 PRAGMA wal_autocheckpoint = 0;",
            )
            .map_err(|e| backend(&path, "cannot set up", e))?;
        if encryption.is_on() {
            // A Secret's replaced row, plaintext from before the key file, is zeroed rather
            // than left in a free page.
            connection.pragma_update(None, "secure_delete", true).map_err(|e| backend(&path, "cannot set up", e))?;
        }
        prepare_schema(&mut connection).map_err(|e| backend(&path, "cannot prepare the schema in", e))?;
        let checkpointer = Checkpointer::start(&path)?;
        Ok(SqlitePersistence { path, connection: Some(connection), checkpointer: Some(checkpointer), encryption })
    }

    fn connection(&mut self) -> Result<&mut Connection> {
        self.connection.as_mut().ok_or(StoreError::Closed)
    }
}

/// What a row's value is bound to when encrypted: its kind and key, so that a value moved
/// to another row does not decrypt.
fn location(kind: Kind, key: &str) -> String {
    format!("/{}/{key}", kind.plural())
}

/// The layout, in `PRAGMA user_version`. Version 1 kept one row per key (primary key kind
/// and key, an index beside the table), so a commit of a few creates dirtied a leaf page
/// of that index per row, at scattered places. Version 2 keeps each object's state under
/// its resource_version: a create appends at the end of the one B-tree, and a change
/// deletes the row of the state it replaces, whose revision the cache knows.
const SCHEMA_VERSION: i64 = 2;

fn prepare_schema(connection: &mut Connection) -> rusqlite::Result<()> {
    let tx = connection.transaction()?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version < SCHEMA_VERSION {
        let first_layout = tx
            .query_row("SELECT 1 FROM pragma_table_info('objects') WHERE name = 'resource_version'", [], |_| Ok(()))
            .optional()?
            .is_some();
        if first_layout {
            tx.execute_batch("ALTER TABLE objects RENAME TO objects_v1;")?;
        }
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS objects (
                 revision INTEGER PRIMARY KEY,
                 kind TEXT NOT NULL,
                 key TEXT NOT NULL,
                 body TEXT NOT NULL
             );
             CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);",
        )?;
        if first_layout {
            tx.execute_batch(
                "INSERT INTO objects (revision, kind, key, body)
                     SELECT resource_version, kind, key, body FROM objects_v1 ORDER BY resource_version;
                 DROP TABLE objects_v1;",
            )?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    } else if version > SCHEMA_VERSION {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISMATCH),
            Some(format!("the store has layout {version}, newer than this shepherd's {SCHEMA_VERSION}: run a newer shepherd")),
        ));
    }
    tx.commit()
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
        let encryption = self.encryption.clone();
        let connection = self.connection()?;
        // The revision is the newest stored state's, or the one saved beside them when
        // the last changes were deletes.
        let saved: u64 = connection
            .query_row("SELECT value FROM meta WHERE name = 'revision'", [], |row| row.get::<_, i64>(0))
            .optional()
            .map_err(|e| backend(&path, "cannot read the revision from", e))?
            .unwrap_or(0) as u64;
        let mut statement = connection
            .prepare("SELECT revision, kind, key, body FROM objects ORDER BY revision")
            .map_err(|e| backend(&path, "cannot read", e))?;
        let rows = statement
            .query_map([], |row| {
                // JSON is text; an encrypted value is a blob.
                let body = match row.get_ref(3)? {
                    ValueRef::Text(bytes) | ValueRef::Blob(bytes) => bytes.to_vec(),
                    other => return Err(rusqlite::Error::InvalidColumnType(3, "body".into(), other.data_type())),
                };
                Ok((row.get::<_, i64>(0)? as u64, row.get::<_, String>(1)?, row.get::<_, String>(2)?, body))
            })
            .map_err(|e| backend(&path, "cannot read", e))?;
        let mut objects = Vec::new();
        let mut unreadable = Vec::new();
        let mut stale = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut revision = saved;
        for row in rows {
            let (stored_at, kind, key, body) = row.map_err(|e| backend(&path, "cannot read a row of", e))?;
            revision = revision.max(stored_at);
            let plain = match Kind::ALL.into_iter().find(|known| known.as_str() == kind) {
                Some(known) => match encryption.open(known, &location(known, &key), &body) {
                    Ok(opened) => {
                        if opened.stale {
                            stale.push(Key { kind: known, key: key.clone() });
                        }
                        opened.value
                    }
                    // One Secret under a key this server lacks must not keep the rest from serving.
                    Err(e) => {
                        tracing::error!(
                            "{known} {key:?} in {} cannot be read: {e}; reads and writes of it fail until it is fixed",
                            path.display()
                        );
                        unreadable.push((Key { kind: known, key }, e.to_string()));
                        continue;
                    }
                },
                None => body.as_slice().into(),
            };
            let object: Object = serde_json::from_slice(&plain)
                .map_err(|e| backend(&path, &format!("the stored {kind} {key:?} is not valid JSON in"), e))?;
            let inconsistent = |what: String| backend(&path, &what, "the database is inconsistent");
            if object.metadata().resource_version != stored_at {
                return Err(inconsistent(format!(
                    "the stored {kind} {key:?} says resource_version {} but is kept under revision {stored_at} in",
                    object.metadata().resource_version
                )));
            }
            if !seen.insert((kind.clone(), key.clone())) {
                return Err(inconsistent(format!("{kind} {key:?} is stored twice in")));
            }
            objects.push(object);
        }
        Ok(Snapshot { revision, objects, unreadable, stale })
    }

    fn commit(&mut self, changes: &[PersistedChange<'_>], revision: u64) -> Result<()> {
        let path = self.path.clone();
        let fail = |e: rusqlite::Error| backend(&path, "cannot commit to", e);
        let encryption = &self.encryption;
        let connection = self.connection.as_mut().ok_or(StoreError::Closed)?;
        let tx = connection.transaction().map_err(fail)?;
        {
            let mut insert = tx.prepare_cached("INSERT INTO objects (revision, kind, key, body) VALUES (?1, ?2, ?3, ?4)").map_err(fail)?;
            let mut delete = tx.prepare_cached("DELETE FROM objects WHERE revision = ?1").map_err(fail)?;
            for change in changes {
                if let Some(replaced) = change.replaces {
                    delete.execute(params![replaced as i64]).map_err(fail)?;
                }
                if let Some(object) = change.object {
                    let json = serde_json::to_vec(object).map_err(|e| backend(&path, "cannot encode an object for", e))?;
                    let sealed = encryption
                        .seal(change.kind, &location(change.kind, change.key), json)
                        .map_err(|e| backend(&path, &format!("cannot store {} {:?} in", change.kind, change.key), e))?;
                    let stored_at = object.metadata().resource_version as i64;
                    match String::from_utf8(sealed) {
                        Ok(text) => insert.execute(params![stored_at, change.kind.as_str(), change.key, text]),
                        Err(binary) => insert.execute(params![stored_at, change.kind.as_str(), change.key, binary.into_bytes()]),
                    }
                    .map_err(fail)?;
                }
            }
            // Only a delete moves the revision past every stored state: save it then.
            if changes.last().is_some_and(|c| c.object.is_none()) {
                tx.execute(
                    "INSERT INTO meta (name, value) VALUES ('revision', ?1) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    params![revision as i64],
                )
                .map_err(fail)?;
            }
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
    use crate::store::{CachedStore, Change, Store, Txn, Write};
    use shared::model::Kind;

    #[tokio::test]
    async fn a_reopened_store_has_every_object_and_continues_the_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = CachedStore::open(Box::new(SqlitePersistence::open(dir.path(), Encryption::default()).unwrap()), 100).unwrap();
        for name in ["a", "b", "c"] {
            let pod = Object::Pod(Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Pod::default() });
            store.commit(Txn::new().with(Write::new(Key::of(&pod), move |_, _| Ok(Change::Put(pod.clone()))))).await.unwrap();
        }
        store.commit(Txn::new().with(Write::new(Key::new(Kind::Pod, "default", "b"), |_, _| Ok(Change::Delete)))).await.unwrap();
        store.close().await;

        let store = CachedStore::open(Box::new(SqlitePersistence::open(dir.path(), Encryption::default()).unwrap()), 100).unwrap();
        assert_eq!(store.revision(), 4);
        assert_eq!(store.oldest_revision(), 4);
        let (_, pods) = store.list(Kind::Pod, Some("default"));
        let names: Vec<_> = pods.iter().map(|p| (p.metadata().name.clone(), p.metadata().resource_version)).collect();
        assert_eq!(names, vec![("a".to_string(), 1), ("c".to_string(), 3)]);
        store.close().await;
    }

    fn pod(name: &str) -> Object {
        Object::Pod(Pod { kind: "Pod".into(), metadata: ObjectMeta::named("default", name), ..Pod::default() })
    }

    fn put(object: Object) -> Txn {
        Txn::new().with(Write::new(Key::of(&object), move |_, _| Ok(Change::Put(object.clone()))))
    }

    fn stored_rows(dir: &Path) -> Vec<(i64, String)> {
        let connection = Connection::open(dir.join("shepherd.db")).unwrap();
        let mut statement = connection.prepare("SELECT revision, key FROM objects ORDER BY revision").unwrap();
        statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).unwrap().map(|r| r.unwrap()).collect()
    }

    #[tokio::test]
    async fn each_change_replaces_the_row_of_the_state_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = CachedStore::open(Box::new(SqlitePersistence::open(dir.path(), Encryption::default()).unwrap()), 100).unwrap();
        store.commit(put(pod("a"))).await.unwrap(); // 1
        store.commit(put(pod("b"))).await.unwrap(); // 2
        store.commit(put(pod("a"))).await.unwrap(); // 3 replaces 1
        // Two changes of one key in one transaction: the second replaces the first's row.
        store.commit(put(pod("b")).with(Write::new(Key::new(Kind::Pod, "default", "b"), |_, _| Ok(Change::Put(pod("b")))))).await.unwrap(); // 4, 5
        store.commit(put(pod("c"))).await.unwrap(); // 6
        store.commit(Txn::new().with(Write::new(Key::new(Kind::Pod, "default", "c"), |_, _| Ok(Change::Delete)))).await.unwrap(); // 7
        store.close().await;
        assert_eq!(stored_rows(dir.path()), vec![(3, "default/a".to_string()), (5, "default/b".to_string())]);

        let store = CachedStore::open(Box::new(SqlitePersistence::open(dir.path(), Encryption::default()).unwrap()), 100).unwrap();
        assert_eq!(store.revision(), 7, "the delete at the end moved the revision past every stored state");
        store.commit(put(pod("d"))).await.unwrap();
        assert_eq!(store.get(&Key::new(Kind::Pod, "default", "d")).unwrap().metadata().resource_version, 8);
        store.close().await;
    }

    #[tokio::test]
    async fn a_store_of_the_first_layout_is_moved_to_the_current_one_with_everything_in_it() {
        let dir = tempfile::tempdir().unwrap();
        {
            let connection = Connection::open(dir.path().join("shepherd.db")).unwrap();
            connection
                .execute_batch(
                    "PRAGMA journal_mode = WAL;
                     CREATE TABLE objects (kind TEXT NOT NULL, key TEXT NOT NULL, resource_version INTEGER NOT NULL,
                                           body TEXT NOT NULL, PRIMARY KEY (kind, key));
                     CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
                     INSERT INTO meta VALUES ('revision', 9);",
                )
                .unwrap();
            for (name, revision) in [("x", 4), ("y", 2)] {
                let mut object = pod(name);
                object.metadata_mut().resource_version = revision;
                connection
                    .execute(
                        "INSERT INTO objects VALUES ('Pod', ?1, ?2, ?3)",
                        params![format!("default/{name}"), revision, serde_json::to_string(&object).unwrap()],
                    )
                    .unwrap();
            }
        }
        let store = CachedStore::open(Box::new(SqlitePersistence::open(dir.path(), Encryption::default()).unwrap()), 100).unwrap();
        assert_eq!(store.revision(), 9);
        let (_, pods) = store.list(Kind::Pod, Some("default"));
        let found: Vec<_> = pods.iter().map(|p| (p.metadata().name.clone(), p.metadata().resource_version)).collect();
        assert_eq!(found, vec![("x".to_string(), 4), ("y".to_string(), 2)]);
        store.commit(put(pod("x"))).await.unwrap();
        store.close().await;
        assert_eq!(stored_rows(dir.path()), vec![(2, "default/y".to_string()), (10, "default/x".to_string())]);
        let connection = Connection::open(dir.path().join("shepherd.db")).unwrap();
        let version: i64 = connection.query_row("PRAGMA user_version", [], |row| row.get(0)).unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }

    fn secret(name: &str, value: &str) -> Object {
        let mut secret =
            shared::model::Secret { kind: "Secret".into(), metadata: ObjectMeta::named("default", name), ..Default::default() };
        secret.data.insert("password".into(), value.as_bytes().to_vec());
        Object::Secret(Box::new(secret))
    }

    fn keys(text: &str) -> Encryption {
        Encryption::parse(Path::new("keys"), text).unwrap()
    }

    /// Every byte SQLite keeps for the store: the database and its WAL.
    fn on_disk(dir: &Path) -> Vec<u8> {
        ["shepherd.db", "shepherd.db-wal"].iter().filter_map(|f| std::fs::read(dir.join(f)).ok()).flatten().collect()
    }

    fn holds(bytes: &[u8], text: &str) -> bool {
        bytes.windows(text.len()).any(|w| w == text.as_bytes())
    }

    const K1: &str = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    const K2: &str = "k2:MDEyMzQ1Njc4OWFiY2RlZg==";

    #[tokio::test]
    async fn a_secret_is_ciphertext_on_disk_and_one_under_a_missing_key_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let open =
            |encryption: Encryption| CachedStore::open(Box::new(SqlitePersistence::open(dir.path(), encryption).unwrap()), 100).unwrap();
        // Written before encryption was turned on: read as it is, encrypted when next written.
        let store = open(Encryption::default());
        store.commit(put(secret("old", "plain-before"))).await.unwrap();
        store.close().await;
        let store = open(keys(K1));
        store.commit(put(secret("db", "s3cret-value"))).await.unwrap();
        store.commit(put(pod("web"))).await.unwrap();
        assert!(holds(&on_disk(dir.path()), "k8s:enc:aesgcm:v1:k1:"), "the WAL holds the encrypted row");
        let old = Key::new(Kind::Secret, "default", "old");
        assert!(store.get(&old).is_some(), "plaintext reads as it is");
        store.commit(put(secret("old", "plain-before"))).await.unwrap();
        store.close().await;
        let disk = on_disk(dir.path());
        // JSON holds a Secret's values in base64.
        for value in ["s3cret-value", "czNjcmV0LXZhbHVl", "plain-before", "cGxhaW4tYmVmb3Jl"] {
            assert!(!holds(&disk, value), "{value} is on disk");
        }
        assert!(holds(&disk, "\"name\":\"web\""), "other kinds stay plain JSON");

        // Rotated: a new first key, the old one still decrypting.
        let store = open(keys(&format!("{K2}\n{K1}")));
        let db = Key::new(Kind::Secret, "default", "db");
        assert!(matches!(store.get(&db).as_deref(), Some(Object::Secret(s)) if s.data["password"] == b"s3cret-value"));
        store.close().await;

        // Without k1: those two fail, each on its own, and nothing overwrites them.
        let store = open(keys(K2));
        assert!(store.get(&db).is_none());
        let error = store.unreadable(&db).expect("the Secret is unreadable").to_string();
        assert_eq!(
            error,
            "Secret \"default/db\" is stored but cannot be read: failed to decrypt: it was encrypted with the key \"k1\", which the encryption key file does not hold"
        );
        assert!(!error.contains("s3cret"));
        let refused = store.commit(put(secret("db", "another"))).await.unwrap_err();
        assert!(matches!(refused, StoreError::Unreadable { .. }), "{refused}");
        assert!(store.get(&Key::new(Kind::Pod, "default", "web")).is_some(), "the rest serves");
        store.close().await;

        // A Secret's row copied over another's does not decrypt there.
        let connection = Connection::open(dir.path().join("shepherd.db")).unwrap();
        connection
            .execute("UPDATE objects SET body = (SELECT body FROM objects WHERE key = 'default/db') WHERE key = 'default/old'", [])
            .unwrap();
        drop(connection);
        let store = open(keys(&format!("{K2}\n{K1}")));
        assert!(store.get(&db).is_some());
        let copied = store.unreadable(&old).expect("a copied value is unreadable").to_string();
        assert!(copied.contains("failed to decrypt with the key \"k1\""), "{copied}");
        store.close().await;
    }

    #[test]
    fn a_store_of_a_newer_layout_is_refused_and_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        Connection::open(dir.path().join("shepherd.db")).unwrap().execute_batch("PRAGMA user_version = 99;").unwrap();
        let error = SqlitePersistence::open(dir.path(), Encryption::default()).err().expect("a newer layout is refused");
        assert!(error.to_string().contains("layout 99, newer than this shepherd's 2"), "{error}");
        let connection = Connection::open(dir.path().join("shepherd.db")).unwrap();
        assert_eq!(connection.query_row("PRAGMA user_version", [], |row| row.get::<_, i64>(0)).unwrap(), 99);
    }

    #[test]
    fn a_row_kept_under_another_revision_than_its_own_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        drop(SqlitePersistence::open(dir.path(), Encryption::default()).unwrap());
        let mut object = pod("z");
        object.metadata_mut().resource_version = 3;
        Connection::open(dir.path().join("shepherd.db"))
            .unwrap()
            .execute("INSERT INTO objects VALUES (5, 'Pod', 'default/z', ?1)", params![serde_json::to_string(&object).unwrap()])
            .unwrap();
        let error =
            SqlitePersistence::open(dir.path(), Encryption::default()).unwrap().load().expect_err("an inconsistent row is reported");
        assert!(error.to_string().contains("says resource_version 3 but is kept under revision 5"), "{error}");
    }
}
