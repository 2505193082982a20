//! Label selectors: the reference's equality maps and Kubernetes' set-based expressions,
//! their JSON forms, and the string form of `-l` flags and `?label_selector=`
//! (`app=web,tier!=db,env in (prod,staging),!legacy`).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::model::meta::Labels;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One set-based expression: `env in (prod,staging)`, `!legacy`, ….
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl Requirement {
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// Selects objects by their labels. Every `match_labels` pair and every expression must
/// hold; the empty selector selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    pub match_labels: Labels,
    pub match_expressions: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid label selector {selector:?} at character {position}: {message}")]
pub struct SelectorError {
    pub selector: String,
    /// 1-based character position where the problem starts.
    pub position: usize,
    pub message: String,
}

impl LabelSelector {
    pub fn from_labels(labels: Labels) -> Self {
        LabelSelector { match_labels: labels, match_expressions: Vec::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v)) && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Parses the string form: comma-separated terms, each one of `key=value`,
    /// `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key` or `!key`.
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        Parser { text, chars: text.char_indices().collect(), pos: 0 }.parse()
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut terms: Vec<String> = self.match_labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        for r in &self.match_expressions {
            terms.push(match r.operator {
                Operator::In => format!("{} in ({})", r.key, r.values.join(",")),
                Operator::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
                Operator::Exists => r.key.clone(),
                Operator::DoesNotExist => format!("!{}", r.key),
            });
        }
        f.write_str(&terms.join(","))
    }
}

struct Parser<'a> {
    text: &'a str,
    chars: Vec<(usize, char)>,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> SelectorError {
        SelectorError { selector: self.text.to_string(), position: self.pos + 1, message: message.into() }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).map(|&(_, c)| c)
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, expected: &str) -> bool {
        let matches = expected.chars().enumerate().all(|(i, c)| self.chars.get(self.pos + i).map(|&(_, x)| x) == Some(c));
        if matches {
            self.pos += expected.chars().count();
        }
        matches
    }

    /// A label key or value: letters, digits, `-`, `_`, `.` and `/` (for prefixed keys).
    fn word(&mut self) -> String {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')) {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().map(|&(_, c)| c).collect()
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        let key = self.word();
        if key.is_empty() {
            return Err(match self.peek() {
                Some(c) => self.error(format!("expected a label key, found {c:?}")),
                None => self.error("expected a label key, found the end"),
            });
        }
        Ok(key)
    }

    fn parse(mut self) -> Result<LabelSelector, SelectorError> {
        let mut selector = LabelSelector::default();
        self.skip_spaces();
        if self.peek().is_none() {
            return Ok(selector);
        }
        loop {
            self.term(&mut selector)?;
            self.skip_spaces();
            match self.peek() {
                None => return Ok(selector),
                Some(',') => {
                    self.pos += 1;
                    self.skip_spaces();
                }
                Some(c) => return Err(self.error(format!("expected ',' between terms, found {c:?}"))),
            }
        }
    }

    fn term(&mut self, selector: &mut LabelSelector) -> Result<(), SelectorError> {
        if self.eat("!") {
            self.skip_spaces();
            let key = self.key()?;
            selector.match_expressions.push(Requirement { key, operator: Operator::DoesNotExist, values: vec![] });
            return Ok(());
        }
        let key = self.key()?;
        self.skip_spaces();
        if self.eat("!=") {
            self.skip_spaces();
            let value = self.word();
            selector.match_expressions.push(Requirement { key, operator: Operator::NotIn, values: vec![value] });
        } else if self.eat("==") || self.eat("=") {
            self.skip_spaces();
            let value = self.word();
            if let Some(previous) = selector.match_labels.get(&key).filter(|v| **v != value) {
                return Err(self.error(format!("{key} cannot equal both {previous:?} and {value:?}")));
            }
            selector.match_labels.insert(key, value);
        } else if self.keyword("notin") {
            let values = self.value_set()?;
            selector.match_expressions.push(Requirement { key, operator: Operator::NotIn, values });
        } else if self.keyword("in") {
            let values = self.value_set()?;
            selector.match_expressions.push(Requirement { key, operator: Operator::In, values });
        } else if matches!(self.peek(), None | Some(',')) {
            selector.match_expressions.push(Requirement { key, operator: Operator::Exists, values: vec![] });
        } else {
            return Err(self.error(format!("expected =, ==, !=, in or notin after {key:?}")));
        }
        Ok(())
    }

    /// `in`/`notin` followed by a space or `(`, so that a key named `index` is not mistaken.
    fn keyword(&mut self, word: &str) -> bool {
        let start = self.pos;
        if self.eat(word) && matches!(self.peek(), Some(c) if c == '(' || c.is_whitespace()) {
            return true;
        }
        self.pos = start;
        false
    }

    fn value_set(&mut self) -> Result<Vec<String>, SelectorError> {
        self.skip_spaces();
        if !self.eat("(") {
            return Err(self.error("expected '(' to open the set of values"));
        }
        let mut values = Vec::new();
        loop {
            self.skip_spaces();
            let value = self.word();
            if value.is_empty() {
                return Err(self.error("expected a value in the set"));
            }
            values.push(value);
            self.skip_spaces();
            if self.eat(")") {
                return Ok(values);
            }
            if !self.eat(",") {
                return Err(match self.peek() {
                    Some(c) => self.error(format!("expected ',' or ')' in the set of values, found {c:?}")),
                    None => self.error("the set of values is not closed with ')'"),
                });
            }
        }
    }
}

/// The structured JSON form: `{"match_labels": {...}, "match_expressions": [...]}`.
#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(crate) struct StructuredSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    match_labels: Labels,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    match_expressions: Vec<Requirement>,
}

impl Serialize for LabelSelector {
    /// Written as the reference's plain map when it has no expressions, so a reference
    /// manifest round-trips unchanged.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.match_expressions.is_empty() {
            self.match_labels.serialize(s)
        } else {
            StructuredSelector { match_labels: self.match_labels.clone(), match_expressions: self.match_expressions.clone() }.serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for LabelSelector {
    /// Tries the structured form, then the plain map, as an untagged enum would. The value is
    /// held as an owned `serde_json::Value`, read by the decoders every model type already
    /// has, rather than serde's private `Content`, whose code the bundle would carry for this
    /// one type.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let form = || {
            serde::de::Error::custom(
                "a selector is a map of labels ({\"app\": \"web\"}) or {\"match_labels\": {...}, \"match_expressions\": [...]}",
            )
        };
        let value = serde_json::Value::deserialize(d).map_err(|_| form())?;
        if let Ok(s) = serde_json::from_value::<StructuredSelector>(value.clone()) {
            return Ok(LabelSelector { match_labels: s.match_labels, match_expressions: s.match_expressions });
        }
        let labels: Labels = serde_json::from_value(value).map_err(|_| form())?;
        Ok(LabelSelector::from_labels(labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_every_form_of_term() {
        let s = LabelSelector::parse("app=web,tier!=db,env in (prod, staging),!legacy,track,release notin (canary)").unwrap();
        assert_eq!(s.match_labels, labels(&[("app", "web")]));
        assert_eq!(s.match_expressions.len(), 5);
        assert_eq!(s.to_string(), "app=web,tier notin (db),env in (prod,staging),!legacy,track,release notin (canary)");
        assert!(s.matches(&labels(&[("app", "web"), ("env", "prod"), ("track", "a")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod"), ("track", "a"), ("legacy", "1")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "dev"), ("track", "a")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod"), ("track", "a"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod")])));
    }

    #[test]
    fn double_equals_and_spaces_are_accepted() {
        let s = LabelSelector::parse("  app == web , tier = fe ").unwrap();
        assert_eq!(s.match_labels, labels(&[("app", "web"), ("tier", "fe")]));
    }

    #[test]
    fn a_key_starting_with_in_is_a_key() {
        let s = LabelSelector::parse("index=1,inside").unwrap();
        assert_eq!(s.match_labels, labels(&[("index", "1")]));
        assert_eq!(s.match_expressions[0].key, "inside");
    }

    #[test]
    fn empty_selector_selects_everything() {
        let s = LabelSelector::parse("").unwrap();
        assert!(s.is_empty());
        assert!(s.matches(&labels(&[("any", "thing")])));
        assert!(s.matches(&Labels::new()));
    }

    #[test]
    fn bad_syntax_names_the_position() {
        let err = LabelSelector::parse("app=web,,tier=db").unwrap_err();
        assert_eq!(err.position, 9);
        assert!(err.to_string().contains("expected a label key"), "{err}");
        let err = LabelSelector::parse("env in (prod").unwrap_err();
        assert!(err.message.contains("not closed"), "{err}");
        let err = LabelSelector::parse("env in prod").unwrap_err();
        assert!(err.message.contains("'('"), "{err}");
        let err = LabelSelector::parse("app>3").unwrap_err();
        assert!(err.message.contains("expected =, ==, !=, in or notin"), "{err}");
        let err = LabelSelector::parse("app=a,app=b").unwrap_err();
        assert!(err.message.contains("cannot equal both"), "{err}");
    }

    #[test]
    fn json_accepts_the_reference_map_and_the_structured_form() {
        let plain: LabelSelector = serde_json::from_str(r#"{"app":"web"}"#).unwrap();
        assert_eq!(plain.match_labels, labels(&[("app", "web")]));
        assert_eq!(serde_json::to_string(&plain).unwrap(), r#"{"app":"web"}"#);

        let structured: LabelSelector =
            serde_json::from_str(r#"{"match_labels":{"app":"web"},"match_expressions":[{"key":"env","operator":"In","values":["prod"]}]}"#)
                .unwrap();
        assert_eq!(structured.match_expressions[0].operator, Operator::In);
        let again: LabelSelector = serde_json::from_str(&serde_json::to_string(&structured).unwrap()).unwrap();
        assert_eq!(again, structured);

        let err = serde_json::from_str::<LabelSelector>(r#"{"app": 3}"#).unwrap_err();
        assert!(err.to_string().contains("a selector is a map of labels"), "{err}");
        let err = serde_json::from_str::<LabelSelector>(r#"{"app": "web""#).unwrap_err();
        assert!(err.to_string().contains("a selector is a map of labels"), "{err}");

        // Not the structured form after all: a plain map whose key is spelled like a field,
        // read as a label, as the untagged enum this replaced read it.
        let odd: LabelSelector = serde_json::from_str(r#"{"match_labels":"x"}"#).unwrap();
        assert_eq!(odd.match_labels, labels(&[("match_labels", "x")]));
    }
}
