//! The few browser facilities the app reads directly: the clock, the page's visibility, the
//! location hash and local storage. Every function degrades to "nothing there" outside a browser.

use chrono::DateTime;
use shared::model::Time;

/// The wall clock, from `Date.now()` (`shared` never reads a clock itself).
pub fn now() -> Time {
    DateTime::from_timestamp_millis(js_sys::Date::now() as i64).unwrap_or_default()
}

/// Milliseconds since the page started loading, for timing measurements.
pub fn performance_now() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
}

/// Whether the page can be seen (not a background tab, not a minimised window), so that
/// polling stops while nobody looks.
pub fn page_visible() -> bool {
    web_sys::window().and_then(|w| w.document()).is_some_and(|d| !d.hidden())
}

pub fn location_hash() -> String {
    web_sys::window().and_then(|w| w.location().hash().ok()).unwrap_or_default()
}

pub fn set_location_hash(hash: &str) {
    if let Some(window) = web_sys::window() {
        let _ = window.location().set_hash(hash);
    }
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|w| w.local_storage().ok().flatten())
}

pub fn load(key: &str) -> Option<String> {
    storage().and_then(|s| s.get_item(key).ok().flatten())
}

/// Stores `value` under `key`, or removes the key for `None`.
pub fn save(key: &str, value: Option<&str>) {
    if let Some(storage) = storage() {
        let _ = match value {
            Some(value) => storage.set_item(key, value),
            None => storage.remove_item(key),
        };
    }
}

/// Marks the document root with an attribute (`data-first-render-ms`) that tests and
/// benchmarks read.
pub fn mark_document(name: &str, value: &str) {
    if let Some(root) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()) {
        let _ = root.set_attribute(name, value);
    }
}
