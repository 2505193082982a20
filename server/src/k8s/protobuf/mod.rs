//! Kubernetes' protobuf bodies, which client-go's typed clients send (`kubectl create
//! deployment|service|namespace|configmap|secret`, `kubectl drain`'s DeleteOptions): the
//! `k8s\0` envelope (`runtime.Unknown`) around one message, read into the JSON the other
//! bodies are, so the same checks see it and a field Shepherd refuses gets the same answer.
//!
//! Why not advertise JSON instead: client-go's typed clients are generated preferring
//! protobuf (`gentype.PrefersProtobuf`) and use it whenever the config names no content
//! type, which kubectl never does; the only answer that makes client-go change its content
//! type is a 415 to CBOR. Why a table and not `k8s-pb`'s prost types: prost skips the fields
//! it does not know, where this reader names them, and those types have no serde, so reaching
//! the JSON would take a hand-written conversion of every field anyway. The table below holds
//! each message's field numbers and JSON names (from Kubernetes' `generated.proto`); one
//! walk reads any of them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

mod messages;

use self::messages::Shape::{Bool, BytesMap, Int, IntOrString, Message, QuantityMap, ServerSet, Text, TextMap, Unread};
use self::messages::{DELETE_OPTIONS, Field, Schema, review_schema_of, schema_of};
use super::status::{Result, Status};

pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

/// One field on the wire: its number and its varint or bytes.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn refuse(message: impl Into<String>) -> Status {
    Status::bad_request(format!("cannot read the protobuf body: {}", message.into()))
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).ok_or_else(|| refuse("it ends inside a number"))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(refuse("a number is longer than 64 bits"))
}

/// The fields of a message, in order.
fn wire_fields(bytes: &[u8]) -> Result<Vec<(u64, Wire<'_>)>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let field = match key & 7 {
            0 => Wire::Varint(varint(bytes, &mut at)?),
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?).map_err(|_| refuse("a length is too large"))?;
                let end = at.checked_add(len).filter(|end| *end <= bytes.len()).ok_or_else(|| refuse("a field runs past the end"))?;
                let slice = &bytes[at..end];
                at = end;
                Wire::Bytes(slice)
            }
            other => return Err(refuse(format!("wire type {other} is used by no field of the messages Shepherd reads"))),
        };
        out.push((key >> 3, field));
    }
    Ok(out)
}

/// A message whose fields are all unset, however deep: what Go writes for an empty struct.
fn says_nothing(bytes: &[u8]) -> bool {
    wire_fields(bytes).is_ok_and(|fields| {
        fields.iter().all(|(_, f)| match f {
            Wire::Bytes(inner) => inner.is_empty() || says_nothing(inner),
            Wire::Varint(v) => *v == 0,
        })
    })
}

fn bytes_of<'a>(wire: &Wire<'a>, path: &str) -> Result<&'a [u8]> {
    match wire {
        Wire::Bytes(b) => Ok(b),
        Wire::Varint(_) => Err(refuse(format!("{path} holds a number where Kubernetes has a string or a message"))),
    }
}

fn text(wire: &Wire<'_>, path: &str) -> Result<String> {
    String::from_utf8(bytes_of(wire, path)?.to_vec()).map_err(|_| refuse(format!("{path} is not UTF-8")))
}

/// The value of a `Quantity` message, its field 1.
fn quantity(bytes: &[u8], path: &str) -> Result<Value> {
    let mut value = String::new();
    for (number, wire) in wire_fields(bytes)? {
        match number {
            1 => value = text(&wire, path)?,
            other => return Err(refuse(format!("Quantity has no field {other} (at {path})"))),
        }
    }
    Ok(Value::String(value))
}

/// An `IntOrString` (type 1, intVal 2, strVal 3) as JSON's number or string.
fn int_or_string(bytes: &[u8], path: &str) -> Result<Value> {
    let (mut is_string, mut int, mut string) = (false, 0i64, String::new());
    for (number, wire) in wire_fields(bytes)? {
        match (number, &wire) {
            (1, Wire::Varint(kind)) => is_string = *kind == 1,
            (2, Wire::Varint(v)) => int = i64::from(*v as i32),
            (3, _) => string = text(&wire, path)?,
            (other, _) => return Err(refuse(format!("IntOrString has no field {other} of that type (at {path})"))),
        }
    }
    Ok(if is_string { Value::String(string) } else { Value::from(int) })
}

/// A map entry (key 1, value 2) with its value read by `value`.
fn map_entry(bytes: &[u8], path: &str, value: impl Fn(&Wire<'_>, &str) -> Result<Value>) -> Result<(String, Value)> {
    let (mut key, mut read) = (String::new(), None);
    for (number, wire) in wire_fields(bytes)? {
        match number {
            1 => key = text(&wire, path)?,
            2 => read = Some(value(&wire, path)?),
            other => return Err(refuse(format!("a map entry has no field {other} (at {path})"))),
        }
    }
    let read = match read {
        Some(read) => read,
        None => value(&Wire::Bytes(&[]), path)?,
    };
    Ok((key, read))
}

/// One field's value as JSON, or `None` when it says nothing (an unset value, as Go's
/// encoder writes for a field JSON would leave out).
fn value(field: &Field, wire: &Wire<'_>, path: &str) -> Result<Option<Value>> {
    let read = match (field.shape, wire) {
        (ServerSet, _) => return Ok(None),
        (Int, Wire::Varint(v)) => Value::from(*v as i64),
        (Bool, Wire::Varint(v)) => Value::Bool(*v != 0),
        (Int | Bool, Wire::Bytes(_)) => return Err(refuse(format!("{path} holds bytes where Kubernetes has a number"))),
        (Text, _) => Value::String(text(wire, path)?),
        (Message(schema), _) => Value::Object(message(schema, bytes_of(wire, path)?, path)?),
        (IntOrString, _) => int_or_string(bytes_of(wire, path)?, path)?,
        (Unread, _) if says_nothing(bytes_of(wire, path)?) => return Ok(None),
        (Unread, _) => {
            return Err(Status::new(
                axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                format!("{path}: Shepherd reads this field from JSON bodies only; send the object as JSON (kubectl apply -f)"),
            ));
        }
        (TextMap | BytesMap | QuantityMap, _) => {
            let entry = map_entry(bytes_of(wire, path)?, path, |w, p| match field.shape {
                TextMap => text(w, p).map(Value::String),
                BytesMap => bytes_of(w, p).map(|b| Value::String(STANDARD.encode(b))),
                _ => quantity(bytes_of(w, p)?, p),
            })?;
            return Ok(Some(Value::Object(Map::from_iter([entry]))));
        }
    };
    let unset = match &read {
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Bool(b) => !b,
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    // A list keeps every item, empty ones too.
    Ok((!unset || field.zero_counts || field.repeated).then_some(read))
}

/// A message of `schema` as a JSON object with Kubernetes' field names.
fn message(schema: &Schema, bytes: &[u8], path: &str) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for (number, wire) in wire_fields(bytes)? {
        let field = schema.fields.iter().find(|f| f.number == number).ok_or_else(|| {
            refuse(format!("{} has no field {number} in Kubernetes (at {})", schema.name, if path.is_empty() { "the top" } else { path }))
        })?;
        let at = if path.is_empty() { field.name.to_string() } else { format!("{path}.{}", field.name) };
        let at = match (field.repeated, out.get(field.name)) {
            (true, Some(Value::Array(items))) => format!("{at}[{}]", items.len()),
            (true, _) => format!("{at}[0]"),
            (false, _) => at,
        };
        let Some(read) = value(field, &wire, &at)? else { continue };
        match (field.repeated, field.shape) {
            (true, _) => match out.entry(field.name).or_insert_with(|| Value::Array(Vec::new())) {
                Value::Array(items) => items.push(read),
                _ => unreachable!("a repeated field is an array"),
            },
            // A map's entries come one field each.
            (false, TextMap | BytesMap | QuantityMap) => {
                if let (Value::Object(map), Value::Object(entry)) =
                    (out.entry(field.name).or_insert_with(|| Value::Object(Map::new())), read)
                {
                    map.extend(entry);
                }
            }
            (false, _) => drop(out.insert(field.name.to_string(), read)),
        }
    }
    Ok(out)
}

/// `(apiVersion, kind, raw)` from the envelope.
fn unwrap(body: &[u8]) -> Result<(String, String, &[u8])> {
    let inner = body.strip_prefix(MAGIC).ok_or_else(|| refuse("it does not start with the k8s envelope"))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (number, wire) in wire_fields(inner)? {
        match number {
            1 => {
                for (n, w) in wire_fields(bytes_of(&wire, "typeMeta")?)? {
                    match n {
                        1 => api_version = text(&w, "apiVersion")?,
                        2 => kind = text(&w, "kind")?,
                        _ => {}
                    }
                }
            }
            2 => raw = bytes_of(&wire, "raw")?,
            // contentEncoding and contentType: the body's own media type says it all.
            3 | 4 => {}
            other => return Err(refuse(format!("the envelope has no field {other} that Shepherd reads"))),
        }
    }
    Ok((api_version, kind, raw))
}

/// A whole object's protobuf body (a Pod, Deployment, ReplicaSet, Service, Namespace,
/// ConfigMap or Secret) as its JSON.
pub fn object(body: &[u8]) -> Result<Value> {
    let (api_version, kind, raw) = unwrap(body)?;
    let schema = schema_of(&kind).ok_or_else(|| {
        Status::unsupported_media_type(format!(
            "Shepherd reads protobuf only for the kinds it serves and DeleteOptions, not a {kind:?}: send it as application/json"
        ))
    })?;
    let mut out = Map::from_iter([("apiVersion".to_string(), Value::String(api_version)), ("kind".to_string(), Value::String(kind))]);
    out.extend(message(schema, raw, "")?);
    Ok(Value::Object(out))
}

/// The body of `kubectl auth can-i` as JSON: a `SelfSubjectAccessReview`, or with `--list` a
/// `SelfSubjectRulesReview`.
pub fn access_review(body: &[u8]) -> Result<Value> {
    let (api_version, kind, raw) = unwrap(body)?;
    let schema = review_schema_of(&kind).ok_or_else(|| {
        Status::unsupported_media_type(format!("this path reads a SelfSubjectAccessReview or SelfSubjectRulesReview, not a {kind:?}"))
    })?;
    let mut out = Map::from_iter([("apiVersion".to_string(), Value::String(api_version)), ("kind".to_string(), Value::String(kind))]);
    out.extend(message(schema, raw, "")?);
    Ok(Value::Object(out))
}

/// A DeleteOptions body as JSON.
pub fn delete_options(body: &[u8]) -> Result<Value> {
    let (_, _, raw) = unwrap(body)?;
    Ok(Value::Object(message(&DELETE_OPTIONS, raw, "")?))
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::json;

    use super::*;

    fn varint(mut value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
        out
    }

    fn bytes_field(number: u64, body: &[u8]) -> Vec<u8> {
        [varint((number << 3) | 2), varint(body.len() as u64), body.to_vec()].concat()
    }

    fn varint_field(number: u64, value: u64) -> Vec<u8> {
        [varint(number << 3), varint(value)].concat()
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [bytes_field(1, api_version.as_bytes()), bytes_field(2, kind.as_bytes())].concat();
        [MAGIC.to_vec(), bytes_field(1, &type_meta), bytes_field(2, raw), bytes_field(3, b""), bytes_field(4, b"")].concat()
    }

    fn entry(key: &[u8], value: &[u8]) -> Vec<u8> {
        [bytes_field(1, key), bytes_field(2, value)].concat()
    }

    /// What kubectl 1.32 sends for `kubectl auth can-i create pods`, byte for byte.
    #[test]
    fn kubectls_access_review_reads_as_json() {
        let sent = b"k8s\x00\n2\n\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12?\n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12!\n\x1f\n\x07default\x12\x06create\x1a\x00\"\x00*\x04pods2\x00:\x00\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00\"\x00";
        let review = access_review(sent).unwrap();
        assert_eq!(review["kind"], "SelfSubjectAccessReview");
        assert_eq!(review["spec"], json!({"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}}));
        let rules = envelope("authorization.k8s.io/v1", "SelfSubjectRulesReview", &bytes_field(2, &bytes_field(1, b"team")));
        assert_eq!(access_review(&rules).unwrap()["spec"], json!({"namespace": "team"}));
        let selector = envelope(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            &bytes_field(2, &bytes_field(1, &bytes_field(9, &bytes_field(1, b"a=b")))),
        );
        assert_eq!(access_review(&selector).unwrap_err().code, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(access_review(&envelope("v1", "Pod", b"")).unwrap_err().code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[test]
    fn a_namespace_and_delete_options_read_as_json() {
        let meta = [bytes_field(1, b"team-a"), bytes_field(11, &entry(b"team", b"a")), bytes_field(8, b"\x08\x01")].concat();
        let raw = [bytes_field(1, &meta), bytes_field(2, b""), bytes_field(3, &bytes_field(1, b""))].concat();
        let value = object(&envelope("v1", "Namespace", &raw)).unwrap();
        assert_eq!(value, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}));

        let raw = [varint_field(1, 0), bytes_field(4, b"Background"), bytes_field(5, b"All")].concat();
        let options = delete_options(&envelope("v1", "DeleteOptions", &raw)).unwrap();
        assert_eq!(options, json!({"gracePeriodSeconds": 0, "propagationPolicy": "Background", "dryRun": ["All"]}));
        assert_eq!(object(&envelope("v1", "Event", b"")).unwrap_err().code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[test]
    fn a_config_map_and_a_secret_read_as_json_with_bytes_in_base64() {
        let meta = bytes_field(1, &bytes_field(1, b"app"));
        let raw =
            [meta.clone(), bytes_field(2, &entry(b"a", b"b")), bytes_field(3, &entry(b"bin", b"\x00\x01")), varint_field(4, 1)].concat();
        let value = object(&envelope("v1", "ConfigMap", &raw)).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "data": {"a": "b"},
                "binaryData": {"bin": "AAE="}, "immutable": true})
        );
        let raw = [meta, bytes_field(2, &entry(b"p", b"q")), bytes_field(3, b"Opaque"), bytes_field(4, &entry(b"s", b"t"))].concat();
        let value = object(&envelope("v1", "Secret", &raw)).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app"}, "data": {"p": "cQ=="}, "type": "Opaque",
                "stringData": {"s": "t"}})
        );
    }

    /// What `kubectl create deployment d2 --image=minimal --replicas=0 --port=80` sends.
    #[test]
    fn a_deployment_reads_with_its_template_quantities_and_a_replica_count_of_zero() {
        let labels = bytes_field(11, &entry(b"app", b"d2"));
        let meta = [bytes_field(1, b"d2"), labels.clone()].concat();
        let resources = bytes_field(2, &entry(b"cpu", &bytes_field(1, b"250m")));
        let container = [
            bytes_field(1, b"minimal"),
            bytes_field(2, b"minimal"),
            bytes_field(6, &[varint_field(3, 80), bytes_field(4, b"TCP")].concat()),
            bytes_field(8, &resources),
        ]
        .concat();
        let template = [bytes_field(1, &labels), bytes_field(2, &bytes_field(2, &container))].concat();
        let surge = [varint_field(1, 1), bytes_field(3, b"25%")].concat();
        let strategy = bytes_field(2, &bytes_field(2, &surge));
        let spec = [
            varint_field(1, 0),
            bytes_field(2, &bytes_field(1, &entry(b"app", b"d2"))),
            bytes_field(3, &template),
            bytes_field(4, &strategy),
        ]
        .concat();
        let raw = [bytes_field(1, &meta), bytes_field(2, &spec), bytes_field(3, b"")].concat();
        let value = object(&envelope("apps/v1", "Deployment", &raw)).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d2", "labels": {"app": "d2"}},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d2"}},
                    "template": {"metadata": {"labels": {"app": "d2"}}, "spec": {"containers": [{"name": "minimal", "image": "minimal",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {"requests": {"cpu": "250m"}}}]}},
                    "strategy": {"rollingUpdate": {"maxSurge": "25%"}}}})
        );
    }

    #[test]
    fn a_service_port_targets_a_number_or_a_name() {
        let port =
            |target: &[u8]| [bytes_field(1, b"80-8080"), bytes_field(2, b"TCP"), varint_field(3, 80), bytes_field(4, target)].concat();
        let spec = [
            bytes_field(1, &port(&varint_field(2, 90))),
            bytes_field(1, &port(&[varint_field(1, 1), bytes_field(3, b"http")].concat())),
            bytes_field(4, b"NodePort"),
        ]
        .concat();
        let raw = [bytes_field(1, &bytes_field(1, b"web")), bytes_field(2, &spec)].concat();
        let value = object(&envelope("v1", "Service", &raw)).unwrap();
        assert_eq!(value["spec"]["ports"][0]["targetPort"], 90);
        assert_eq!(value["spec"]["ports"][1]["targetPort"], "http");
        assert_eq!(value["spec"]["type"], "NodePort");
    }

    #[test]
    fn hostile_bytes_are_a_400_that_says_what_is_wrong() {
        let deployment = |raw: &[u8]| object(&envelope("apps/v1", "Deployment", raw)).unwrap_err();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"\x0a".to_vec(), "it ends inside a number"),
            (b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f".to_vec(), "runs past the end"),
            (b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01".to_vec(), "longer than 64 bits"),
            (bytes_field(1, &bytes_field(99, b"x")), "ObjectMeta has no field 99 in Kubernetes (at metadata)"),
            (vec![(2 << 3) | 5, 0, 0, 0, 0], "wire type 5"),
            (bytes_field(1, &varint_field(1, 7)), "metadata.name holds a number"),
        ];
        for (raw, says) in cases {
            let refused = deployment(&raw);
            assert_eq!(refused.code, StatusCode::BAD_REQUEST, "{}", refused.message);
            assert!(refused.message.contains(says), "{} should say {says:?}", refused.message);
        }
        assert_eq!(object(b"k8s").unwrap_err().code, StatusCode::BAD_REQUEST);
        assert_eq!(object(b"{\"kind\": \"Pod\"}").unwrap_err().code, StatusCode::BAD_REQUEST);
        // A Kubernetes field this reader has no table for is refused unless empty.
        let affinity = bytes_field(2, &bytes_field(18, &bytes_field(1, b"x")));
        let refused = object(&envelope("v1", "Pod", &affinity)).unwrap_err();
        assert_eq!(
            (refused.code, refused.message.starts_with("spec.affinity: ")),
            (StatusCode::UNPROCESSABLE_ENTITY, true),
            "{}",
            refused.message
        );
        assert!(object(&envelope("v1", "Pod", &bytes_field(2, &bytes_field(18, b"")))).is_ok());
    }
}
