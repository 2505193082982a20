//! The simulator's form fields read into values: labels, taints, tolerations, counts and
//! quantities, each with an error that says what to type instead.

use shared::model::{Labels, Taint, Toleration};
use shared::quantity::{parse_cpu, parse_memory};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A label or taint, in `shared::parse`'s words.
    #[error("{0}")]
    Parse(String),
    #[error("toleration {0:?} is not key=value:Effect, key:Effect or key (Exists)")]
    Toleration(String),
    #[error("{0}")]
    Quantity(String),
    #[error("{what} must be a whole number of at least {min}, not {text:?}")]
    Count { what: &'static str, min: i64, text: String },
}

/// `a=b, c=d` (empty = no labels), by the one label grammar in `shared::parse`.
pub fn parse_labels(text: &str) -> Result<Labels, InputError> {
    shared::parse::labels(text).map_err(|e| InputError::Parse(e.to_string()))
}

/// `gpu=true:NoSchedule, zone=x:NoExecute`, by the one taint grammar in `shared::parse`.
pub fn parse_taints(text: &str) -> Result<Vec<Taint>, InputError> {
    shared::parse::taints(text).map_err(|e| InputError::Parse(e.to_string()))
}

/// `gpu=true:NoSchedule` (Equal), `gpu:NoSchedule` or `gpu` (Exists).
pub fn parse_tolerations(text: &str) -> Result<Vec<Toleration>, InputError> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|item| {
            let (pair, effect) = match item.rsplit_once(':') {
                Some((pair, effect)) if shared::model::TAINT_EFFECTS.contains(&effect.trim()) => (pair, effect.trim()),
                Some(_) => return Err(InputError::Toleration(item.to_string())),
                None => (item, ""),
            };
            let toleration = match pair.split_once('=') {
                Some((key, value)) => {
                    Toleration { key: key.trim().into(), operator: "Equal".into(), value: value.trim().into(), effect: effect.into() }
                }
                None => Toleration { key: pair.trim().into(), operator: "Exists".into(), value: String::new(), effect: effect.into() },
            };
            if toleration.key.is_empty() { Err(InputError::Toleration(item.to_string())) } else { Ok(toleration) }
        })
        .collect()
}

pub fn parse_count(text: &str, what: &'static str, min: i64) -> Result<i64, InputError> {
    match text.trim().parse::<i64>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(InputError::Count { what, min, text: text.to_string() }),
    }
}

pub fn parse_cpu_input(text: &str) -> Result<i64, InputError> {
    parse_cpu(text).map_err(InputError::Quantity)
}

pub fn parse_memory_input(text: &str) -> Result<i64, InputError> {
    parse_memory(text).map_err(InputError::Quantity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_form_inputs() {
        assert_eq!(parse_labels(" zone=a , gpu=true ").unwrap().len(), 2);
        assert_eq!(parse_labels("").unwrap(), Labels::new());
        assert_eq!(parse_labels("oops"), Err(InputError::Parse("invalid label \"oops\": write key=value".into())));
        let taints = parse_taints("gpu=true:NoSchedule").unwrap();
        assert_eq!((taints[0].key.as_str(), taints[0].value.as_str(), taints[0].effect.as_str()), ("gpu", "true", "NoSchedule"));
        assert!(parse_taints("gpu=true").is_err());
        assert!(parse_taints("gpu=true:Sometimes").is_err());
        let tolerations = parse_tolerations("gpu=true:NoSchedule, dedicated").unwrap();
        assert_eq!(tolerations[0].operator, "Equal");
        assert_eq!((tolerations[1].key.as_str(), tolerations[1].operator.as_str()), ("dedicated", "Exists"));
        assert!(parse_tolerations("gpu:Whenever").is_err());
        assert_eq!(parse_count("3", "count", 1), Ok(3));
        assert!(parse_count("0", "count", 1).unwrap_err().to_string().contains("at least 1"));
        assert_eq!(parse_cpu_input("250m"), Ok(250));
        assert_eq!(parse_memory_input("64Mi"), Ok(64 << 20));
        assert!(parse_memory_input("lots").is_err());
    }
}
