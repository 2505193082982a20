//! Manifests as users write them: JSON or YAML, one document or several (YAML `---`
//! separators, a JSON array, or JSON objects one after another). Errors carry the line and
//! column of the problem in the text the user gave, and a field the kind does not hold is one.
//! YAML is read by [`crate::yaml`]; [`parse_json`] reads JSON without it, for the browser.

use std::fmt;

use serde_json::Value;

use crate::model::{Kind, Object, ObjectError};
use crate::strict;
use crate::yaml::{self, Data, Node, Step};

/// A manifest that could not be read, with where in the text the problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    /// 1-based number of the document within the text.
    pub document: usize,
    /// 1-based line and column within the whole text, where known.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
    /// Aliases would copy more than [`yaml::ALIAS_BYTES`] (see [`yaml::YamlError::too_large`]).
    pub too_large: bool,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, "line {line}, column {column}: {}", self.message),
            (Some(line), None) => write!(f, "line {line}: {}", self.message),
            _ => write!(f, "document {}: {}", self.document, self.message),
        }
    }
}

impl std::error::Error for ManifestError {}

/// Which syntax a text is written in: JSON when it starts with `{` or `[`, else YAML.
pub fn is_json(text: &str) -> bool {
    text.trim_start().starts_with(['{', '['])
}

/// The documents of a manifest written Kubernetes' way (`apiVersion`, camelCase fields), for
/// the server to read as `/k8s` does (`POST /api/v1/manifests/parse`); `None` when no
/// document names an `apiVersion`, or the text is not YAML (nor JSON, its flow style).
pub fn kubernetes_documents(text: &str) -> Option<Vec<Value>> {
    let documents = yaml::documents(text).ok()?;
    let values: Vec<Value> = documents.into_iter().map(|d| d.root.to_value()).filter(|v| !v.is_null()).collect();
    values.iter().any(|v| v.get("apiVersion").is_some()).then_some(values)
}

/// Reads every object in a manifest. Empty documents are skipped; a text with no object
/// at all is an error, since applying it would do nothing the user meant.
pub fn parse(text: &str) -> Result<Vec<Object>, ManifestError> {
    if !is_json(text) {
        return non_empty(parse_yaml(text)?);
    }
    // JSON is YAML's flow style, so the YAML reader finds positions in the same text (or,
    // failing that, the document's start).
    json_objects(text, |begin| {
        Some(yaml::value_at(text, begin).unwrap_or_else(|_| {
            let line = 1 + text[..begin].matches('\n').count();
            let column = 1 + text[..begin].rsplit('\n').next().map_or(0, |l| l.chars().count());
            Node { line, column, data: Data::Null }
        }))
    })
}

/// Reads a JSON manifest as [`parse`] does, except that a value that does not fit its type
/// is named by its field path alone: positions come from the YAML reader, which the
/// dashboard's bundle leaves out (the server reads its YAML).
pub fn parse_json(text: &str) -> Result<Vec<Object>, ManifestError> {
    json_objects(text, |_| None)
}

fn non_empty(objects: Vec<Object>) -> Result<Vec<Object>, ManifestError> {
    if objects.is_empty() {
        return Err(ManifestError {
            document: 1,
            line: None,
            column: None,
            message: "the manifest holds no object".into(),
            too_large: false,
        });
    }
    Ok(objects)
}

/// The objects of a JSON text; `locate` finds the nodes, with their positions, of the value
/// that starts at a byte, to report a problem. It is called for a problem only: finding a
/// line counts the lines before it, which done for every document of many would be quadratic.
fn json_objects(text: &str, locate: impl Fn(usize) -> Option<Node>) -> Result<Vec<Object>, ManifestError> {
    let mut objects = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut start = 0;
    let mut document = 0;
    while let Some(next) = stream.next() {
        document += 1;
        let end = stream.byte_offset();
        let value = next.map_err(|e| json_error(document, &e))?;
        let begin = start + (text[start..].len() - text[start..].trim_start().len());
        // Where `path` leads in the value read, its line and column.
        let find = |path: &[Step]| locate(begin).map(|n| position(n.find(path)));
        match value {
            Value::Array(items) => {
                // A JSON array of objects: each item counts as a document.
                for (i, item) in items.into_iter().enumerate() {
                    let in_item = |path: &[Step]| find(&[&[Step::Index(i)], path].concat());
                    objects.push(object(item, i + 1, in_item)?);
                }
            }
            value => objects.push(object(value, document, find)?),
        }
        start = end;
    }
    non_empty(objects)
}

fn position(node: &Node) -> (usize, usize) {
    (node.line, node.column)
}

fn parse_yaml(text: &str) -> Result<Vec<Object>, ManifestError> {
    let documents = yaml::documents(text).map_err(|e| ManifestError {
        document: e.document,
        line: Some(e.line),
        column: Some(e.column),
        message: e.message,
        too_large: e.too_large,
    })?;
    let mut objects = Vec::new();
    for document in documents {
        let value = document.root.to_value();
        if !value.is_null() {
            objects.push(object(value, document.number, |path: &[Step]| Some(position(document.root.find(path))))?);
        }
    }
    Ok(objects)
}

/// Builds the typed object a document describes. When it does not fit its kind's type (a
/// string where a number belongs), the error points at the value that does not fit, whose
/// line and column `find` gives from its path in the document, when known.
fn object(value: Value, document: usize, find: impl Fn(&[Step]) -> Option<(usize, usize)>) -> Result<Object, ManifestError> {
    let at = |path: &[Step], message: String| {
        let found = find(path);
        ManifestError { document, line: found.map(|f| f.0), column: found.map(|f| f.1), message, too_large: false }
    };
    let kind = kind_of(&value).map_err(|message| at(&[], message))?;
    let object = match Object::from_value(value.clone()) {
        Ok(object) => object,
        Err(ObjectError::Invalid { message, .. }) => {
            let path = culprit(&value, &message);
            return Err(at(&path, format!("invalid {kind}: {message}")));
        }
        Err(other) => return Err(at(&[], other.to_string())),
    };
    // Refused here, as the server refuses them, since the typed object would drop them silently.
    let unknown = strict::unknown_fields(&value, &object);
    match unknown.first() {
        None => Ok(object),
        Some(first) => {
            let kubernetes = unknown.iter().any(|field| field.path == "apiVersion");
            let hint = if kubernetes { KUBERNETES_HINT } else { UNKNOWN_HINT };
            Err(at(&first.steps, format!("invalid {kind}: {} ({hint})", strict::name_unknown(&unknown))))
        }
    }
}

const UNKNOWN_HINT: &str = "a typo, or at the wrong level?";

/// `apiVersion` is Kubernetes' and no field of Shepherd's own shape.
const KUBERNETES_HINT: &str = "this is a Kubernetes manifest: apply it with kubectl through /k8s, see docs/api.md";

fn kind_of(value: &Value) -> Result<Kind, String> {
    match value.get("kind") {
        Some(Value::String(kind)) => match Kind::ALL.iter().find(|k| k.as_str() == kind) {
            Some(kind) => Ok(*kind),
            None => Err(ObjectError::UnknownKind(kind.clone()).to_string()),
        },
        Some(_) => Err("\"kind\" must be a string such as \"Pod\"".into()),
        None if value.is_object() => Err(ObjectError::MissingKind.to_string()),
        None => Err("a manifest document must be an object with a \"kind\"".into()),
    }
}

/// Where in `value` the decoding error `message` comes from. Decoding reads a mapping's
/// entries and a sequence's items in order and stops at the first error, so the culprit
/// is found by keeping only the first k children of a node: the smallest k that still
/// fails with the same message means child k - 1 holds it (and the search goes on inside
/// it); k = 0 means the node itself is wrong. The typed decoding is the very one used for
/// the API's answers, so the browser bundle holds one decoder per type, not one per syntax.
fn culprit(value: &Value, message: &str) -> Vec<Step> {
    let fails_alike =
        |candidate: Value| matches!(Object::from_value(candidate), Err(ObjectError::Invalid { message: m, .. }) if m == message);
    let mut current = value.clone();
    let mut path = Vec::new();
    loop {
        let len = match at_path(&mut current, &path) {
            Some(Value::Object(map)) => map.len(),
            Some(Value::Array(items)) => items.len(),
            _ => 0,
        };
        let keep = (0..len)
            .find(|&keep| {
                let mut candidate = current.clone();
                truncate(&mut candidate, &path, keep);
                fails_alike(candidate)
            })
            .unwrap_or(len);
        if keep == 0 {
            return path;
        }
        truncate(&mut current, &path, keep);
        let step = match at_path(&mut current, &path) {
            Some(Value::Object(map)) => map.keys().nth(keep - 1).map(|k| Step::Key(k.clone())),
            _ => Some(Step::Index(keep - 1)),
        };
        path.extend(step);
    }
}

fn at_path<'v>(value: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |value, step| match step {
        Step::Key(key) => value.get_mut(key.as_str()),
        Step::Index(i) => value.get_mut(*i),
    })
}

/// Keeps the first `keep` children of the node at `path`; the document's `kind` always
/// stays, so the object still says what it is.
fn truncate(value: &mut Value, path: &[Step], keep: usize) {
    match at_path(value, path) {
        Some(Value::Object(map)) => {
            let kind = if path.is_empty() { map.get("kind").cloned() } else { None };
            let all = std::mem::take(map);
            for (key, value) in all.into_iter().take(keep) {
                map.insert(key, value);
            }
            if let Some(kind) = kind {
                map.insert("kind".into(), kind);
            }
        }
        Some(Value::Array(items)) => items.truncate(keep),
        _ => {}
    }
}

fn json_error(document: usize, e: &serde_json::Error) -> ManifestError {
    let known = e.line() > 0;
    ManifestError {
        document,
        line: known.then(|| e.line()),
        column: known.then_some(e.column()),
        message: strip_position(&e.to_string()),
        too_large: false,
    }
}

/// serde's messages say "at line X column Y"; the error carries those as fields, so the
/// phrase is cut out wherever it stands.
fn strip_position(message: &str) -> String {
    let Some(at) = message.find(" at line ") else { return message.to_string() };
    let rest = &message[at + " at line ".len()..];
    let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let line_len = digits(rest);
    let after_line = &rest[line_len..];
    let tail = match after_line.strip_prefix(" column ") {
        Some(column) => &column[digits(column)..],
        None => after_line,
    };
    format!("{}{}", &message[..at], tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_with_several_documents() {
        let text = "kind: Pod\nmetadata:\n  name: a\nspec:\n  containers:\n  - name: c\n    image: minimal\n---\n# comment only\n---\nkind: Service\nmetadata:\n  name: s\n";
        let objects = parse(text).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0].kind(), Kind::Pod);
        assert_eq!(objects[1].metadata().name, "s");
    }

    #[test]
    fn json_objects_one_after_another_and_arrays() {
        let text = r#"{"kind":"Pod","metadata":{"name":"a"}}
{"kind":"Namespace","metadata":{"name":"team"}}"#;
        assert_eq!(parse(text).unwrap().len(), 2);
        let array = r#"[{"kind":"Pod","metadata":{"name":"a"}},{"kind":"Service","metadata":{"name":"b"}}]"#;
        assert_eq!(parse(array).unwrap().len(), 2);
    }

    #[test]
    fn yaml_quantities_are_accepted() {
        let text = "kind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    image: minimal\n    resources: {memory: 64Mi, cpu: 250m}\n";
        let Object::Pod(pod) = &parse(text).unwrap()[0] else { panic!("not a pod") };
        assert_eq!(pod.spec.containers[0].resources.memory, 64 * 1024 * 1024);
        assert_eq!(pod.spec.containers[0].resources.cpu, 250);
    }

    #[test]
    fn many_json_objects_one_after_another_are_read_in_one_pass() {
        let text = r#"{"kind":"Namespace"}"#.repeat(20_000);
        assert_eq!(parse(&text).unwrap().len(), 20_000);
        // The positions' reader, which reads from the text's start, runs for a problem only.
        let calls = std::cell::Cell::new(0);
        let counting = |_| {
            calls.set(calls.get() + 1);
            None
        };
        assert_eq!(json_objects(&text, counting).unwrap().len(), 20_000);
        assert_eq!(calls.get(), 0);
        let bad = format!(r#"{text}[{{"kind":"Namespace"}},{{"kind":"Pod","metadata":{{"name":3}}}}]"#);
        let err = json_objects(&bad, counting).unwrap_err();
        assert_eq!((err.document, calls.get()), (2, 1), "{err}");
        assert_eq!(parse(&bad).unwrap_err().column, Some(text.len() + 56), "the `3`");
    }

    #[test]
    fn json_syntax_errors_have_line_and_column() {
        let err = parse("{\n  \"kind\": \"Pod\",\n  \"metadata\": {\"name\": \"a\",}\n}").unwrap_err();
        assert_eq!(err.line, Some(3));
        assert!(err.column.is_some());
        assert!(err.to_string().starts_with("line 3, column"), "{err}");
    }

    #[test]
    fn type_errors_point_at_the_field() {
        let text = "{\"kind\": \"Pod\",\n \"metadata\": {\"name\": \"a\"},\n \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"m\",\n   \"resources\": {\"memory\": \"lots\"}}]}}";
        let err = parse(text).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert!(err.message.contains("invalid memory quantity"), "{err}");
        assert!(err.message.starts_with("invalid Pod"), "{err}");
    }

    #[test]
    fn yaml_errors_count_lines_across_documents() {
        let text = "kind: Namespace\nmetadata: {name: a}\n---\nkind: Pod\nmetadata:\n  name: b\nspec:\n  containers: 3\n";
        let err = parse(text).unwrap_err();
        assert_eq!(err.document, 2);
        assert_eq!(err.line, Some(8), "{err}");
        let err = parse("kind: Pod\nmetadata: [unclosed\n").unwrap_err();
        assert!(err.line.is_some(), "{err}");
        let position = format!("at line {} column {}", err.line.unwrap(), err.column.unwrap());
        assert!(!err.message.contains(&position), "the position is said twice: {err}");
    }

    #[test]
    fn unknown_fields_are_refused_by_path_in_either_syntax() {
        let json =
            r#"{"kind":"Pod","metadata":{"name":"typo1"},"spec":{"containers":[{"name":"c","image":"minimal","comand":["sleep","1"]}]}}"#;
        let err = parse(json).unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1, column 104: invalid Pod: unknown field \"spec.containers[0].comand\" (a typo, or at the wrong level?)"
        );
        let yaml = "kind: Namespace\nmetadata: {name: a}\n---\nkind: Pod\nmetadata:\n  name: b\n  colour: red\nspec:\n  containers:\n  - name: c\n    image: minimal\n    comand: [sleep, \"1\"]\n";
        let err = parse(yaml).unwrap_err();
        assert_eq!((err.document, err.line), (2, Some(7)), "{err}");
        assert!(err.message.contains(r#"unknown field "metadata.colour", unknown field "spec.containers[0].comand""#), "{err}");
    }

    #[test]
    fn parse_json_names_fields_without_the_yaml_reader() {
        let text = "{\"kind\": \"Pod\",\n \"metadata\": {\"name\": \"a\", \"colour\": \"red\"}}";
        let err = parse_json(text).unwrap_err();
        assert_eq!((err.line, err.column), (None, None), "{err}");
        assert_eq!(err.to_string(), format!("document 1: {}", parse(text).unwrap_err().message));
        assert!(err.message.contains(r#"unknown field "metadata.colour""#), "{err}");
        assert_eq!(parse_json("{\n  oops\n}").unwrap_err().line, Some(2), "syntax errors keep their line");
    }

    #[test]
    fn a_kubernetes_manifest_is_sent_to_kubectl() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    image: minimal\n    ports:\n    - containerPort: 8080\n";
        let err = parse(text).unwrap_err();
        assert!(err.message.contains(r#"unknown field "spec.containers[0].ports[0].containerPort""#), "{err}");
        assert!(err.message.contains("apply it with kubectl"), "{err}");
    }

    #[test]
    fn kubernetes_documents_are_told_apart() {
        let kubernetes = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: apps/v1\nkind: Deployment\n";
        let documents = kubernetes_documents(kubernetes).expect("a Kubernetes manifest");
        assert_eq!(documents.len(), 2, "the empty document is left out");
        assert_eq!(documents[1]["kind"], "Deployment");
        assert_eq!(kubernetes_documents("kind: ConfigMap\nmetadata: {name: a}\n"), None);
        assert_eq!(kubernetes_documents("{\"kind\": \"Pod\"} {\"kind\": \"Pod\"}"), None, "not YAML: read as Shepherd's own");
    }

    #[test]
    fn unknown_and_missing_kinds_are_errors() {
        let err = parse(r#"{"kind":"Pody","metadata":{"name":"a"}}"#).unwrap_err();
        assert!(err.message.contains("unknown kind \"Pody\""), "{err}");
        let err = parse("metadata:\n  name: a\n").unwrap_err();
        assert!(err.message.contains("no \"kind\""), "{err}");
        let err = parse("\n# nothing\n").unwrap_err();
        assert!(err.message.contains("holds no object"), "{err}");
    }
}
