//! Manifests in JSON or YAML.
