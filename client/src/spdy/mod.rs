//! SPDY/3.1, the framing under Kubernetes' port-forward (and kubectl's older exec): no
//! maintained Rust crate speaks it, so it lives here, where the agent serves it and sheepctl
//! speaks it as a client.
//!
//! - [`frame`]: the frames on the wire, written and read with hostile input in mind;
//! - [`header_block`]: the zlib-compressed header blocks, one stream per direction;
//! - [`session`]: a connection of many streams over binary messages.

pub mod frame;
pub mod header_block;
pub mod session;

pub use header_block::{Headers, header};
pub use session::{Role, Session, Stream, StreamError, StreamReader, StreamWriter, start};

/// Why a SPDY connection cannot be read on: after any of these it ends.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unsupported SPDY version {0}; this end speaks SPDY/3")]
    Version(u16),
    #[error("a SPDY {kind} frame of {length} bytes is malformed: {reason}")]
    Malformed { kind: &'static str, length: usize, reason: String },
    #[error("a SPDY header block is not valid zlib with the SPDY/3 dictionary: {0}")]
    Compression(String),
    #[error("a SPDY header block inflates beyond {limit} bytes")]
    HeaderBlockTooLarge { limit: usize },
    #[error("a SPDY header block is malformed: {0}")]
    HeaderBlock(String),
    #[error("SPDY protocol error: {0}")]
    Protocol(String),
    #[error("the connection under SPDY failed: {0}")]
    Transport(String),
}
