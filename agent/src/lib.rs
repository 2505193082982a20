//! The Shepherd node agent.
