//! What users type on a command line or in a form, read in one place each: durations such as
//! `500ms`, `1m30s` or `45`, labels `key=value` and taints `key=value:Effect`, alone or as
//! comma-separated lists. Integer arithmetic throughout: a number too big is an error, not a
//! panic.

use std::time::Duration;

use crate::model::{Labels, TAINT_EFFECTS, Taint};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("invalid duration {0:?}: use a number with a unit, e.g. 500ms, 30s, 2m or 1h")]
    Duration(String),
    #[error("duration {0:?} is too long: at most 100 years")]
    DurationTooLong(String),
    #[error("invalid label {0:?}: write key=value")]
    Label(String),
    #[error("invalid taint {0:?}: write key=value:Effect or key:Effect, Effect one of NoSchedule, PreferNoSchedule, NoExecute")]
    Taint(String),
    #[error("invalid boolean {0:?}: use true or false (or 1 or 0)")]
    Flag(String),
    #[error("invalid resource version {0:?}: use a revision a list or a watch returned, a whole number of 0 or more")]
    Revision(String),
}

/// The longest duration accepted: 100 years.
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boolean query parameter, read as Kubernetes reads one (Go's `strconv.ParseBool`): `1`,
/// `t`, `T`, `true`, `TRUE`, `True` and their opposites. Present but empty is false.
pub fn flag(text: &str) -> Result<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "" | "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(Error::Flag(other.to_string())),
    }
}

/// An optional query flag for serde, read with [`flag`]: `#[serde(deserialize_with = …)]`.
pub fn deserialize_flag<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    let text: Option<String> = serde::Deserialize::deserialize(deserializer)?;
    text.map(|t| flag(&t).map_err(serde::de::Error::custom)).transpose()
}

/// A resource version in a query: the store's revision, a whole number.
pub fn revision(text: &str) -> Result<u64> {
    text.parse().map_err(|_| Error::Revision(text.to_string()))
}

/// An optional resource version for serde, read with [`revision`]; empty is unset, as
/// Kubernetes reads `resourceVersion=`.
pub fn deserialize_revision<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let text: Option<String> = serde::Deserialize::deserialize(deserializer)?;
    text.filter(|t| !t.is_empty()).map(|t| revision(&t).map_err(serde::de::Error::custom)).transpose()
}

/// Reads `500ms`, `30s`, `2m`, `1h`, `1m30s`, `1.5s`, or a bare number of seconds.
pub fn duration(text: &str) -> Result<Duration> {
    let bad = || Error::Duration(text.to_string());
    let too_long = || Error::DurationTooLong(text.to_string());
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(bad());
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return trimmed.parse::<u64>().ok().map(Duration::from_secs).filter(|d| *d <= MAX_DURATION).ok_or_else(too_long);
    }
    let mut total: u128 = 0;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let (number, tail) = rest.split_at(number_len);
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        total = total.checked_add(scaled(number, nanos_per_unit).ok_or_else(bad)?.ok_or_else(too_long)?).ok_or_else(too_long)?;
        rest = tail;
    }
    let seconds = u64::try_from(total / 1_000_000_000).map_err(|_| too_long())?;
    let duration = Duration::new(seconds, (total % 1_000_000_000) as u32);
    // A deadline of now plus the duration must exist on every clock.
    if duration > MAX_DURATION {
        return Err(too_long());
    }
    Ok(duration)
}

/// `number × factor` for a decimal such as `1.25`, truncated to a whole number: `None` when it
/// is not a decimal, `Some(None)` when it is too big.
fn scaled(number: &str, factor: u128) -> Option<Option<u128>> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    let digits = |part: &str| part.bytes().try_fold(0u128, |n, b| n.checked_mul(10)?.checked_add(u128::from(b - b'0')));
    let Some(whole) = digits(whole) else { return Some(None) };
    let Some(whole) = whole.checked_mul(factor) else { return Some(None) };
    // Past 20 digits a fraction adds less than a nanosecond, even to hours.
    let fraction = &fraction[..fraction.len().min(20)];
    let part = digits(fraction).and_then(|f| f.checked_mul(factor)).map(|f| f / 10u128.pow(fraction.len() as u32));
    Some(part.and_then(|part| whole.checked_add(part)))
}

/// Reads `key=value` (an empty value is fine, an empty key is not).
pub fn label(text: &str) -> Result<(String, String)> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim().to_string(), value.trim().to_string())),
        _ => Err(Error::Label(text.to_string())),
    }
}

/// Reads `zone=a, gpu=true`; an empty text is no labels.
pub fn labels(text: &str) -> Result<Labels> {
    let mut labels = Labels::new();
    for item in items(text) {
        let (key, value) = label(item)?;
        labels.insert(key, value);
    }
    Ok(labels)
}

/// Reads `key=value:Effect` or `key:Effect`.
pub fn taint(text: &str) -> Result<Taint> {
    let bad = || Error::Taint(text.to_string());
    let (pair, effect) = text.rsplit_once(':').ok_or_else(bad)?;
    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
    let (key, effect) = (key.trim(), effect.trim());
    if key.is_empty() || !TAINT_EFFECTS.contains(&effect) {
        return Err(bad());
    }
    Ok(Taint { key: key.to_string(), value: value.trim().to_string(), effect: effect.to_string() })
}

/// Reads `gpu=true:NoSchedule, dedicated:NoExecute`; an empty text is no taints.
pub fn taints(text: &str) -> Result<Vec<Taint>> {
    items(text).map(taint).collect()
}

fn items(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|item| !item.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_as_kubernetes_reads_them() {
        for yes in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(flag(yes), Ok(true), "{yes}");
        }
        for no in ["", "0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(flag(no), Ok(false), "{no}");
        }
        for junk in ["yes", "2", "tRuE", " true"] {
            assert_eq!(flag(junk), Err(Error::Flag(junk.to_string())), "{junk}");
        }
        #[derive(serde::Deserialize)]
        struct Query {
            #[serde(default, deserialize_with = "deserialize_flag")]
            watch: Option<bool>,
        }
        let read = |text: &str| serde_json::from_str::<Query>(text).map(|q| q.watch).map_err(|e| e.to_string());
        assert_eq!(read(r#"{"watch":"1"}"#), Ok(Some(true)));
        assert_eq!(read("{}"), Ok(None));
        assert!(read(r#"{"watch":"yes"}"#).unwrap_err().contains("invalid boolean \"yes\""));
    }

    #[test]
    fn a_resource_version_is_a_whole_number() {
        assert_eq!(revision("0"), Ok(0));
        assert_eq!(revision("42"), Ok(42));
        for junk in ["-1", "", "1.5", "abc", "99999999999999999999999"] {
            assert_eq!(revision(junk), Err(Error::Revision(junk.to_string())), "{junk}");
        }
    }

    #[test]
    fn durations_with_units_decimals_or_bare_seconds() {
        let cases = [
            ("30s", Duration::from_secs(30)),
            ("45", Duration::from_secs(45)),
            (" 500ms ", Duration::from_millis(500)),
            ("2m", Duration::from_secs(120)),
            ("1m30s", Duration::from_secs(90)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("1h", Duration::from_secs(3600)),
            ("0s", Duration::ZERO),
            ("0.0000000001s", Duration::ZERO),
        ];
        for (text, expected) in cases {
            assert_eq!(duration(text), Ok(expected), "{text:?}");
        }
        for bad in ["", "s", "10x", "ten", "-5s", "5 s", "1.2.3s", ".s", "2h5"] {
            assert_eq!(duration(bad), Err(Error::Duration(bad.to_string())), "{bad:?}");
        }
    }

    #[test]
    fn a_duration_too_long_is_an_error_not_a_panic() {
        for long in [
            "99999999999999999999h",
            "99999999999999999999",
            "18446744073709551616s",
            "5000000000000000000000000000000000000000h",
            "18446744073709551615s",
            "18446744073709551615",
            "999999999999h",
        ] {
            assert_eq!(duration(long), Err(Error::DurationTooLong(long.to_string())), "{long:?}");
        }
        assert_eq!(duration("876000h"), Ok(MAX_DURATION), "100 years of 365 days is the limit");
        let message = duration("99999999999999999999h").unwrap_err().to_string();
        assert!(message.contains("too long"), "{message}");
    }

    #[test]
    fn labels_need_a_key() {
        assert_eq!(label("zone=a"), Ok(("zone".to_string(), "a".to_string())));
        assert_eq!(label("flag="), Ok(("flag".to_string(), String::new())));
        assert!(label("zone").is_err());
        assert!(label("=a").is_err());
        assert_eq!(labels(" zone=a , gpu=true ").unwrap().len(), 2);
        assert_eq!(labels(""), Ok(Labels::new()));
        assert_eq!(labels("oops"), Err(Error::Label("oops".into())));
    }

    #[test]
    fn taints_parse_with_and_without_value() {
        assert_eq!(taint("gpu=true:NoSchedule"), Ok(Taint { key: "gpu".into(), value: "true".into(), effect: "NoSchedule".into() }));
        assert_eq!(taint("dedicated:NoExecute").unwrap().value, "");
        for bad in ["gpu=true", "gpu=true:Sometimes", "=x:NoSchedule", ":NoSchedule"] {
            assert_eq!(taint(bad), Err(Error::Taint(bad.to_string())), "{bad:?}");
        }
        assert_eq!(taints("gpu=true:NoSchedule, zone=x:NoExecute").unwrap().len(), 2);
        assert_eq!(taints(" "), Ok(vec![]));
        let message = taint("gpu").unwrap_err().to_string();
        assert!(message.contains("\"gpu\"") && message.contains("NoSchedule"), "{message}");
    }
}
