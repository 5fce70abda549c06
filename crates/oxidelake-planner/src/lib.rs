//! # oxidelake-planner
//!
//! Decides where operators run and how they travel:
//! - [`HardwarePlacementRule`], a DataFusion physical optimizer rule that rewrites
//!   eligible nodes into `Gpu*Exec` when the session's placement target
//!   ([`OxideOptions`], `oxidelake.placement.target`) resolves to a GPU, and, for the
//!   kinds `oxidelake.placement.cpu_operators` names ([`CpuOperators`]), into the same
//!   operators placed for the CPU when it does not;
//! - [`explain_with_placement`], the EXPLAIN text that also says why each eligible-looking
//!   node stayed on the CPU;
//! - [`PlacementCoverage`], how many filters, joins and aggregates of a plan were placed
//!   and why the others were not;
//! - [`GraceJoinRule`], which under a memory limit turns partitioned hash joins into the
//!   spilling `GraceHashJoinExec` (embedded sessions);
//! - [`JoinFilterRowsRule`], which lets the filters hash joins learn from their build
//!   sides drop probe rows while Parquet decodes them (embedded sessions);
//! - [`DeviceTransitionRule`], which puts explicit host-to-device and device-to-host
//!   transitions around the GPU operators placed on a device, so their batches stay on
//!   the device between them (ADR-0014, the only device path since ADR-0015);
//! - [`OxidePhysicalCodec`], the `PhysicalExtensionCodec` that ships those nodes to
//!   Ballista executors;
//! - [`SignedZeroInListRule`], a logical rule that gives a float `IN` list holding one
//!   zero the other too, so that `IN` holds `-0.0 = 0.0` as `=` does on every placement
//!   (DataFusion 55.2's long `IN` lists compare bit patterns; `docs/upstream-defects.md`).
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-compute` (plus
//! `datafusion-proto`) (spec §3).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod codec;
mod coverage;
mod eligibility;
mod error;
mod explain;
mod grace;
mod join_filter_rows;
mod probe;
mod rule;
mod signed_zero_in_list;
mod transitions;

pub use codec::OxidePhysicalCodec;
pub use coverage::{OperatorFamily, PlacementCoverage};
pub use eligibility::{Placement, cpu_reason, place, place_on_cpu};
pub use error::CodecError;
pub use explain::{CpuTarget, explain_with_placement};
pub use grace::GraceJoinRule;
pub use join_filter_rows::JoinFilterRowsRule;
// The session options live below this crate, where the operators read them too; they are
// re-exported here, where the rules that read them are.
pub use oxidelake_compute::{CpuOperators, OxideOptions, PlacementTarget, option_keys};
pub use probe::{BackendProbe, FixedProbe};
pub use rule::{HardwarePlacementRule, embedded_optimizer_rules, physical_optimizer_rules};
pub use signed_zero_in_list::SignedZeroInListRule;
pub use transitions::DeviceTransitionRule;
