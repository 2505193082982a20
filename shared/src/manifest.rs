//! Manifests as users write them: JSON or YAML, one document or several (YAML `---`
//! separators, a JSON array, or JSON objects one after another). Errors carry the line and
//! column of the problem in the text the user gave.

use std::fmt;

use serde::de::DeserializeOwned;

use crate::model::{Deployment, Event, Kind, Namespace, Node, Object, ObjectError, Pod, Service};

/// A manifest that could not be read, with where in the text the problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    /// 1-based number of the document within the text.
    pub document: usize,
    /// 1-based line and column within the whole text, where known.
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
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

/// Reads every object in a manifest. Empty documents are skipped; a text with no object
/// at all is an error, since applying it would do nothing the user meant.
pub fn parse(text: &str) -> Result<Vec<Object>, ManifestError> {
    let objects = if is_json(text) { parse_json(text)? } else { parse_yaml(text)? };
    if objects.is_empty() {
        return Err(ManifestError { document: 1, line: None, column: None, message: "the manifest holds no object".into() });
    }
    Ok(objects)
}

fn parse_json(text: &str) -> Result<Vec<Object>, ManifestError> {
    let mut objects = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    let mut start = 0;
    let mut document = 0;
    while let Some(next) = stream.next() {
        document += 1;
        let end = stream.byte_offset();
        let value = next.map_err(|e| json_error(document, 0, &e))?;
        let source = &text[start..end];
        match value {
            serde_json::Value::Array(items) => {
                // A JSON array of objects: report errors by item, at the array's line.
                let line = line_of(text, start + leading_whitespace(source));
                for (i, item) in items.into_iter().enumerate() {
                    let kind =
                        kind_of(&item).map_err(|message| ManifestError { document: i + 1, line: Some(line), column: None, message })?;
                    objects.push(from_value(kind, item).map_err(|message| ManifestError {
                        document: i + 1,
                        line: Some(line),
                        column: None,
                        message,
                    })?);
                }
            }
            value => {
                let kind = kind_of(&value).map_err(|message| ManifestError {
                    document,
                    line: Some(line_of(text, start + leading_whitespace(source))),
                    column: None,
                    message,
                })?;
                objects.push(typed(kind, Syntax::Json, source, document, line_of(text, start) - 1)?);
            }
        }
        start = end;
    }
    Ok(objects)
}

fn parse_yaml(text: &str) -> Result<Vec<Object>, ManifestError> {
    let mut objects = Vec::new();
    for (index, (line_offset, source)) in yaml_documents(text).into_iter().enumerate() {
        let document = index + 1;
        let value: serde_json::Value = serde_yaml::from_str(source).map_err(|e| yaml_error(document, line_offset, &e))?;
        if value.is_null() {
            continue;
        }
        let kind = kind_of(&value).map_err(|message| ManifestError {
            document,
            line: Some(line_offset + first_content_line(source)),
            column: None,
            message,
        })?;
        objects.push(typed(kind, Syntax::Yaml, source, document, line_offset)?);
    }
    Ok(objects)
}

/// Splits YAML at `---` lines, keeping each document's starting line (0-based offset).
fn yaml_documents(text: &str) -> Vec<(usize, &str)> {
    let mut documents = Vec::new();
    let mut start_byte = 0;
    let mut start_line = 0;
    let mut byte = 0;
    for (number, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed.starts_with("--- ") {
            documents.push((start_line, &text[start_byte..byte]));
            start_byte = byte + line.len();
            start_line = number + 1;
        }
        byte += line.len();
    }
    documents.push((start_line, &text[start_byte..]));
    documents
}

fn kind_of(value: &serde_json::Value) -> Result<Kind, String> {
    match value.get("kind") {
        Some(serde_json::Value::String(kind)) => match Kind::ALL.iter().find(|k| k.as_str() == kind) {
            Some(kind) => Ok(*kind),
            None => Err(ObjectError::UnknownKind(kind.clone()).to_string()),
        },
        Some(_) => Err("\"kind\" must be a string such as \"Pod\"".into()),
        None if value.is_object() => Err(ObjectError::MissingKind.to_string()),
        None => Err("a manifest document must be an object with a \"kind\"".into()),
    }
}

fn from_value(kind: Kind, value: serde_json::Value) -> Result<Object, String> {
    Object::from_value(value).map_err(|e| match e {
        ObjectError::Invalid { message, .. } => format!("invalid {kind}: {message}"),
        other => other.to_string(),
    })
}

#[derive(Clone, Copy)]
enum Syntax {
    Json,
    Yaml,
}

/// Deserializes one document into its kind's type, so that type errors (a string where a
/// number belongs) point at the exact line and column.
fn typed(kind: Kind, syntax: Syntax, source: &str, document: usize, line_offset: usize) -> Result<Object, ManifestError> {
    fn read<T: DeserializeOwned>(syntax: Syntax, source: &str, document: usize, line_offset: usize) -> Result<T, ManifestError> {
        match syntax {
            Syntax::Json => serde_json::from_str(source).map_err(|e| json_error(document, line_offset, &e)),
            Syntax::Yaml => serde_yaml::from_str(source).map_err(|e| yaml_error(document, line_offset, &e)),
        }
    }
    let result = match kind {
        Kind::Pod => read::<Pod>(syntax, source, document, line_offset).map(Object::Pod),
        Kind::Deployment => read::<Deployment>(syntax, source, document, line_offset).map(Object::Deployment),
        Kind::Service => read::<Service>(syntax, source, document, line_offset).map(Object::Service),
        Kind::Node => read::<Node>(syntax, source, document, line_offset).map(Object::Node),
        Kind::Event => read::<Event>(syntax, source, document, line_offset).map(Object::Event),
        Kind::Namespace => read::<Namespace>(syntax, source, document, line_offset).map(Object::Namespace),
    };
    result.map_err(|mut e| {
        e.message = format!("invalid {kind}: {}", e.message);
        e
    })
}

fn json_error(document: usize, line_offset: usize, e: &serde_json::Error) -> ManifestError {
    let known = e.line() > 0;
    ManifestError {
        document,
        line: known.then(|| line_offset + e.line()),
        column: known.then_some(e.column()),
        message: strip_position(&e.to_string()),
    }
}

fn yaml_error(document: usize, line_offset: usize, e: &serde_yaml::Error) -> ManifestError {
    let location = e.location();
    ManifestError {
        document,
        line: location.as_ref().map(|l| line_offset + l.line()),
        column: location.as_ref().map(|l| l.column()),
        message: strip_position(&e.to_string()),
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

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte.min(text.len())].matches('\n').count() + 1
}

fn leading_whitespace(text: &str) -> usize {
    text.len() - text.trim_start().len()
}

fn first_content_line(source: &str) -> usize {
    source.lines().position(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#')).unwrap_or(0) + 1
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
    fn unknown_and_missing_kinds_are_errors() {
        let err = parse(r#"{"kind":"Pody","metadata":{"name":"a"}}"#).unwrap_err();
        assert!(err.message.contains("unknown kind \"Pody\""), "{err}");
        let err = parse("metadata:\n  name: a\n").unwrap_err();
        assert!(err.message.contains("no \"kind\""), "{err}");
        let err = parse("\n# nothing\n").unwrap_err();
        assert!(err.message.contains("holds no object"), "{err}");
    }
}
