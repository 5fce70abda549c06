//! The scalar functions OxideLake adds to SQL, registered on every session, scheduler
//! and executor (UDFs resolve by name on each side of a cluster).

use std::sync::Arc;

use datafusion::logical_expr::ScalarUDF;

/// OxideLake's scalar UDFs.
pub fn oxide_scalar_udfs() -> Vec<Arc<ScalarUDF>> {
    Vec::new()
}
