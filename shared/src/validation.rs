//! Validation of objects with field paths.
