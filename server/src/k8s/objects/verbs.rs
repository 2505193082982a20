//! The verbs on one object: get, create, replace, patch and delete, and the subresources
//! `log`, `binding` and `scale`. Each body is translated by [`convert`] and written through
//! the native API's own functions (`api::objects`, `api::pods`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use shared::model::{Deployment, Kind, ManagedFieldsEntry, Object, ReplicaSet};

use super::request::{Req, by_kind, flag, invalid_options, media_type, parse_body, parse_version};
use crate::api::objects as native;
use crate::error::ApiError;
use crate::k8s::convert::{self, Convert, to_json};
use crate::k8s::kinds::Served;
use crate::k8s::status::{Result, Status};
use crate::k8s::{managed, patch, protobuf};

/// kube-apiserver's limit on a manager's name.
const FIELD_MANAGER_MAX: usize = 128;
use crate::query::DeleteParams;

impl Req {
    pub(super) async fn get(&self) -> Result<Response> {
        self.reach(parse_version(self.query.resource_version.as_deref())?).await?;
        Ok(self.answer(StatusCode::OK, &*self.stored()?))
    }

    /// The kinds this API only reads, and why.
    fn refuse_writes(&self) -> Result<()> {
        let why = match self.target.kind {
            Served::Endpoints | Served::EndpointSlices => "are derived from services and their ready pods by the endpoints controller",
            Served::Stored(Kind::Lease) => {
                "are written by their holders through the native API (a node's agent renews its node's lease, the API servers their leader election)"
            }
            _ => return Ok(()),
        };
        Err(Status::method_not_allowed(format!("{} {why}; they cannot be written", self.target.kind.plural())))
    }

    /// A whole object's body as JSON: JSON itself, or the protobuf kubectl's typed commands
    /// send (`create deployment`, `create service`, `create namespace`, …).
    fn object_body(&self, body: &[u8]) -> Result<Value> {
        match media_type(&self.headers).as_str() {
            "application/json" | "" => parse_body(body),
            protobuf::MEDIA_TYPE => protobuf::object(body),
            other => Err(Status::unsupported_media_type(format!("send the body as application/json (got {other})"))),
        }
    }

    pub(super) async fn create(&self, body: &[u8]) -> Result<Response> {
        self.refuse_writes()?;
        let value = self.object_body(body)?;
        let managed = managed::update(None, &value, &[], &self.writer()?);
        self.create_value(&value, managed).await
    }

    async fn create_value(&self, value: &Value, managed: Vec<ManagedFieldsEntry>) -> Result<Response> {
        let outcome = by_kind!(self.target.kind.stored(), create_as(self, value, managed).await)?;
        let object = outcome.object().ok_or_else(|| Status::from(ApiError::internal("the store returned no object")))?;
        Ok(self.answer(StatusCode::CREATED, object))
    }

    pub(super) async fn replace(&self, body: &[u8]) -> Result<Response> {
        self.refuse_writes()?;
        let value = self.object_body(body)?;
        let stored = self.stored()?;
        let live = to_json(self.target.kind, &stored);
        let managed = managed::update(Some(&live), &value, &stored.metadata().managed_fields, &self.writer()?);
        self.write(&value, managed).await
    }

    /// Writes a whole object in Kubernetes' shape over the stored one (PUT, and a patch's
    /// result), with the managed fields the write leaves.
    async fn write(&self, value: &Value, managed: Vec<ManagedFieldsEntry>) -> Result<Response> {
        let outcome = by_kind!(self.target.kind.stored(), replace_as(self, value, managed).await)?;
        let object = outcome.object().ok_or_else(|| Status::from(ApiError::internal("the store returned no object")))?;
        Ok(self.answer(StatusCode::OK, object))
    }

    /// The manager a write records: `fieldManager`, else the client's user agent up to its
    /// first `/` (`kubectl`), as kube-apiserver names it.
    fn writer(&self) -> Result<managed::Writer<'_>> {
        let manager = match self.query.field_manager.as_deref().filter(|m| !m.is_empty()) {
            Some(manager) => {
                if manager.len() > FIELD_MANAGER_MAX {
                    return Err(invalid_options(
                        self.options(),
                        "fieldManager",
                        format!("Too long: may not be more than {FIELD_MANAGER_MAX} bytes"),
                        "FieldValueTooLong",
                    ));
                }
                if manager.chars().any(char::is_control) {
                    return Err(invalid_options(
                        self.options(),
                        "fieldManager",
                        format!("Invalid value: {manager:?}: must only contain printable characters"),
                        "FieldValueInvalid",
                    ));
                }
                manager
            }
            None => {
                let agent = self.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
                let prefix = agent.split('/').next().unwrap_or("");
                &prefix[..prefix.floor_char_boundary(FIELD_MANAGER_MAX)]
            }
        };
        let subresource = self.target.sub.as_deref().unwrap_or("");
        Ok(managed::Writer { manager, api_version: self.target.kind.api_version(), subresource, now: chrono::Utc::now() })
    }

    fn options(&self) -> &'static str {
        match self.method {
            Method::POST => "CreateOptions",
            Method::PUT => "UpdateOptions",
            _ => "PatchOptions",
        }
    }

    pub(super) async fn patch(&self, body: &[u8]) -> Result<Response> {
        self.refuse_writes()?;
        let media = media_type(&self.headers);
        if media == patch::APPLY_MEDIA_TYPE {
            return self.apply(body).await;
        }
        if self.query.force.is_some() {
            return Err(invalid_options(
                "PatchOptions",
                "force",
                "Forbidden: may not be specified for non-apply patch".into(),
                "FieldValueForbidden",
            ));
        }
        let kind = patch::PatchKind::from_media_type(&media)?;
        let patch_value = parse_body(body)?;
        let writer = self.writer()?;
        // A patch is read-modify-write; a lost race is retried on the fresh state unless the
        // patch itself names the version it expects.
        let mut attempts = 0;
        loop {
            let stored = self.stored()?;
            let current = to_json(self.target.kind, &stored);
            let patched = patch::apply(kind, current.clone(), &patch_value)?;
            let managed = managed::update(Some(&current), &patched, &stored.metadata().managed_fields, &writer);
            match self.write(&patched, managed).await {
                Err(status)
                    if status.reason == "Conflict" && attempts < 3 && patch_value.pointer("/metadata/resourceVersion").is_none() =>
                {
                    attempts += 1;
                }
                result => return result,
            }
        }
    }

    /// Server-side apply: the applied configuration (YAML or JSON) merged by its manager's
    /// rights; an apply to an object that does not exist creates it.
    async fn apply(&self, body: &[u8]) -> Result<Response> {
        if self.query.field_manager.as_deref().is_none_or(str::is_empty) {
            return Err(invalid_options(
                "PatchOptions",
                "fieldManager",
                "Required value: is required for apply patch".into(),
                "FieldValueRequired",
            ));
        }
        let writer = self.writer()?;
        let force = flag(&self.query.force)?;
        let config = applied_config(body)?;
        if config.pointer("/metadata/name").and_then(Value::as_str) != Some(self.name()) {
            return Err(Status::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({})",
                config.pointer("/metadata/name").and_then(Value::as_str).unwrap_or(""),
                self.name()
            )));
        }
        let mut attempts = 0;
        loop {
            let stored = match self.stored() {
                Ok(stored) => Some(stored),
                Err(status) if status.code == StatusCode::NOT_FOUND => None,
                Err(status) => return Err(status),
            };
            let live = stored.as_ref().map(|o| to_json(self.target.kind, o));
            let entries = stored.as_ref().map(|o| o.metadata().managed_fields.as_slice()).unwrap_or_default();
            let (merged, managed) = managed::apply(live.as_ref(), &config, entries, &writer, force)?;
            let result = match stored {
                Some(_) => self.write(&merged, managed).await,
                None => self.create_value(&merged, managed).await,
            };
            match result {
                Err(status) if (status.reason == "Conflict" || status.reason == "AlreadyExists") && attempts < 3 => attempts += 1,
                result => return result,
            }
        }
    }

    pub(super) async fn delete(&self, body: &[u8]) -> Result<Response> {
        self.refuse_writes()?;
        let options = match media_type(&self.headers).as_str() {
            _ if body.is_empty() => json!({}),
            // `kubectl drain` deletes through a typed client.
            protobuf::MEDIA_TYPE => protobuf::delete_options(body)?,
            "application/json" | "" => parse_body(body)?,
            // A form or text body is what a web page could send: DeleteOptions only as JSON.
            other => return Err(Status::unsupported_media_type(format!("send DeleteOptions as application/json (got {other})"))),
        };
        if options.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
            return Err(Status::bad_request("orphanDependents is not supported: Shepherd deletes in the background"));
        }
        // DeleteOptions carry `dryRun` in the body (kubectl's way) or the query.
        let in_body: Vec<&str> = match options.get("dryRun") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(values)) => values.iter().map(|v| v.as_str().unwrap_or("")).collect(),
            Some(other) => return Err(Status::bad_request(format!("DeleteOptions.dryRun must be a list of strings, not {other}"))),
        };
        let dry_run = self.dry_run || super::request::dry_run("DeleteOptions", &in_body)?;
        let grace = options.get("gracePeriodSeconds").and_then(Value::as_i64).or(self.query.grace_period_seconds);
        if let Some(message) = grace.and_then(shared::validation::grace_seconds_error) {
            let causes = vec![convert::Cause::invalid("gracePeriodSeconds", message)];
            return Err(convert::Error::Refused { kind: self.kind_name(), name: self.name().to_string(), causes }.into());
        }
        let policy = options.get("propagationPolicy").and_then(Value::as_str).or(self.query.propagation_policy.as_deref());
        if let Some(policy) = policy.filter(|p| *p != "Background") {
            return Err(Status::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                format!(
                    "propagationPolicy {policy:?} is not supported: Shepherd deletes in the background (a deployment's controller removes its pods)"
                ),
            ));
        }
        let preconditions = options.get("preconditions");
        let resource_version = parse_version(preconditions.and_then(|p| p.get("resourceVersion")).and_then(Value::as_str))?;
        let uid = preconditions.and_then(|p| p.get("uid")).and_then(Value::as_str).map(str::to_string);
        if let Some(uid) = uid.as_deref().filter(|_| self.target.kind != Served::Stored(Kind::Pod))
            && self.stored()?.metadata().uid != uid
        {
            return Err(Status::new(
                StatusCode::CONFLICT,
                "Conflict",
                format!("the uid precondition {uid} does not match {} {}", self.kind_name(), self.name()),
            ));
        }
        let params = DeleteParams {
            resource_version: (resource_version > 0).then_some(resource_version),
            grace_period_seconds: grace,
            uid,
            dry_run: dry_run.then(|| crate::query::DRY_RUN_ALL.to_string()),
        };
        let outcome = by_kind!(self.target.kind.stored(), delete_as(self, params).await)?;
        match outcome {
            crate::store::Outcome::Put { object, .. } => Ok(self.answer(StatusCode::OK, &object)),
            other => match other.object() {
                Some(object) => Ok(self.answer(StatusCode::OK, object)),
                None => Ok(Json(success(self.target.kind, self.name())).into_response()),
            },
        }
    }

    pub(super) async fn log(&self) -> Result<Response> {
        if self.query.limit_bytes.is_some() {
            return Err(Status::bad_request(
                "Shepherd's logs support follow, tailLines, container, timestamps, sinceSeconds, sinceTime and previous; limitBytes is not supported",
            ));
        }
        let params = crate::api::pods::LogParams {
            container: self.query.container.clone(),
            tail: self.query.tail_lines,
            follow: self.query.follow.as_ref().map(|_| flag(&self.query.follow)).transpose()?,
            timestamps: Some(flag(&self.query.timestamps)?),
            since_seconds: self.query.since_seconds,
            since_time: self.query.since_time.clone(),
            previous: Some(flag(&self.query.previous)?),
        };
        let path = Path((self.namespace().to_string(), self.name().to_string()));
        Ok(crate::api::pods::log(State(self.state.clone()), path, crate::extract::Params(params)).await?)
    }

    pub(super) async fn bind(&self, body: &[u8]) -> Result<Response> {
        let binding: k8s_openapi::api::core::v1::Binding =
            serde_json::from_slice(body).map_err(|e| Status::bad_request(format!("the body is not a valid Binding: {e}")))?;
        let native_binding = shared::model::Binding {
            kind: "Binding".into(),
            metadata: shared::model::ObjectMeta {
                name: binding.metadata.name.unwrap_or_default(),
                uid: binding.metadata.uid.unwrap_or_default(),
                ..Default::default()
            },
            target: shared::model::ObjectReference {
                kind: binding.target.kind.unwrap_or_default(),
                name: binding.target.name.unwrap_or_default(),
                ..Default::default()
            },
        };
        crate::api::pods::bind_pod(&self.state, self.namespace(), self.name(), &native_binding, self.dry_run).await?;
        Ok((StatusCode::CREATED, Json(json!({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201, "metadata": {}})))
            .into_response())
    }

    /// The Scale of the deployment or ReplicaSet the path names.
    fn current_scale(&self) -> Result<Value> {
        let scale = match &*self.stored()? {
            Object::Deployment(d) => convert::scale_out(&**d),
            Object::ReplicaSet(rs) => convert::scale_out(&**rs),
            _ => return Err(Status::not_found(self.target.kind.plural(), self.name(), "it has no scale subresource")),
        };
        Ok(serde_json::to_value(scale).unwrap_or_default())
    }

    pub(super) fn get_scale(&self) -> Result<Response> {
        Ok(Json(self.current_scale()?).into_response())
    }

    async fn scale_to(&self, value: &Value) -> Result<Response> {
        let scale = convert::scale_in(value)?;
        if !scale.metadata.name.is_empty() && scale.metadata.name != self.name() {
            return Err(Status::bad_request(format!("the Scale names {:?}, but the path names {:?}", scale.metadata.name, self.name())));
        }
        let (state, namespace, name) = (&self.state, self.namespace(), self.name());
        let writer = self.writer()?;
        let (manager, api_version, now) = (writer.manager.to_string(), self.target.kind.api_version(), writer.now);
        let record = move |entries: &[ManagedFieldsEntry], from: i32, to: i32| {
            managed::scale(entries, from, to, &managed::Writer { manager: &manager, api_version, subresource: "scale", now })
        };
        let scaled = match self.target.kind.stored() {
            Kind::ReplicaSet => {
                convert::scale_out(&native::scale_object::<ReplicaSet>(state, namespace, name, scale, record, self.dry_run).await?)
            }
            _ => convert::scale_out(&native::scale_object::<Deployment>(state, namespace, name, scale, record, self.dry_run).await?),
        };
        Ok(Json(scaled).into_response())
    }

    pub(super) async fn put_scale(&self, body: &[u8]) -> Result<Response> {
        match media_type(&self.headers).as_str() {
            "application/json" | "" => self.scale_to(&parse_body(body)?).await,
            other => Err(Status::unsupported_media_type(format!("send the Scale as application/json (got {other})"))),
        }
    }

    pub(super) async fn patch_scale(&self, body: &[u8]) -> Result<Response> {
        let media = media_type(&self.headers);
        if media == patch::APPLY_MEDIA_TYPE {
            return Err(Status::unsupported_media_type(format!(
                "server-side apply of {}/scale is not supported: apply the {} itself, or patch its scale",
                self.target.kind.plural(),
                self.kind_name()
            )));
        }
        let kind = patch::PatchKind::from_media_type(&media)?;
        let current = self.current_scale()?;
        let mut patched = patch::apply(kind, current, &parse_body(body)?)?;
        // The patch is against the state just read: no version check of its own.
        if let Some(meta) = patched.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        self.scale_to(&patched).await
    }
}

/// The `Status` a delete answers when the object is gone and there is nothing to return.
fn success(kind: Served, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Status", "status": "Success", "metadata": {}, "details": {"name": name, "kind": kind.plural()}})
}

/// `value` as a `R` for `req`, over the object it replaces when there is one.
fn decode_for<R: Convert>(req: &Req, value: &Value, stored: Option<&R>) -> Result<R> {
    if let Some(kind) = value.get("kind").and_then(Value::as_str).filter(|k| *k != req.kind_name()) {
        return Err(Status::bad_request(format!("the body is a {kind} but this path takes a {}", req.kind_name())));
    }
    if let Some(version) = value.get("apiVersion").and_then(Value::as_str).filter(|v| *v != req.target.kind.api_version()) {
        return Err(Status::bad_request(format!(
            "apiVersion {version:?} is not served for {}: use {}",
            req.kind_name(),
            req.target.kind.api_version()
        )));
    }
    Ok(convert::decode_over::<R>(value, stored)?)
}

/// A native failure as a Status: a 422's field errors become causes named in the fields of
/// the Kubernetes object, with its kind and name, as when [`convert`] refuses a body.
fn refused(kind: Kind, name: String) -> impl FnOnce(ApiError) -> Status {
    move |e| {
        if e.status != StatusCode::UNPROCESSABLE_ENTITY || e.details.is_empty() {
            return Status::from(e);
        }
        let causes = convert::invalid_causes(kind, e.details);
        Status::from(convert::Error::Refused { kind: kind.as_str(), name, causes })
    }
}

/// An apply's body: one object, in YAML or JSON (JSON being YAML).
fn applied_config(body: &[u8]) -> Result<Value> {
    let text = std::str::from_utf8(body).map_err(|_| Status::bad_request("the applied configuration is not UTF-8 text"))?;
    let documents =
        shared::yaml::documents(text).map_err(|e| Status::bad_request(format!("the applied configuration is not valid YAML: {e}")))?;
    match documents.as_slice() {
        [document] if document.root.to_value().is_object() => Ok(document.root.to_value()),
        _ => Err(Status::bad_request("the applied configuration must be one object (one YAML document)")),
    }
}

async fn create_as<R: Convert>(req: &Req, value: &Value, managed: Vec<ManagedFieldsEntry>) -> Result<crate::store::Outcome> {
    let mut object: R = decode_for(req, value, None)?;
    object.meta_mut().managed_fields = managed;
    if !R::KIND.namespaced() {
        object.meta_mut().namespace.clear();
    }
    native::settle_namespace(&mut object, req.target.namespace.as_deref())?;
    let name = object.meta().name.clone();
    native::create(&req.state, &req.principal, object, req.dry_run).await.map_err(refused(R::KIND, name))
}

async fn replace_as<R: Convert>(req: &Req, value: &Value, managed: Vec<ManagedFieldsEntry>) -> Result<crate::store::Outcome> {
    // A missing object is refused by the replace itself, as not found.
    let stored = req.stored().ok();
    let mut object: R = decode_for(req, value, stored.as_deref().and_then(R::from_object))?;
    object.meta_mut().managed_fields = managed;
    native::replace_object(&req.state, &req.principal, req.namespace(), req.name(), object, req.dry_run)
        .await
        .map_err(refused(R::KIND, req.name().to_string()))
}

async fn delete_as<R: Convert>(req: &Req, params: DeleteParams) -> Result<crate::store::Outcome> {
    Ok(native::delete::<R>(&req.state, &req.principal, req.namespace(), req.name(), params).await?)
}
