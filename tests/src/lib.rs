//! End-to-end tests across the parts live in tests/.
