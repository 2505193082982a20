//! The dashboard's entry point: mounts the app on `<body>` in the browser.

fn main() {
    frontend::start();
}
