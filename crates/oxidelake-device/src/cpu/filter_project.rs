//! CPU fused filter + projection: Arrow comparison kernels, AND-ed, then one filter pass
//! over the projected columns only (the columns that are dropped are never copied).

use arrow::array::{Array, ArrayRef, BooleanArray, Datum, Float64Array, Int64Array, Scalar};
use arrow::compute::kernels::cmp;
use arrow::compute::{and, filter_record_batch};
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

use crate::ops::{CmpOp, ColumnPredicate, FilterProjectArgs, Literal, check_predicates};

/// Checks the predicates and projection against the batch's schema.
pub(crate) fn validate(args: &FilterProjectArgs<'_>) -> Result<(), EngineError> {
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

fn compare(column: &ArrayRef, op: CmpOp, rhs: &dyn Datum) -> Result<BooleanArray, EngineError> {
    let result = match op {
        CmpOp::Eq => cmp::eq(column, rhs),
        CmpOp::Lt => cmp::lt(column, rhs),
        CmpOp::LtEq => cmp::lt_eq(column, rhs),
        CmpOp::Gt => cmp::gt(column, rhs),
        CmpOp::GtEq => cmp::gt_eq(column, rhs),
    };
    Ok(result?)
}

/// The selection mask: true where every predicate is true, NULL or false elsewhere.
pub(crate) fn mask(
    batch: &RecordBatch,
    predicates: &[ColumnPredicate],
) -> Result<Option<BooleanArray>, EngineError> {
    let mut acc: Option<BooleanArray> = None;
    for p in predicates {
        let column = batch.column(p.column);
        let m = match p.literal {
            Literal::Int64(v) => compare(column, p.op, &Scalar::new(Int64Array::from(vec![v])))?,
            Literal::Float64(v) => {
                compare(column, p.op, &Scalar::new(Float64Array::from(vec![v])))?
            }
        };
        acc = Some(match acc {
            None => m,
            Some(prev) => and(&prev, &m)?,
        });
    }
    Ok(acc)
}

/// Runs the fused filter + projection on the CPU.
pub(crate) fn filter_project(args: FilterProjectArgs<'_>) -> Result<RecordBatch, EngineError> {
    validate(&args)?;
    let projected = args.batch.project(args.projection)?;
    match mask(args.batch, args.predicates)? {
        None => Ok(projected),
        Some(m) if m.null_count() == 0 && m.true_count() == m.len() => Ok(projected),
        Some(m) => Ok(filter_record_batch(&projected, &m)?),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Float64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(4)])),
                Arc::new(Float64Array::from(vec![
                    Some(0.5),
                    Some(9.0),
                    Some(f64::NAN),
                    None,
                ])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn rows_with_a_null_comparison_are_dropped_like_sql() {
        let b = batch();
        let preds = [ColumnPredicate {
            column: 0,
            op: CmpOp::GtEq,
            literal: Literal::Int64(1),
        }];
        let out = filter_project(FilterProjectArgs {
            batch: &b,
            predicates: &preds,
            projection: &[1],
        })
        .unwrap();
        assert_eq!(out.num_rows(), 3);
        assert_eq!(out.num_columns(), 1);
    }

    #[test]
    fn nan_compares_greater_than_every_number_as_in_arrow() {
        let b = batch();
        let preds = [ColumnPredicate {
            column: 1,
            op: CmpOp::Gt,
            literal: Literal::Float64(100.0),
        }];
        let out = filter_project(FilterProjectArgs {
            batch: &b,
            predicates: &preds,
            projection: &[0],
        })
        .unwrap();
        let a = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(a.values().to_vec(), vec![3]);
    }

    #[test]
    fn a_literal_of_another_type_is_unsupported_not_coerced() {
        let b = batch();
        let preds = [ColumnPredicate {
            column: 0,
            op: CmpOp::Eq,
            literal: Literal::Float64(1.0),
        }];
        let err = filter_project(FilterProjectArgs {
            batch: &b,
            predicates: &preds,
            projection: &[0],
        })
        .unwrap_err();
        assert!(matches!(err, EngineError::Unsupported { .. }));
    }
}
