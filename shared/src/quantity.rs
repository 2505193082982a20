//! Quantities as people write them and read them: memory (`64Mi`, `1.5Gi`) and CPU (`250m`,
//! `0.5`) parsed into bytes and millicores with exact integer arithmetic, formatted back, and
//! read by serde from an integer or a string (with the JSON Schema of that encoding).

use std::fmt;

use serde::Deserializer;

use crate::limits::{MAX_CPU_MILLICORES, MAX_MEMORY_BYTES};

/// Which amount a quantity measures: it picks the parser and words the errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Amount {
    Cpu,
    Memory,
}

impl Amount {
    fn name(self) -> &'static str {
        match self {
            Amount::Cpu => "cpu",
            Amount::Memory => "memory",
        }
    }

    fn parse(self, text: &str) -> Result<i64, String> {
        match self {
            Amount::Cpu => parse_cpu(text),
            Amount::Memory => parse_memory(text),
        }
    }

    /// What a manifest may write, for errors.
    fn accepted(self) -> &'static str {
        match self {
            Amount::Cpu => "millicores as an integer (250), or a string such as \"250m\" or \"0.5\" (cores)",
            Amount::Memory => "bytes as an integer (67108864), or a string such as \"64Mi\" or \"1.5Gi\"",
        }
    }

    /// The most any container or node may have, as people write it.
    fn bound(self) -> String {
        match self {
            Amount::Cpu => format!("{} cores", format_cpu(MAX_CPU_MILLICORES)),
            Amount::Memory => format_memory(MAX_MEMORY_BYTES),
        }
    }

    fn error(self, text: &str, error: QuantityError) -> String {
        let name = self.name();
        let why = match error {
            QuantityError::NotANumber => format!("expected {}", self.accepted()),
            QuantityError::Negative => format!("it is negative; {name} must be 0 or more"),
            QuantityError::TooLarge => format!("it is larger than the {} any container or node may have", self.bound()),
            QuantityError::TooPrecise => format!("it has more than {MAX_DECIMALS} decimal places"),
        };
        format!("invalid {name} quantity {text:?}: {why}")
    }
}

/// Reads a JSON integer or a quantity string. A visitor rather than an untagged enum, so
/// that an integer out of range or a fraction gets a message that says what to write.
struct QuantityVisitor(Amount);

impl<'de> serde::de::Visitor<'de> for QuantityVisitor {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0.name(), self.0.accepted())
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<i64, E> {
        Ok(value)
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<i64, E> {
        i64::try_from(value).map_err(|_| E::custom(self.0.error(&value.to_string(), QuantityError::TooLarge)))
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<i64, E> {
        let name = self.0.name();
        // Written by serde_json (ryu), not `{:?}`: core's float formatting is 5 KB gzipped in
        // the browser bundle.
        let value = serde_json::Number::from_f64(value).map_or_else(|| "not a number".to_string(), |n| n.to_string().replace("e+", "e"));
        Err(E::custom(format!(
            "invalid {name} {value}: a number with a fraction or an exponent is not accepted; write {}",
            self.0.accepted()
        )))
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<i64, E> {
        self.0.parse(text).map_err(E::custom)
    }
}

pub(crate) fn de_memory<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(QuantityVisitor(Amount::Memory))
}

pub(crate) fn de_cpu<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(QuantityVisitor(Amount::Cpu))
}

/// A decimal with an optional suffix, as `parse_memory` and `parse_cpu` read it.
#[cfg(feature = "schema")]
fn quantity_pattern(suffixes: &str) -> String {
    format!(r"^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)({suffixes})?\s*$")
}

/// The JSON Schema of a memory amount as [`de_memory`] reads it.
#[cfg(feature = "schema")]
pub(crate) fn memory_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "bytes: an integer, or a quantity string such as \"64Mi\" or \"1.5Gi\"",
        "anyOf": [
            {"type": "integer", "minimum": 0, "maximum": MAX_MEMORY_BYTES},
            {"type": "string", "pattern": quantity_pattern("k|K|M|G|T|P|Ki|Mi|Gi|Ti|Pi")}
        ]
    })
}

/// The JSON Schema of a CPU amount as [`de_cpu`] reads it.
#[cfg(feature = "schema")]
pub(crate) fn cpu_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "millicores: an integer, or a quantity string such as \"250m\" or \"0.5\" (cores)",
        "anyOf": [
            {"type": "integer", "minimum": 0, "maximum": MAX_CPU_MILLICORES},
            {"type": "string", "pattern": r"^\s*([0-9]+m|([0-9]+(\.[0-9]*)?|\.[0-9]+))\s*$"}
        ]
    })
}

/// Parses a memory quantity: `67108864`, `64Mi`, `1Gi`, `1.5Gi`, `500M`, `128k`. Negative
/// amounts and amounts past an i64 are errors that name the text.
pub fn parse_memory(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let factor: i128 = match suffix {
        "" => 1,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        _ => {
            return Err(format!(
                "invalid memory quantity {text:?}: unknown suffix {suffix:?} (use Ki, Mi, Gi, Ti, Pi, k, M, G, T, P or plain bytes)"
            ));
        }
    };
    scaled(number, factor).map_err(|e| Amount::Memory.error(text, e))
}

/// Parses a CPU quantity: `250m` (millicores), `2` or `0.5` (cores), as Kubernetes writes them.
pub fn parse_cpu(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let parsed = match text.strip_suffix('m') {
        Some(milli) if milli.contains('.') => Err(QuantityError::NotANumber),
        Some(milli) => scaled(milli, 1),
        None => scaled(text, 1000),
    };
    parsed.map_err(|e| Amount::Cpu.error(text, e))
}

/// Why a quantity's number was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuantityError {
    NotANumber,
    Negative,
    TooLarge,
    TooPrecise,
}

/// Decimal places a quantity may have: enough for any factor up to 2^50 to round exactly.
const MAX_DECIMALS: usize = 18;

/// `number × factor`, rounded half away from zero, for a decimal such as `1.25`, in
/// checked integers: exact where floats are not, never wrapping, and without the float
/// parser's tables in the browser's bundle.
fn scaled(number: &str, factor: i128) -> Result<i64, QuantityError> {
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !all_digits(whole) || !all_digits(fraction) {
        return Err(QuantityError::NotANumber);
    }
    let (whole, fraction) = (whole.trim_start_matches('0'), fraction.trim_end_matches('0'));
    // 19 whole digits already pass i64::MAX; with at most 18 decimals the mantissa fits an i128.
    if whole.len() > 19 {
        return Err(if negative { QuantityError::Negative } else { QuantityError::TooLarge });
    }
    if fraction.len() > MAX_DECIMALS {
        return Err(QuantityError::TooPrecise);
    }
    let mantissa = whole.bytes().chain(fraction.bytes()).fold(0i128, |m, digit| m * 10 + i128::from(digit - b'0'));
    let divisor = 10i128.pow(fraction.len() as u32);
    let doubled = mantissa.checked_mul(factor).and_then(|v| v.checked_mul(2)).and_then(|v| v.checked_add(divisor));
    let value = doubled.map(|v| v / (divisor * 2)).ok_or(QuantityError::TooLarge)?;
    match (negative, value) {
        (_, 0) => Ok(0),
        (true, _) => Err(QuantityError::Negative),
        (false, v) => i64::try_from(v).map_err(|_| QuantityError::TooLarge),
    }
}

/// Bytes as an exact quantity, for a manifest that must read back the same: the largest
/// binary or decimal unit that divides it (`64Mi`, `100k`), else the plain number.
pub fn exact_memory(bytes: i64) -> String {
    const UNITS: [(&str, i64); 8] = [
        ("Ti", 1 << 40),
        ("T", 1_000_000_000_000),
        ("Gi", 1 << 30),
        ("G", 1_000_000_000),
        ("Mi", 1 << 20),
        ("M", 1_000_000),
        ("Ki", 1 << 10),
        ("k", 1_000),
    ];
    match UNITS.iter().find(|(_, size)| bytes != 0 && bytes % size == 0) {
        Some((unit, size)) => format!("{}{unit}", bytes / size),
        None => bytes.to_string(),
    }
}

/// Formats bytes the way people read them: `64Mi`, `1.5Gi`.
pub fn format_memory(bytes: i64) -> String {
    const UNITS: [(&str, i64); 4] = [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    let sign = if bytes < 0 { "-" } else { "" };
    let magnitude = i128::from(bytes).abs();
    for (unit, size) in UNITS {
        let size = i128::from(size);
        if magnitude >= size {
            if magnitude % size == 0 {
                return format!("{sign}{}{unit}", magnitude / size);
            }
            let tenths = (magnitude * 20 + size) / (size * 2);
            return format!("{sign}{}.{}{unit}", tenths / 10, tenths % 10);
        }
    }
    bytes.to_string()
}

/// Formats millicores: `250m`, `2` (whole cores).
pub fn format_cpu(millis: i64) -> String {
    if millis % 1000 == 0 { (millis / 1000).to_string() } else { format!("{millis}m") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_quantities_are_read_exactly() {
        let cases = [
            ("67108864", 67_108_864),
            ("64Mi", 67_108_864),
            (" 1.5Gi ", 1_610_612_736),
            ("500M", 500_000_000),
            ("128k", 128_000),
            ("0.5Ki", 512),
            ("1.0005K", 1001),
            ("8Ti", 8 << 40),
            ("2Pi", 2 << 50),
            ("-0", 0),
            ("0.000000000000001Pi", 1),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_memory(text), Ok(bytes), "{text}");
        }
        for text in ["", "Mi", "1.2.3Mi", "abcMi", "-", ".", "1e3", "9999999Ti", "64 Mi", "1--1", "7Ei"] {
            assert!(parse_memory(text).is_err(), "{text:?} is not a memory quantity");
        }
        assert_eq!(
            parse_memory("64Xi"),
            Err("invalid memory quantity \"64Xi\": unknown suffix \"Xi\" (use Ki, Mi, Gi, Ti, Pi, k, M, G, T, P or plain bytes)"
                .to_string())
        );
    }

    #[test]
    fn negative_and_overflowing_quantities_are_refused_with_their_text() {
        // Once stored as 1099511627775 bytes: the rounding step wrapped an i128.
        let attack = "-154742504910672534362390527Ti";
        assert_eq!(parse_memory(attack), Err(format!("invalid memory quantity \"{attack}\": it is negative; memory must be 0 or more")));
        for text in ["154742504910672534362390527Ti", "9223372036854775808", "99999999999999999999999Mi", "8589934592Gi"] {
            let message = parse_memory(text).unwrap_err();
            assert!(message.contains(text) && message.contains("larger than the 64Ti"), "{message}");
        }
        assert!(parse_memory("1.0000000000000000001").unwrap_err().contains("more than 18 decimal places"));
        for text in ["-1Mi", "-0.5"] {
            assert!(parse_memory(text).unwrap_err().contains("negative"), "{text}");
        }
        for text in ["-1", "-250m"] {
            assert!(parse_cpu(text).unwrap_err().contains("negative"), "{text}");
        }
        let message = parse_cpu("9223372036854775807000m").unwrap_err();
        assert!(message.contains("larger than the 1000000 cores"), "{message}");
    }

    #[test]
    fn cpu_quantities_are_millicores() {
        for (text, millis) in
            [("250m", 250), ("2", 2000), ("0.5", 500), ("1.2345", 1235), ("0.0005", 1), ("9223372036854775807m", i64::MAX)]
        {
            assert_eq!(parse_cpu(text), Ok(millis), "{text}");
        }
        for text in ["", ".", "x", "0.5m", "m", "1,5", "inf", "NaN", "9223372036854775.808"] {
            assert!(parse_cpu(text).is_err(), "{text:?} is not a cpu quantity");
        }
    }

    #[test]
    fn memory_is_formatted_in_the_largest_whole_unit_or_with_one_decimal() {
        let cases = [
            (67_108_864, "64Mi"),
            (1_610_612_736, "1.5Gi"),
            (1000, "1000"),
            (1536, "1.5Ki"),
            ((1 << 30) - 1, "1024.0Mi"),
            (-1_048_576, "-1Mi"),
            (0, "0"),
            (i64::MIN, "-8388608Ti"),
        ];
        for (bytes, text) in cases {
            assert_eq!(format_memory(bytes), text, "{bytes}");
        }
        for bytes in [1 << 10, 3 << 20, 7 << 30, 5 << 40, 123_456_789] {
            let text = format_memory(bytes);
            if !text.contains('.') {
                assert_eq!(parse_memory(&text), Ok(bytes), "{text} reads back");
            }
        }
    }

    #[test]
    fn an_exact_memory_quantity_reads_back_as_the_same_bytes() {
        for (bytes, text) in [(64 << 20, "64Mi"), (100_000, "100k"), (1536, "1536"), (1_500_000, "1500k"), (100_044, "100044"), (0, "0")] {
            assert_eq!(exact_memory(bytes), text, "{bytes}");
            assert_eq!(parse_memory(text), Ok(bytes), "{text}");
        }
    }
}
