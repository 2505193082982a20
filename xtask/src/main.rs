//! `cargo xtask`: build tasks that need nothing but cargo and rustup.
//!
//! `cargo xtask frontend [--release]` compiles the `frontend` crate for wasm32-unknown-unknown,
//! runs wasm-bindgen as a library (`wasm-bindgen-cli-support`, pinned to the same version as
//! `wasm-bindgen`), and writes `dist/` beside `index.html`: the page, its stylesheet, the JS glue
//! and the wasm module. Nothing is downloaded at build time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: cargo xtask frontend [--release]

  frontend    build the dashboard into dist/ (debug build unless --release)
  --release   use the size-optimised [profile.wasm-release] (opt-level z, LTO)";

/// The wasm target the dashboard is built for.
const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// The crate (and binary) that holds the dashboard.
const CRATE: &str = "frontend";

fn main() -> Result<()> {
    let args: Vec<String> = env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("frontend") => {
            let mut release = false;
            for arg in &args[1..] {
                match arg.as_str() {
                    "--release" => release = true,
                    other => bail!("unknown option {other:?} for `cargo xtask frontend`\n\n{USAGE}"),
                }
            }
            build_frontend(release)
        }
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown task {other:?}\n\n{USAGE}"),
        None => bail!("no task given\n\n{USAGE}"),
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives one level below the workspace root").to_path_buf()
}

fn cargo() -> String {
    env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Asks cargo where the target directory is (it honours CARGO_TARGET_DIR and config files).
fn target_dir(root: &Path) -> Result<PathBuf> {
    let output = Command::new(cargo())
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("failed to run `cargo metadata`")?;
    if !output.status.success() {
        bail!("`cargo metadata` failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).context("`cargo metadata` printed invalid JSON")?;
    let dir = metadata["target_directory"].as_str().context("`cargo metadata` did not name a target_directory")?;
    Ok(PathBuf::from(dir))
}

fn build_frontend(release: bool) -> Result<()> {
    let root = workspace_root();
    let (profile, profile_dir) = if release { ("wasm-release", "wasm-release") } else { ("dev", "debug") };

    println!("xtask: building {CRATE} for {WASM_TARGET} (profile {profile})");
    let status = Command::new(cargo())
        .current_dir(&root)
        .args(["build", "--package", CRATE, "--bin", CRATE, "--target", WASM_TARGET, "--profile", profile])
        .status()
        .context("failed to run cargo build for the frontend")?;
    if !status.success() {
        bail!("cargo build of {CRATE} for {WASM_TARGET} failed ({status})");
    }

    let wasm = target_dir(&root)?.join(WASM_TARGET).join(profile_dir).join(format!("{CRATE}.wasm"));
    if !wasm.is_file() {
        bail!("cargo build succeeded but {} is missing", wasm.display());
    }

    let dist = root.join("dist");
    if dist.exists() {
        fs::remove_dir_all(&dist).with_context(|| format!("failed to clear {}", dist.display()))?;
    }
    fs::create_dir_all(&dist).with_context(|| format!("failed to create {}", dist.display()))?;

    println!("xtask: running wasm-bindgen (--target web) on {}", wasm.display());
    let mut bindgen = wasm_bindgen_cli_support::Bindgen::new();
    bindgen.input_path(&wasm).out_name(CRATE).typescript(false).debug(!release);
    bindgen.web(true).context("wasm-bindgen refused --target web")?;
    if release {
        bindgen.remove_name_section(true).remove_producers_section(true);
    }
    bindgen.generate(&dist).with_context(|| format!("wasm-bindgen failed on {}", wasm.display()))?;

    let wasm_out = dist.join(format!("{CRATE}_bg.wasm"));
    let version = content_tag(&fs::read(&wasm_out).with_context(|| format!("failed to read {}", wasm_out.display()))?);

    let index_path = root.join("index.html");
    let index = fs::read_to_string(&index_path).with_context(|| format!("failed to read {}", index_path.display()))?;
    let page = rewrite_index(&index, &version)?;
    for asset in &page.assets {
        let from = root.join(asset);
        let name = from.file_name().with_context(|| format!("asset {asset:?} has no file name"))?;
        fs::copy(&from, dist.join(name)).with_context(|| format!("failed to copy {} into dist/", from.display()))?;
    }
    fs::write(dist.join("index.html"), page.html).context("failed to write dist/index.html")?;

    let size = fs::metadata(&wasm_out)?.len();
    println!("xtask: wrote {} ({} KiB wasm)", dist.display(), size / 1024);
    Ok(())
}

/// A short tag that changes whenever the wasm changes, appended to URLs as `?v=` so a browser
/// never pairs a cached module with new glue code. FNV-1a: stable across Rust versions.
fn content_tag(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", hash >> 32)
}

/// `index.html` as served from `dist/`, and the source files it refers to.
#[derive(Debug, PartialEq)]
struct Page {
    html: String,
    /// Paths relative to the workspace root, copied flat into `dist/`.
    assets: Vec<String>,
}

/// Replaces trunk's `<link data-trunk …>` directives with what `dist/` holds: a stylesheet
/// link for `rel="css"`, and the module script that loads the wasm for `rel="rust"`.
fn rewrite_index(index: &str, version: &str) -> Result<Page> {
    let mut html = String::with_capacity(index.len() + 256);
    let mut assets = Vec::new();
    let mut has_rust = false;
    for line in index.lines() {
        let trimmed = line.trim_start();
        if !(trimmed.starts_with("<link") && trimmed.contains(" data-trunk")) {
            html.push_str(line);
            html.push('\n');
            continue;
        }
        let indent = &line[..line.len() - trimmed.len()];
        match attribute(trimmed, "rel") {
            Some("css") => {
                let href = attribute(trimmed, "href").context("a data-trunk css link has no href")?;
                let name = Path::new(href).file_name().and_then(|n| n.to_str()).context("a data-trunk css href has no file name")?;
                html.push_str(&format!("{indent}<link rel=\"stylesheet\" href=\"./{name}?v={version}\">\n"));
                assets.push(href.to_string());
            }
            Some("rust") => {
                has_rust = true;
                html.push_str(&format!(
                    "{indent}<script type=\"module\">import init from \"./{CRATE}.js?v={version}\"; \
                     init({{ module_or_path: \"./{CRATE}_bg.wasm?v={version}\" }});</script>\n"
                ));
            }
            other => bail!("index.html has a data-trunk link with rel {other:?}; xtask knows only \"css\" and \"rust\""),
        }
    }
    if !has_rust {
        bail!("index.html has no <link data-trunk rel=\"rust\"> line to replace with the wasm loader");
    }
    Ok(Page { html, assets })
}

/// The value of `name="…"` in one HTML tag.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let pattern = format!("{name}=\"");
    let mut rest = tag;
    while let Some(at) = rest.find(&pattern) {
        let preceded_by_space = at == 0 || rest.as_bytes()[at - 1].is_ascii_whitespace();
        let value = &rest[at + pattern.len()..];
        if preceded_by_space {
            return value.find('"').map(|end| &value[..end]);
        }
        rest = value;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_trunk_links_into_the_built_assets() {
        let index = "<head>\n  <!-- data-trunk links -->\n  <link data-trunk rel=\"css\" href=\"frontend/style.css\">\n  \
                     <link data-trunk rel=\"rust\" href=\"frontend/Cargo.toml\" data-bin=\"frontend\">\n</head>\n";
        let page = rewrite_index(index, "abc").unwrap();
        assert_eq!(page.assets, vec!["frontend/style.css".to_string()]);
        assert!(page.html.contains("  <link rel=\"stylesheet\" href=\"./style.css?v=abc\">\n"));
        assert!(page.html.contains("import init from \"./frontend.js?v=abc\""));
        assert!(page.html.contains("module_or_path: \"./frontend_bg.wasm?v=abc\""));
        assert!(!page.html.contains("<link data-trunk"));
        assert!(page.html.contains("<!-- data-trunk links -->"));
        assert!(page.html.starts_with("<head>\n") && page.html.ends_with("</head>\n"));
    }

    #[test]
    fn an_index_without_the_rust_link_is_an_error() {
        let error = rewrite_index("<head></head>", "abc").unwrap_err();
        assert!(error.to_string().contains("rel=\"rust\""), "{error}");
    }

    #[test]
    fn unknown_trunk_links_are_refused() {
        let error = rewrite_index("<link data-trunk rel=\"copy-dir\" href=\"x\">", "abc").unwrap_err();
        assert!(error.to_string().contains("copy-dir"), "{error}");
    }

    #[test]
    fn attribute_matches_whole_names_only() {
        assert_eq!(attribute("<link data-rel=\"x\" rel=\"css\">", "rel"), Some("css"));
        assert_eq!(attribute("<link href=\"a\">", "rel"), None);
    }

    #[test]
    fn content_tag_follows_the_bytes() {
        assert_eq!(content_tag(b"abc"), content_tag(b"abc"));
        assert_ne!(content_tag(b"abc"), content_tag(b"abd"));
        assert_eq!(content_tag(b"").len(), 8);
    }
}
