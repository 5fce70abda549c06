//! The scalar and aggregate functions OxideLake adds to SQL, registered on every session,
//! scheduler and executor (functions resolve by name on each side of a cluster).

use std::sync::Arc;

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};

/// OxideLake's scalar UDFs: `l2_distance`. `cosine_distance` is DataFusion's built-in,
/// whose semantics match the GPU operator's (ADR-0005).
pub fn oxide_scalar_udfs() -> Vec<Arc<ScalarUDF>> {
    vec![Arc::new(oxidelake_compute::l2_distance_udf())]
}

/// OxideLake's aggregate UDFs, each named as the DataFusion function it replaces, so
/// that registering them replaces DataFusion's: `min` and `max`, whose grouped form
/// orders floats in IEEE total order as every other path does
/// (`oxidelake_compute::total_order_min_max_udafs`), and `sum`, which raises an overflow
/// error over integers and decimals where DataFusion's wraps
/// (`oxidelake_compute::checked_sum_udaf`; docs/sql-semantics.md).
pub fn oxide_aggregate_udfs() -> Vec<Arc<AggregateUDF>> {
    let mut udafs = oxidelake_compute::total_order_min_max_udafs();
    udafs.push(oxidelake_compute::checked_sum_udaf());
    udafs
}
