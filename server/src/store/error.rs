//! The store's one error type: what a read-modify-write, a watch or the backend failed on,
//! each variant naming the object or revision at fault.

use shared::api::FieldError;
use shared::model::Kind;

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("{kind} {key:?} not found")]
    NotFound { kind: Kind, key: String },
    #[error("{kind} {key:?} already exists")]
    AlreadyExists { kind: Kind, key: String },
    /// A compare-and-swap lost: the message says what was expected and what was found.
    #[error("{0}")]
    Conflict(String),
    /// A write the object's current state does not allow, with the fields at fault.
    #[error("{message}")]
    Invalid { message: String, details: Vec<FieldError> },
    #[error(
        "resource_version {requested} is too old: the server keeps history only after revision {oldest}; list again and watch from the list's resource_version"
    )]
    Gone { requested: u64, oldest: u64 },
    /// A remote watcher that fell further behind than the history reaches.
    #[error("resource_version {requested} is newer than the store's revision {current}; watch from a revision a list or a watch returned")]
    Future { requested: u64, current: u64 },
    #[error("the store failed to persist the write: {0}")]
    Backend(String),
    /// An object whose stored value cannot be read (a Secret encrypted with a key the server
    /// does not have, or a damaged value): reads and writes of it fail until it is fixed.
    #[error("{kind} {key:?} is stored but cannot be read: {why}")]
    Unreadable { kind: Kind, key: String, why: String },
    /// The backend's settings or contents cannot be used (an etcd prefix that is not
    /// Shepherd's): said at start.
    #[error("{0}")]
    Unusable(String),
    /// The backend cannot be reached (etcd lost): nothing was acknowledged; try again.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error("the store is shut down")]
    Closed,
}

impl StoreError {
    pub fn conflict(message: impl Into<String>) -> Self {
        StoreError::Conflict(message.into())
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        StoreError::Invalid { message: format!("{field}: {message}"), details: vec![FieldError::new(field, message)] }
    }
}
