//! The expression `vector_distance` adds: `l2_distance` or `cosine_distance` of a
//! vector column and a literal query vector.

use std::sync::Arc;

use arrow::array::ListArray;
use arrow::datatypes::{DataType, Float32Type};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::execution::FunctionRegistry;
use datafusion::prelude::{Expr, SessionContext, col, lit};
use oxidelake_runtime::{DistanceMetric, EngineError};

/// The SQL function computing `metric`.
pub(crate) fn function_name(metric: DistanceMetric) -> &'static str {
    match metric {
        DistanceMetric::L2 => "l2_distance",
        DistanceMetric::Cosine => "cosine_distance",
    }
}

/// `function(column, [query...])`, with the function resolved in `ctx` (so a cluster
/// client and an embedded session build the same call). A `FixedSizeList` column whose
/// size differs from the query's length is rejected here rather than when it runs.
pub(crate) fn distance_expr(
    ctx: &SessionContext,
    schema: &DFSchema,
    column: &str,
    query: Vec<f32>,
    metric: DistanceMetric,
) -> Result<Expr, EngineError> {
    if let Ok(field) = schema.field_with_unqualified_name(column)
        && let DataType::FixedSizeList(_, size) = field.data_type()
        && usize::try_from(*size).ok() != Some(query.len())
    {
        return Err(EngineError::InvalidArgument {
            what: "query vector",
            detail: format!(
                "{} elements, but column {column} holds vectors of {size}",
                query.len()
            ),
        });
    }
    let function = ctx.udf(function_name(metric))?;
    let values = query.into_iter().map(Some);
    let list = ListArray::from_iter_primitive::<Float32Type, _, _>([Some(values)]);
    let query = lit(ScalarValue::List(Arc::new(list)));
    Ok(function.call(vec![col(column), query]))
}
