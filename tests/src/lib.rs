//! Support for the end-to-end tests in `tests/tests/`: a real browser (Debian's chromium,
//! headless) driven over WebDriver by chromedriver on the loopback port it picks itself, with
//! waits that say what they were waiting for when they give up. The server side of these
//! tests is `shepherd-testing`'s.
//!
//! Missing chromium or chromedriver is a failure with the package to install, never a skip.
//!
//! [`workshop`] reads docs/workshop.md as a script, and [`terminal`] runs it the way a
//! participant's terminals do, for `tests/tests/workshop.rs`.

pub mod terminal;
pub mod workshop;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::io::{AsyncBufReadExt, BufReader};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A headless chromium session with its own chromedriver and a fresh profile.
pub struct Browser {
    pub client: Client,
    driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a loopback port of its choosing and opens a session.
    pub async fn start() -> Browser {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(Path::new(path).is_file(), "{path} is missing: the browser test needs Debian's {package} (apt-get install {package})");
        }
        let mut driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {CHROMEDRIVER}: {e}"));
        let mut lines = BufReader::new(driver.stdout.take().expect("chromedriver's stdout")).lines();
        // `ChromeDriver was started successfully on port 34571.`, once it listens.
        let port = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await.expect("chromedriver's output") {
                if let Some(port) = listening_port(&line) {
                    return port;
                }
            }
            panic!("chromedriver exited before it listened");
        })
        .await
        .expect("chromedriver listens within 20 s");
        // Keep reading, so that chromedriver never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let profile = tempfile::tempdir().expect("a temporary browser profile");
        let capabilities = serde_json::json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        });
        let serde_json::Value::Object(capabilities) = capabilities else { unreachable!("built as an object") };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| panic!("cannot open a chromium session through chromedriver: {e}"));
        Browser { client, driver, _profile: profile }
    }

    /// Waits for an element matching `css`, saving a screenshot to `failure_shot` if it
    /// never comes, so the failure shows what the page did show.
    pub async fn wait_for(&self, css: &str, timeout: Duration, failure_shot: &Path) -> Element {
        match self.client.wait().at_most(timeout).every(Duration::from_millis(100)).for_element(Locator::Css(css)).await {
            Ok(element) => element,
            Err(e) => {
                self.screenshot(failure_shot).await;
                panic!("no element {css:?} within {timeout:?} ({e}); the page as it was: {}", failure_shot.display())
            }
        }
    }

    pub async fn screenshot(&self, path: &Path) {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        }
        let png = self.client.screenshot().await.unwrap_or_else(|e| panic!("cannot take a screenshot: {e}"));
        std::fs::write(path, png).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    /// Ends the session and chromedriver.
    pub async fn close(mut self) {
        if let Err(e) = self.client.close().await {
            eprintln!("closing the browser session failed: {e}");
        }
        self.driver.kill().await.ok();
    }
}

/// The port in chromedriver's `… started successfully on port N.` line.
fn listening_port(line: &str) -> Option<u16> {
    line.split_once("started successfully on port ")?.1.trim_end_matches('.').trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_comes_from_chromedrivers_own_words() {
        assert_eq!(listening_port("ChromeDriver was started successfully on port 34571."), Some(34571));
        assert_eq!(listening_port("Starting ChromeDriver 156.0 on port 0"), None);
        assert_eq!(listening_port("Only local connections are allowed."), None);
    }
}
