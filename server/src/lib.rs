//! The Shepherd control plane.
