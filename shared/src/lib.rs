//! Shepherd's shared core: everything the server, the agent, `sheepctl` and the browser
//! agree on, as pure code with no I/O and no clock (callers pass `now`), so that it builds
//! for wasm32 and the dashboard runs the very scheduler the server runs.
//!
//! Layout:
//! - [`model`]: the objects (Pod, Node, Lease, Deployment, ReplicaSet, Service, Event, Binding,
//!   Namespace) in the original project's JSON shape, a file per kind family
//!   (`meta`, `condition`, `resources`, `pod`, `node`, `lease`, `apps`, `service`, `event`,
//!   `namespace`, `kind`, `object`);
//! - [`quantity`]: memory and CPU quantities (`64Mi`, `250m`) parsed, formatted and read by
//!   serde;
//! - [`limits`]: the most a container, pod, node or deployment may have, which validation
//!   holds objects to;
//! - [`usage`]: what the pods on a node request, summed, and the percentage of the node it is;
//! - [`selector`]: label selectors, equality and set-based, and their string form;
//! - [`validation`]: every field error of an object at once, with its path;
//! - [`manifest`]: JSON and YAML manifests, several documents per file, with line and column
//!   in errors and every unknown field refused;
//! - [`strict`]: the fields of a document its type does not hold, which manifests and both of
//!   the server's API dialects refuse;
//! - [`yaml`]: the YAML reader behind manifests: saphyr-parser's events built into values that
//!   keep their line and column;
//! - [`image`]: image references (registry, repository, tag), the default pull policy, and
//!   the cluster registry's address and users;
//! - [`readiness`]: whether a node is ready, the one judgement every part makes;
//! - [`rollout`]: the pod-template hash, a rollout's labels, annotations and condition
//!   reasons, the strategy's defaults, how maxSurge and maxUnavailable resolve, and a
//!   deployment's revision history and what `rollout undo` writes;
//! - [`registration`]: the node an agent registers and the heartbeat it sends;
//! - [`backoff`]: the one exponential back-off curve;
//! - [`listen`]: where an API may listen without a token (loopback only);
//! - [`subnet`]: IPv4 subnets, parsed, compared and counted (the pod network, the service range);
//! - [`capacity`]: when a collection that emptied gives its room back;
//! - [`expansion`]: `$(NAME)` references in a container's env values, command and args;
//! - [`sse`]: the Server-Sent Events decoder watch streams are read through;
//! - [`watch`]: the watcher's state machine (list → watch → resume or re-list, back-off,
//!   polling) and the decoding of one watch message;
//! - [`words`]: what users read in `sheepctl` and the dashboard alike: AGE, the pod status
//!   word, the pending reason, the node status word, event times;
//! - [`parse`]: durations, labels and taints as users type them;
//! - [`scheduler`]: filters, scores, the assume cache, the scheduling queue and the
//!   explanation of every decision;
//! - [`api`]: the wire contract: error shape, list and watch envelopes, URL paths, the Bearer
//!   header;
//! - [`remote_command`]: Kubernetes' exec and attach protocol over WebSocket: subprotocols,
//!   channels, the query, the Status with the exit code;
//! - [`decode_error`]: serde's words for a body of the wrong shape, without the values it quotes;
//! - [`api_error`]: how a client reads an error answer and what its status tells it to do;
//! - [`cache`]: the objects of a watch, kept by lists and events under one staleness rule;
//! - [`metrics`]: resource usage for `kubectl top`: the CPU-rate and working-set arithmetic, an
//!   agent's report and the `metrics.k8s.io` shapes;
//! - [`sort`]: stable sorting with one copy of the sort code in the dashboard's wasm;
//! - `schema` (feature `schema`, for the server's OpenAPI document): JSON Schemas of the
//!   types whose serde is written by hand.

pub mod api;
pub mod api_error;
pub mod backoff;
pub mod cache;
pub mod capacity;
pub mod decode_error;
pub mod expansion;
pub mod image;
pub mod limits;
pub mod listen;
pub mod manifest;
pub mod metrics;
pub mod model;
pub mod parse;
pub mod quantity;
pub mod readiness;
pub mod registration;
pub mod remote_command;
pub mod rollout;
pub mod scheduler;
#[cfg(feature = "schema")]
mod schema;
pub mod selector;
pub mod sort;
pub mod sse;
pub mod strict;
pub mod subnet;
pub mod usage;
pub mod validation;
pub mod watch;
pub mod words;
pub mod yaml;
