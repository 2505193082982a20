//! What a container asks for and what a node offers, in the model's units (bytes,
//! millicores), read from integers or quantity strings through [`crate::quantity`].

use serde::{Deserialize, Serialize};

/// What a container asks for, or what a node offers: memory in bytes, CPU in millicores.
///
/// Manifests may write either the original's plain integers (`"memory": 67108864`,
/// `"cpu": 250`) or Kubernetes quantity strings (`"memory": "64Mi"`, `"cpu": "250m"` or
/// `"0.5"`). A bare number is always bytes or millicores, as in the original, so a number
/// with a fraction or an exponent (`0.5`, `1.5e3`) is refused with what to write instead.
/// Validation bounds every amount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ResourceRequirements {
    /// Bytes.
    #[serde(deserialize_with = "crate::quantity::de_memory")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::quantity::memory_schema"))]
    pub memory: i64,
    /// Millicores.
    #[serde(deserialize_with = "crate::quantity::de_cpu")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::quantity::cpu_schema"))]
    pub cpu: i64,
}

/// A node's capacity or allocatable amount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct NodeResources {
    /// Millicores.
    #[serde(deserialize_with = "crate::quantity::de_cpu")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::quantity::cpu_schema"))]
    pub cpu: i64,
    /// Bytes.
    #[serde(deserialize_with = "crate::quantity::de_memory")]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::quantity::memory_schema"))]
    pub memory: i64,
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = crate::limits::MAX_NODE_PODS)))]
    pub pods: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_numbers_are_integers_in_range_and_anything_else_says_what_to_write() {
        let read = |json: &str| serde_json::from_str::<ResourceRequirements>(json).map_err(|e| e.to_string());
        assert_eq!(read(r#"{"cpu": 250, "memory": "64Mi"}"#), Ok(ResourceRequirements { cpu: 250, memory: 64 << 20 }));
        assert_eq!(read(r#"{"cpu": -5}"#).map(|r| r.cpu), Ok(-5), "validation refuses it, with its path");
        for (json, expected) in [
            (r#"{"cpu": 9223372036854775808}"#, "invalid cpu quantity \"9223372036854775808\": it is larger than the 1000000 cores"),
            (
                r#"{"memory": 1e30}"#,
                "invalid memory 1e30: a number with a fraction or an exponent is not accepted; write bytes as an integer",
            ),
            (
                r#"{"cpu": 1.5e3}"#,
                "invalid cpu 1500.0: a number with a fraction or an exponent is not accepted; write millicores as an integer (250), or a string such as \"250m\" or \"0.5\" (cores)",
            ),
            (r#"{"cpu": 0.5}"#, "\"250m\" or \"0.5\""),
            (r#"{"memory": true}"#, "expected memory bytes as an integer (67108864), or a string such as \"64Mi\""),
        ] {
            let message = read(json).unwrap_err();
            assert!(message.contains(expected), "{json}: {message}");
        }
    }
}
