//! The little of Kubernetes' protobuf encoding that kubectl's typed commands send: the
//! `k8s\0` envelope (`runtime.Unknown`) around a `DeleteOptions` (`kubectl drain`), a
//! `Namespace` (`kubectl create namespace`), a `ConfigMap` (`kubectl create configmap`) or a
//! `Secret` (`kubectl create secret generic`). Each is read into the JSON the other bodies
//! are, so the same checks see it; a field this reader does not know is refused by number.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use super::status::{Result, Status};

pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

/// One field of a message: its number and its varint or bytes.
enum Field<'a> {
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
fn fields(bytes: &[u8]) -> Result<Vec<(u64, Field<'_>)>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let field = match key & 7 {
            0 => Field::Varint(varint(bytes, &mut at)?),
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?).map_err(|_| refuse("a length is too large"))?;
                let end = at.checked_add(len).filter(|end| *end <= bytes.len()).ok_or_else(|| refuse("a field runs past the end"))?;
                let slice = &bytes[at..end];
                at = end;
                Field::Bytes(slice)
            }
            other => return Err(refuse(format!("wire type {other} is not used by the messages Shepherd reads"))),
        };
        out.push((key >> 3, field));
    }
    Ok(out)
}

/// An empty string or message, or a zero: what Go's encoder writes for an unset field.
fn is_unset(field: &Field<'_>) -> bool {
    matches!(field, Field::Bytes([]) | Field::Varint(0))
}

/// A message whose fields are all unset, however deep.
fn says_nothing(bytes: &[u8]) -> bool {
    fields(bytes).is_ok_and(|fields| {
        fields.iter().all(|(_, f)| match f {
            Field::Bytes(inner) => inner.is_empty() || says_nothing(inner),
            Field::Varint(v) => *v == 0,
        })
    })
}

fn text(field: &Field<'_>) -> Result<String> {
    match field {
        Field::Bytes(b) => String::from_utf8(b.to_vec()).map_err(|_| refuse("a string is not UTF-8")),
        Field::Varint(_) => Err(refuse("a string field holds a number")),
    }
}

fn message<'a>(field: &Field<'a>) -> Result<&'a [u8]> {
    match field {
        Field::Bytes(b) => Ok(b),
        Field::Varint(_) => Err(refuse("a message field holds a number")),
    }
}

fn unknown(what: &str, number: u64) -> Status {
    Status::new(
        axum::http::StatusCode::UNPROCESSABLE_ENTITY,
        "Invalid",
        format!("field {number} of the protobuf {what} is not one Shepherd supports; send the object as JSON (kubectl apply -f)"),
    )
}

/// `(kind, raw)` from the envelope.
fn unwrap(body: &[u8]) -> Result<(String, &[u8])> {
    let inner = body.strip_prefix(MAGIC).ok_or_else(|| refuse("it does not start with the k8s envelope"))?;
    let (mut kind, mut raw) = (String::new(), &[][..]);
    for (number, field) in fields(inner)? {
        match number {
            1 => {
                for (n, f) in fields(message(&field)?)? {
                    if n == 2 {
                        kind = text(&f)?;
                    }
                }
            }
            2 => raw = message(&field)?,
            _ => {}
        }
    }
    Ok((kind, raw))
}

/// A protobuf `map<string, string>` (or `map<string, bytes>` when `bytes`, whose values
/// become base64 as JSON writes them): each entry a message of key 1 and value 2.
fn map_entries(entries: &[&[u8]], bytes: bool) -> Result<Value> {
    let mut map = Map::new();
    for entry in entries {
        let (mut key, mut value) = (String::new(), Value::String(String::new()));
        for (n, f) in fields(entry)? {
            match n {
                1 => key = text(&f)?,
                2 if bytes => value = STANDARD.encode(message(&f)?).into(),
                2 => value = text(&f)?.into(),
                _ => {}
            }
        }
        map.insert(key, value);
    }
    Ok(Value::Object(map))
}

fn string_map(entries: &[&[u8]]) -> Result<Value> {
    map_entries(entries, false)
}

fn object_meta(bytes: &[u8]) -> Result<Value> {
    let mut meta = Map::new();
    let (mut labels, mut annotations) = (Vec::new(), Vec::new());
    for (number, field) in fields(bytes)?.into_iter().filter(|(_, f)| !is_unset(f)) {
        match number {
            1 => drop(meta.insert("name".into(), text(&field)?.into())),
            3 => drop(meta.insert("namespace".into(), text(&field)?.into())),
            6 => drop(meta.insert("resourceVersion".into(), text(&field)?.into())),
            // selfLink, uid, generation, the timestamps, managedFields: the server's, as in JSON.
            4 | 5 | 7 | 8 | 9 | 17 => {}
            11 => labels.push(message(&field)?),
            12 => annotations.push(message(&field)?),
            other => return Err(unknown("ObjectMeta", other)),
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), string_map(&labels)?);
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), string_map(&annotations)?);
    }
    Ok(Value::Object(meta))
}

/// The body of a kubectl `create namespace`, `create configmap` or `create secret` as JSON.
pub fn object(body: &[u8]) -> Result<Value> {
    let (kind, raw) = unwrap(body)?;
    match kind.as_str() {
        "Namespace" => namespace(raw),
        "ConfigMap" => config_map(raw),
        "Secret" => secret(raw),
        _ => Err(Status::unsupported_media_type(format!(
            "Shepherd reads protobuf only for namespaces, ConfigMaps, Secrets and delete options, not a {kind:?}: write the \
             object as YAML and use `kubectl apply -f` (for example `kubectl create deployment web --image=nginx --dry-run=client \
             -o yaml | kubectl apply -f -`)"
        ))),
    }
}

/// The body of `kubectl auth can-i` as JSON: a `SelfSubjectAccessReview`, or with `--list` a
/// `SelfSubjectRulesReview`.
pub fn access_review(body: &[u8]) -> Result<Value> {
    let (kind, raw) = unwrap(body)?;
    if !["SelfSubjectAccessReview", "SelfSubjectRulesReview"].contains(&kind.as_str()) {
        return Err(Status::unsupported_media_type(format!(
            "this path reads a SelfSubjectAccessReview or SelfSubjectRulesReview, not a {kind:?}"
        )));
    }
    let mut out = json!({"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": {}});
    for (number, field) in fields(raw)?.into_iter().filter(|(_, f)| !is_unset(f)) {
        match (kind.as_str(), number) {
            (_, 1) => out["metadata"] = object_meta(message(&field)?)?,
            (_, 3) if says_nothing(message(&field)?) => {}
            ("SelfSubjectRulesReview", 2) => out["spec"] = strings(message(&field)?, "SelfSubjectRulesReviewSpec", &["namespace"])?,
            (_, 2) => {
                for (n, f) in fields(message(&field)?)?.into_iter().filter(|(_, f)| !is_unset(f)) {
                    let (name, attributes) = match n {
                        1 => ("resourceAttributes", strings(message(&f)?, "ResourceAttributes", &RESOURCE_ATTRIBUTES)?),
                        2 => ("nonResourceAttributes", strings(message(&f)?, "NonResourceAttributes", &["path", "verb"])?),
                        other => return Err(unknown("SelfSubjectAccessReviewSpec", other)),
                    };
                    out["spec"][name] = attributes;
                }
            }
            (kind, other) => return Err(unknown(kind, other)),
        }
    }
    Ok(out)
}

/// The string fields of `ResourceAttributes`, by number; its selectors (8, 9) are refused.
const RESOURCE_ATTRIBUTES: [&str; 7] = ["namespace", "verb", "group", "version", "resource", "subresource", "name"];

/// A message whose fields 1, 2, … are the strings `names`, as a JSON object.
fn strings(bytes: &[u8], what: &str, names: &[&str]) -> Result<Value> {
    let mut out = Map::new();
    for (number, field) in fields(bytes)?.into_iter().filter(|(_, f)| !is_unset(f)) {
        let name = usize::try_from(number).ok().and_then(|n| names.get(n.checked_sub(1)?)).ok_or_else(|| unknown(what, number))?;
        out.insert(name.to_string(), text(&field)?.into());
    }
    Ok(Value::Object(out))
}

fn namespace(raw: &[u8]) -> Result<Value> {
    let mut out = json!({"apiVersion": "v1", "kind": "Namespace"});
    for (number, field) in fields(raw)?.into_iter().filter(|(_, f)| !is_unset(f)) {
        match number {
            1 => out["metadata"] = object_meta(message(&field)?)?,
            // A spec or status whose every field is unset says nothing.
            2 | 3 if says_nothing(message(&field)?) => {}
            other => return Err(unknown("Namespace", other)),
        }
    }
    Ok(out)
}

/// The entries of a map field, gathered from its repeated occurrences.
fn push_entry<'a>(entries: &mut Vec<&'a [u8]>, field: &Field<'a>) -> Result<()> {
    entries.push(message(field)?);
    Ok(())
}

fn config_map(raw: &[u8]) -> Result<Value> {
    let mut out = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    let (mut data, mut binary) = (Vec::new(), Vec::new());
    for (number, field) in fields(raw)?.into_iter().filter(|(_, f)| !is_unset(f)) {
        match number {
            1 => out["metadata"] = object_meta(message(&field)?)?,
            2 => push_entry(&mut data, &field)?,
            3 => push_entry(&mut binary, &field)?,
            4 => out["immutable"] = matches!(field, Field::Varint(1)).into(),
            other => return Err(unknown("ConfigMap", other)),
        }
    }
    if !data.is_empty() {
        out["data"] = map_entries(&data, false)?;
    }
    if !binary.is_empty() {
        out["binaryData"] = map_entries(&binary, true)?;
    }
    Ok(out)
}

fn secret(raw: &[u8]) -> Result<Value> {
    let mut out = json!({"apiVersion": "v1", "kind": "Secret"});
    let (mut data, mut string_data) = (Vec::new(), Vec::new());
    for (number, field) in fields(raw)?.into_iter().filter(|(_, f)| !is_unset(f)) {
        match number {
            1 => out["metadata"] = object_meta(message(&field)?)?,
            2 => push_entry(&mut data, &field)?,
            3 => out["type"] = text(&field)?.into(),
            4 => push_entry(&mut string_data, &field)?,
            5 => out["immutable"] = matches!(field, Field::Varint(1)).into(),
            other => return Err(unknown("Secret", other)),
        }
    }
    if !data.is_empty() {
        out["data"] = map_entries(&data, true)?;
    }
    if !string_data.is_empty() {
        out["stringData"] = map_entries(&string_data, false)?;
    }
    Ok(out)
}

/// A DeleteOptions body as JSON.
pub fn delete_options(body: &[u8]) -> Result<Value> {
    let (_, raw) = unwrap(body)?;
    let mut out = Map::new();
    for (number, field) in fields(raw)? {
        match (number, &field) {
            // An int64 on the wire is its two's complement.
            (1, Field::Varint(v)) => drop(out.insert("gracePeriodSeconds".into(), (*v as i64).into())),
            (2, _) => {
                let mut preconditions = Map::new();
                for (n, f) in fields(message(&field)?)? {
                    match n {
                        1 => drop(preconditions.insert("uid".into(), text(&f)?.into())),
                        2 => drop(preconditions.insert("resourceVersion".into(), text(&f)?.into())),
                        other => return Err(unknown("Preconditions", other)),
                    }
                }
                out.insert("preconditions".into(), Value::Object(preconditions));
            }
            (3, Field::Varint(v)) => drop(out.insert("orphanDependents".into(), (*v != 0).into())),
            (4, _) => drop(out.insert("propagationPolicy".into(), text(&field)?.into())),
            (5, _) => drop(out.insert("dryRun".into(), json!([text(&field)?]))),
            (other, _) => return Err(unknown("DeleteOptions", other)),
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_field(number: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, body.len() as u8];
        out.extend_from_slice(body);
        out
    }

    fn envelope(kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [bytes_field(1, b"v1"), bytes_field(2, kind.as_bytes())].concat();
        [MAGIC.to_vec(), bytes_field(1, &type_meta), bytes_field(2, raw)].concat()
    }

    /// What kubectl 1.32 sends for `kubectl auth can-i create pods`, byte for byte.
    #[test]
    fn kubectls_access_review_reads_as_json() {
        let sent = b"k8s\x00\n2\n\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12?\n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12!\n\x1f\n\x07default\x12\x06create\x1a\x00\"\x00*\x04pods2\x00:\x00\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00\"\x00";
        let review = access_review(sent).unwrap();
        assert_eq!(review["kind"], "SelfSubjectAccessReview");
        assert_eq!(review["spec"], json!({"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}}));
        let rules = envelope("SelfSubjectRulesReview", &bytes_field(2, &bytes_field(1, b"team")));
        assert_eq!(access_review(&rules).unwrap()["spec"], json!({"namespace": "team"}));
        let selector = envelope("SelfSubjectAccessReview", &bytes_field(2, &bytes_field(1, &bytes_field(9, &bytes_field(1, b"a=b")))));
        assert!(access_review(&selector).unwrap_err().message.contains("field 9 of the protobuf ResourceAttributes"));
        assert_eq!(access_review(&envelope("Pod", b"")).unwrap_err().code, axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[test]
    fn a_namespace_and_delete_options_read_as_json() {
        let label = [bytes_field(1, b"team"), bytes_field(2, b"a")].concat();
        let meta = [bytes_field(1, b"team-a"), bytes_field(11, &label), bytes_field(8, b"\x08\x01")].concat();
        let raw = [bytes_field(1, &meta), bytes_field(2, b""), bytes_field(3, &bytes_field(1, b""))].concat();
        let value = object(&envelope("Namespace", &raw)).unwrap();
        assert_eq!(value, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}));

        let raw = [vec![1 << 3, 0], bytes_field(4, b"Background")].concat();
        let options = delete_options(&envelope("DeleteOptions", &raw)).unwrap();
        assert_eq!(options, json!({"gracePeriodSeconds": 0, "propagationPolicy": "Background"}));
        assert_eq!(object(&envelope("Deployment", b"")).unwrap_err().code, axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[test]
    fn a_config_map_and_a_secret_read_as_json_with_bytes_in_base64() {
        let meta = bytes_field(1, &bytes_field(1, b"app"));
        let entry = |key: &[u8], value: &[u8]| [bytes_field(1, key), bytes_field(2, value)].concat();
        let raw = [meta.clone(), bytes_field(2, &entry(b"a", b"b")), bytes_field(3, &entry(b"bin", b"\x00\x01")), vec![4 << 3, 1]].concat();
        let value = object(&envelope("ConfigMap", &raw)).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "data": {"a": "b"},
                "binaryData": {"bin": "AAE="}, "immutable": true})
        );
        let raw = [meta, bytes_field(2, &entry(b"p", b"q")), bytes_field(3, b"Opaque"), bytes_field(4, &entry(b"s", b"t"))].concat();
        let value = object(&envelope("Secret", &raw)).unwrap();
        assert_eq!(
            value,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "app"}, "data": {"p": "cQ=="}, "type": "Opaque",
                "stringData": {"s": "t"}})
        );
        let unknown_field = [bytes_field(9, b"x")].concat();
        assert_eq!(object(&envelope("Secret", &unknown_field)).unwrap_err().code, axum::http::StatusCode::UNPROCESSABLE_ENTITY);
    }
}
