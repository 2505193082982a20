//! The bounds validation holds every object to, below both the model (whose quantities and
//! schemas name them) and validation: what one container, pod, node or deployment may have.

/// The most CPU one container may request or one node may offer: a million cores.
pub const MAX_CPU_MILLICORES: i64 = 1_000_000_000;
/// The most memory one container may request or one node may offer: 64Ti, past the
/// largest machines sold.
pub const MAX_MEMORY_BYTES: i64 = 64 << 40;
/// The most containers one pod may have.
pub const MAX_CONTAINERS: usize = 100;
/// The most pods one node may hold (`allocatable.pods`); Kubernetes' default is 110.
pub const MAX_NODE_PODS: i64 = 1_000;
/// The most replicas one deployment may ask for.
pub const MAX_REPLICAS: i32 = 100_000;
/// The longest grace period a pod or a delete may give its containers: a year, which
/// Docker's stop timeout (an i32 of seconds) still holds.
pub const MAX_GRACE_SECONDS: i64 = 365 * 24 * 3600;

// Every container of every pod a node may hold, plus the pod being bound, at the largest
// request: such a sum still fits an i64, so no sum of validated requests can wrap.
const _: () = assert!((MAX_NODE_PODS as i128 + 1) * MAX_CONTAINERS as i128 * MAX_MEMORY_BYTES as i128 <= i64::MAX as i128);
const _: () = assert!((MAX_NODE_PODS as i128 + 1) * MAX_CONTAINERS as i128 * MAX_CPU_MILLICORES as i128 <= i64::MAX as i128);
