//! How subcommands write: text to standard output with its control characters shown, and
//! objects as JSON or YAML.

use std::io::Write;

use anyhow::Result;
use serde::Serialize;

use crate::cli::OutputFormat;

/// Writes text to standard output, its control characters shown ([`crate::terminal`]), and
/// flushes it, so `-w` output appears at once.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(crate::terminal::safe(text).as_bytes())?;
    out.flush()?;
    Ok(())
}

/// An object or list as JSON or YAML, for `-o json|yaml`.
pub fn serialized<T: Serialize>(value: &T, format: OutputFormat) -> Result<String> {
    Ok(match format {
        OutputFormat::Yaml => serde_norway::to_string(value)?,
        _ => serde_json::to_string_pretty(value)? + "\n",
    })
}
