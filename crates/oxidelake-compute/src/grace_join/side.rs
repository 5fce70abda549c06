//! The two inputs of a join, as the grace join's parts and NULL-key rules name them.

/// Which input of the join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    /// The build side.
    Left,
    /// The probe side.
    Right,
}
