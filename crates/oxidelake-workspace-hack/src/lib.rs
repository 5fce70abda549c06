//! No code. This crate names every third-party dependency with the features the whole
//! workspace (tests included) builds it with, and every workspace crate depends on it.
//! So building one crate alone (`cargo run -p oxidelake-cli --bin oxide`) resolves
//! the same features as `cargo test --workspace`, and the two share their compiled
//! dependencies instead of building arrow, DataFusion and the rest twice.
//!
//! `cargo hakari generate` writes its Cargo.toml; `.ci/check_feature_unification.py`
//! fails CI when it has gone stale. See docs/development.md.
