//! The native API under `/api/v1`: [`router`] holds its routes and [`route_table`] lists
//! them for the OpenAPI document. Handlers live in one file per resource family; what both
//! API dialects share sits below them (`state`, `extract`, `query`), and `app` mounts this
//! router beside the Kubernetes one.
//!
//! Layout:
//! - `objects`: list, get, create, replace, delete of every kind, and a deployment's scale;
//! - `pods`: a pod's binding, status, scheduling explanation and log;
//! - `sessions`: a pod's exec and attach, WebSocket sessions proxied to its node's agent;
//! - `nodes`: a node's status heartbeat, status, cordon and uncordon;
//! - `leases`: a node's lease renewal;
//! - `watch`: `?watch=true` as Server-Sent Events from any revision;
//! - `manifests`: `POST /api/v1/manifests/parse`, JSON or YAML read into objects;
//! - `about`: liveness, readiness, `/api/v1/info` and the metrics;
//! - [`openapi`]: the OpenAPI document of these routes.

mod about;
mod leases;
mod manifests;
mod nodes;
pub(crate) mod objects;
pub mod openapi;
pub(crate) mod pods;
pub(crate) mod sessions;
pub(crate) mod watch;

use axum::Router;
use axum::http::Method;
use axum::routing::{MethodRouter, get, post};
use shared::api::paths;
use shared::model::{ConfigMap, Deployment, Event, Kind, Lease, Namespace, Node, Pod, ReplicaSet, Secret, Service};

use crate::state::AppState;

/// A route and the methods it answers, as registered: the OpenAPI test compares the
/// document against this table.
pub type RouteTable = Vec<(String, Vec<Method>)>;

struct Routes {
    router: Router<AppState>,
    table: RouteTable,
}

impl Routes {
    fn add(mut self, path: &str, methods: &[Method], handler: MethodRouter<AppState>) -> Self {
        self.router = self.router.route(path, handler);
        self.table.push((path.to_string(), methods.to_vec()));
        self
    }

    /// The five routes of a namespaced kind: list across namespaces (and create from the
    /// body's namespace), list/create in a namespace, get/replace/delete one.
    fn namespaced<R: crate::resources::Resource>(self) -> Self {
        let plural = R::KIND.plural();
        self.add(
            &format!("/api/v1/{plural}"),
            &[Method::GET, Method::POST],
            get(objects::list_all::<R>).post(objects::create_from_body::<R>),
        )
        .add(
            &format!("/api/v1/namespaces/{{namespace}}/{plural}"),
            &[Method::GET, Method::POST],
            get(objects::list_namespaced::<R>).post(objects::create_namespaced::<R>),
        )
        .add(
            &format!("/api/v1/namespaces/{{namespace}}/{plural}/{{name}}"),
            &[Method::GET, Method::PUT, Method::DELETE],
            get(objects::get_namespaced::<R>).put(objects::replace_namespaced::<R>).delete(objects::delete_namespaced::<R>),
        )
    }

    fn cluster_scoped<R: crate::resources::Resource>(self) -> Self {
        let plural = R::KIND.plural();
        self.add(
            &format!("/api/v1/{plural}"),
            &[Method::GET, Method::POST],
            get(objects::list_all::<R>).post(objects::create_from_body::<R>),
        )
        .add(
            &format!("/api/v1/{plural}/{{name}}"),
            &[Method::GET, Method::PUT, Method::DELETE],
            get(objects::get_cluster::<R>).put(objects::replace_cluster::<R>).delete(objects::delete_cluster::<R>),
        )
    }
}

fn routes() -> Routes {
    Routes { router: Router::new(), table: Vec::new() }
        .add(paths::HEALTHZ, &[Method::GET], get(about::healthz))
        .add(paths::READYZ, &[Method::GET], get(about::readyz))
        .add(paths::METRICS, &[Method::GET], get(about::metrics))
        .add(paths::OPENAPI, &[Method::GET], get(openapi::serve))
        .add(paths::INFO, &[Method::GET], get(about::info))
        .add(paths::MANIFESTS_PARSE, &[Method::POST], post(manifests::parse))
        .namespaced::<Pod>()
        .namespaced::<Deployment>()
        .namespaced::<ReplicaSet>()
        .namespaced::<Service>()
        .namespaced::<ConfigMap>()
        .namespaced::<Secret>()
        .namespaced::<Event>()
        .cluster_scoped::<Node>()
        .cluster_scoped::<Namespace>()
        // Leases are read like any kind; only registration and renewal write them.
        .add(&paths::collection(Kind::Lease, None), &[Method::GET], get(objects::list_all::<Lease>))
        .add("/api/v1/leases/{name}", &[Method::GET, Method::PUT], get(objects::get_cluster::<Lease>).put(leases::renew))
        .add("/api/v1/namespaces/{namespace}/pods/{name}/binding", &[Method::POST], post(pods::bind))
        .add("/api/v1/namespaces/{namespace}/pods/{name}/status", &[Method::GET, Method::PUT], get(pods::get_status).put(pods::put_status))
        .add("/api/v1/namespaces/{namespace}/pods/{name}/scheduling", &[Method::GET], get(pods::scheduling))
        .add("/api/v1/namespaces/{namespace}/pods/{name}/log", &[Method::GET], get(pods::log))
        .add("/api/v1/namespaces/{namespace}/pods/{name}/exec", &[Method::GET, Method::POST], get(sessions::exec).post(sessions::exec))
        .add(
            "/api/v1/namespaces/{namespace}/pods/{name}/attach",
            &[Method::GET, Method::POST],
            get(sessions::attach).post(sessions::attach),
        )
        .add(
            "/api/v1/namespaces/{namespace}/pods/{name}/portforward",
            &[Method::GET, Method::POST],
            get(sessions::port_forward).post(sessions::port_forward),
        )
        .add(
            "/api/v1/namespaces/{namespace}/deployments/{name}/scale",
            &[Method::GET, Method::PUT],
            get(objects::get_scale::<Deployment>).put(objects::put_scale::<Deployment>),
        )
        .add(
            "/api/v1/namespaces/{namespace}/replicasets/{name}/scale",
            &[Method::GET, Method::PUT],
            get(objects::get_scale::<ReplicaSet>).put(objects::put_scale::<ReplicaSet>),
        )
        .add("/api/v1/nodes/{name}/heartbeat", &[Method::POST], post(nodes::heartbeat))
        .add("/api/v1/nodes/{name}/status", &[Method::GET, Method::PUT], get(nodes::get_status).put(nodes::put_status))
        .add("/api/v1/nodes/{name}/cordon", &[Method::POST], post(nodes::cordon))
        .add("/api/v1/nodes/{name}/uncordon", &[Method::POST], post(nodes::uncordon))
}

/// Every route the API serves, with its methods.
pub fn route_table() -> RouteTable {
    routes().table
}

/// The native API's routes.
pub fn router() -> Router<AppState> {
    routes().router
}
