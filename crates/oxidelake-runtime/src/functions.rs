//! The scalar functions OxideLake adds to SQL, registered on every session, scheduler
//! and executor (UDFs resolve by name on each side of a cluster).

use std::sync::Arc;

use datafusion::logical_expr::ScalarUDF;

/// OxideLake's scalar UDFs: `l2_distance`. `cosine_distance` is DataFusion's built-in,
/// whose semantics match the GPU operator's (ADR-0005).
pub fn oxide_scalar_udfs() -> Vec<Arc<ScalarUDF>> {
    vec![Arc::new(oxidelake_compute::l2_distance_udf())]
}
