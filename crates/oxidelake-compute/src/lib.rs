//! # oxidelake-compute
//!
//! OxideLake's own physical operators as DataFusion `ExecutionPlan`s:
//!
//! | operator | replaces | v1 coverage |
//! |---|---|---|
//! | [`GpuFilterExec`] | `FilterExec` (with its projection) | comparisons with literals or columns, IN lists, LIKE, IS [NOT] NULL under AND/OR/NOT; integers, floats, dates, times, timestamps, Decimal128, booleans, strings (ADR-0006) |
//! | [`GpuHashJoinExec`] | `HashJoinExec` | inner, left, right, semi and anti joins on composite keys of integers, dates, decimals and strings, with a residual filter (ADR-0009) |
//! | [`GpuPartialAggregateExec`] | `AggregateExec` (partial) | SUM/COUNT/MIN/MAX/AVG states by any row-format keys (ADR-0007) |
//! | [`GpuProjectionExec`] | `ProjectionExec` computing arithmetic | `+ - *` over integers, Float64 and Decimal128 with DataFusion's typing and widening casts (ADR-0010) |
//! | [`GpuVectorDistanceExec`] | `array_distance` / `l2_distance` / `cosine_distance` projections | `FixedSizeList<Float32>` vs a query |
//!
//! [`GraceHashJoinExec`] is a CPU operator: DataFusion's hash join run through spill
//! files when its build side does not fit the memory pool (under a host memory limit).
//! [`RepartitionGrantPool`] keeps DataFusion 55.2's `RepartitionExec` off its spill path,
//! which can deadlock (apache/datafusion#24883); every pool an embedded session installs
//! is wrapped in it. [`JoinFilterExec`], also a CPU operator, drops the probe rows a hash
//! join's build side cannot match right above the Parquet scan that reads them, while
//! that drops enough rows to pay.
//!
//! [`l2_distance_udf`] is the SQL function `l2_distance`, with the numbers of the CPU
//! path of [`GpuVectorDistanceExec`] and of DataFusion's `array_distance` (ADR-0005).
//! [`checked_sum_udaf`] is the aggregate `sum` every session registers in place of
//! DataFusion's: over integers and decimals an overflow is an error, never a wrapped
//! value ([`sum_overflow_error`]; docs/sql-semantics.md).
//! [`total_order_min_max_udafs`] are DataFusion's `min` and `max` with their grouped form
//! over floats in IEEE total order, as their ungrouped form and the device order them
//! (DataFusion 55.2's grouped form does not: `docs/upstream-defects.md`).
//!
//! Each operator picks its backend when it executes, from the local `HardwareDetector`,
//! so one plan is correct on an executor with or without a GPU; a batch the backend
//! cannot take (`Unsupported`) runs on the CPU instead and is counted in the
//! `cpu_fallback_batches` metric. The CPU path (Arrow compute kernels plus rayon, in
//! `oxidelake-device`'s `CpuBackend`) is the semantic reference: the conformance suite in
//! `tests/` checks it against stock DataFusion.
//!
//! The session's `oxidelake.*` options are one typed DataFusion `ConfigExtension`,
//! [`OxideOptions`], defined here rather than in the planner because the operators read
//! it too: each task reads its session's device limit from its configuration
//! ([`session_device_limit`]) by type, not by a key's text. Their keys are exported once,
//! whole, in [`option_keys`], for whoever sets an option by name.
//!
//! Every operator displays its placement in EXPLAIN, e.g. `GpuFilterExec[cuda]`, and
//! reports rows in/out, batch latency and bytes moved to DataFusion metrics (EXPLAIN
//! ANALYZE) and to the `TelemetryHub`.
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-memory`,
//! `oxidelake-device` (spec §3).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod checked_sum;
mod device_budget;
mod embedded_projection;
mod exec_support;
mod filter;
mod float_min_max;
mod gathering;
mod grace_join;
mod hash_join;
mod join_filter;
mod options;
mod partial_aggregate;
mod placement;
mod predicate_expr;
mod projection;
mod repartition_grant;
mod segment;
mod transition;
mod udf;
mod value_expr;
mod vector_distance;

pub use checked_sum::{CheckedSum, checked_sum, checked_sum_udaf, sum_overflow_error};
pub use device_budget::{
    DEFAULT_DEVICE_SHARE_PERCENT, DeviceBudget, DeviceClaim, default_device_limit,
    device_limit_for, session_device_limit,
};
pub use exec_support::BackendChoice;
pub use filter::GpuFilterExec;
pub use float_min_max::{
    TotalOrderMinMax, total_order_max, total_order_min, total_order_min_max_udafs,
};
pub use grace_join::{
    FAN_OUT as GRACE_FAN_OUT, GraceHashJoinExec, MAX_DEPTH as GRACE_MAX_DEPTH, PairJoin,
};
pub use hash_join::{GpuHashJoinExec, numbered_key_type};
pub use join_filter::{
    JoinFilterExec, MAX_KEPT as JOIN_FILTER_MAX_KEPT, SAMPLE_ROWS as JOIN_FILTER_SAMPLE_ROWS,
};
pub use options::keys as option_keys;
pub use options::{CpuOperators, OxideOptions, PlacementTarget};
pub use oxidelake_device::device_batch;
pub use oxidelake_device::ops;
pub use partial_aggregate::{
    AggInput, GpuPartialAggregateExec, MAX_DEVICE_DECIMAL_PRECISION, PartialAggSpec, PartialFunc,
};
pub use placement::placement_label;
pub use projection::{GpuProjectionExec, is_constant};
pub use repartition_grant::{RepartitionGrantPool, is_repartition_channel};
pub use segment::replay::as_segment;
pub use segment::{SegmentBatch, SegmentBatches, SegmentExec, SegmentStream};
pub use transition::{DeviceToHostExec, HostToDeviceExec};
pub use udf::{L2Distance, l2_distance_udf};
pub use vector_distance::GpuVectorDistanceExec;
