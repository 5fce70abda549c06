//! The checks every backend makes of an operator's arguments before it runs them, so
//! that the CPU reference and a device refuse the same inputs with the same errors. In
//! one place, beside the arguments, so that no backend module reads another's.

use std::sync::Arc;

use arrow::array::{Array, Float32Array};
use arrow::datatypes::{DataType, Field, Schema};
use oxidelake_core::EngineError;

use crate::ops::{
    AggFunc, AggSpec, HostAggregateArgs, HostFilterArgs, VectorDistanceArgs, check_predicates,
};

/// Checks the predicates and projection against the batch's schema.
pub(crate) fn filter_project(args: &HostFilterArgs<'_>) -> Result<(), EngineError> {
    let schema = args.batch.schema();
    let fields = schema.fields();
    check_predicates(&schema, args.predicates)?;
    if let Some(bad) = args.projection.iter().find(|i| **i >= fields.len()) {
        return Err(EngineError::InvalidArgument {
            what: "projection",
            detail: format!("index {bad} out of {} columns", fields.len()),
        });
    }
    Ok(())
}

/// Checks an aggregate's column types against the v1 coverage.
pub(crate) fn aggregate(args: &HostAggregateArgs<'_>) -> Result<(), EngineError> {
    let schema = args.batch.schema();
    let column_type = |i: usize| {
        schema
            .fields()
            .get(i)
            .map(|f| f.data_type().clone())
            .ok_or_else(|| EngineError::InvalidArgument {
                what: "aggregate column",
                detail: format!("index {i} out of {} columns", schema.fields().len()),
            })
    };
    if column_type(args.group_column)? != DataType::Int64 {
        return Err(EngineError::unsupported(
            "group-by key",
            "only a single Int64 key is covered in v1",
        ));
    }
    for spec in args.aggregates {
        let dt = column_type(spec.column)?;
        if !matches!(dt, DataType::Int64 | DataType::Float64) {
            return Err(EngineError::unsupported(
                "aggregate input",
                format!(
                    "{}({dt}) is outside the Int64/Float64 coverage",
                    spec.func.name()
                ),
            ));
        }
    }
    Ok(())
}

/// The layout of an aggregate's output: the key, then `func(column)` per aggregate.
pub(crate) fn aggregate_schema(
    args: &HostAggregateArgs<'_>,
) -> Result<arrow::datatypes::SchemaRef, EngineError> {
    let schema = args.batch.schema();
    let key_field = schema.field(args.group_column);
    let mut fields = vec![Field::new(key_field.name(), DataType::Int64, true)];
    for AggSpec { func, column } in args.aggregates {
        let input_field = schema.field(*column);
        fields.push(Field::new(
            format!("{}({})", func.name(), input_field.name()),
            func.output_type(input_field.data_type()),
            *func != AggFunc::Count,
        ));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// Checks a vector distance's list type and query length.
pub(crate) fn vector_distance(args: &VectorDistanceArgs<'_>) -> Result<(), EngineError> {
    let dim = args.vectors.value_length() as usize;
    if args
        .vectors
        .values()
        .as_any()
        .downcast_ref::<Float32Array>()
        .is_none()
    {
        return Err(EngineError::unsupported(
            "vector distance",
            format!(
                "vectors of {} (only FixedSizeList<Float32> is covered)",
                args.vectors.value_type()
            ),
        ));
    }
    if args.query.len() != dim {
        return Err(EngineError::InvalidArgument {
            what: "query vector",
            detail: format!(
                "length {} does not match the column's list size {dim}",
                args.query.len()
            ),
        });
    }
    Ok(())
}
