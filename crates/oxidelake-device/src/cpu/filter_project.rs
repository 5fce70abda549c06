//! CPU fused filter + projection: Arrow's comparison kernels on the columns as they are
//! (float `-0.0`s made `+0.0` first, so that they compare as DataFusion compares them),
//! combined in Kleene logic, then one filter pass over the projected columns only (the
//! columns that are dropped are never copied).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Datum, Scalar};
use arrow::compute::kernels::{boolean, cmp, comparison};
use arrow::compute::{cast, filter_record_batch, is_not_null, is_null};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

use crate::ops::{CmpOp, HostFilterArgs, Literal, Predicate, literal_array};
use crate::predicate::canonical_float_zeros;

/// `column op rhs`, `rhs` a one-element literal array when `literal`, else a column.
/// Arrow's kernels order floats by IEEE total order, where `-0.0 < +0.0`; SQL and
/// DataFusion hold them equal, so float operands are compared with their `-0.0`s made
/// `+0.0` first (what `float_order_key` does to a device's images).
fn compare(
    column: &ArrayRef,
    op: CmpOp,
    rhs: &ArrayRef,
    literal: bool,
) -> Result<BooleanArray, EngineError> {
    let column = &canonical_float_zeros(column);
    let rhs = canonical_float_zeros(rhs);
    let scalar = literal.then(|| Scalar::new(Arc::clone(&rhs)));
    let rhs: &dyn Datum = match &scalar {
        Some(scalar) => scalar,
        None => &rhs,
    };
    let result = match op {
        CmpOp::Eq => cmp::eq(column, rhs),
        CmpOp::NotEq => cmp::neq(column, rhs),
        CmpOp::Lt => cmp::lt(column, rhs),
        CmpOp::LtEq => cmp::lt_eq(column, rhs),
        CmpOp::Gt => cmp::gt(column, rhs),
        CmpOp::GtEq => cmp::gt_eq(column, rhs),
    };
    Ok(result?)
}

/// The three-valued result of one predicate over every row of `batch`.
fn eval(batch: &RecordBatch, predicate: &Predicate) -> Result<BooleanArray, EngineError> {
    Ok(match predicate {
        Predicate::Compare(p) => {
            let column = batch.column(p.column);
            let rhs = literal_array(column.data_type(), &p.literal)?;
            compare(column, p.op, &rhs, true)?
        }
        Predicate::CompareColumns { left, op, right } => {
            compare(batch.column(*left), *op, batch.column(*right), false)?
        }
        Predicate::Like {
            column,
            pattern,
            negated,
        } => {
            let mut column = batch.column(*column).clone();
            if let DataType::Dictionary(_, value) = column.data_type() {
                column = cast(&column, value)?;
            }
            let rhs = Scalar::new(literal_array(
                column.data_type(),
                &Literal::Utf8(pattern.clone()),
            )?);
            if *negated {
                comparison::nlike(&column, &rhs)?
            } else {
                comparison::like(&column, &rhs)?
            }
        }
        Predicate::IsNull { column, negated } => {
            let column = batch.column(*column);
            if *negated {
                is_not_null(column)?
            } else {
                is_null(column)?
            }
        }
        Predicate::And(children) => fold(batch, children, true)?,
        Predicate::Or(children) => fold(batch, children, false)?,
        Predicate::Not(child) => boolean::not(&eval(batch, child)?)?,
    })
}

/// Kleene AND (or OR) of `children`; the empty AND is true, the empty OR false.
fn fold(
    batch: &RecordBatch,
    children: &[Predicate],
    and: bool,
) -> Result<BooleanArray, EngineError> {
    let mut acc: Option<BooleanArray> = None;
    for child in children {
        let m = eval(batch, child)?;
        acc = Some(match acc {
            None => m,
            Some(prev) if and => boolean::and_kleene(&prev, &m)?,
            Some(prev) => boolean::or_kleene(&prev, &m)?,
        });
    }
    Ok(acc.unwrap_or_else(|| BooleanArray::from(vec![and; batch.num_rows()])))
}

/// The selection mask: true where every predicate is true, NULL or false elsewhere.
pub(crate) fn mask(
    batch: &RecordBatch,
    predicates: &[Predicate],
) -> Result<Option<BooleanArray>, EngineError> {
    if predicates.is_empty() {
        return Ok(None);
    }
    fold(batch, predicates, true).map(Some)
}

/// Runs the fused filter + projection on the CPU.
pub(crate) fn filter_project(args: HostFilterArgs<'_>) -> Result<RecordBatch, EngineError> {
    crate::ops::validate::filter_project(&args)?;
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

    use arrow::array::{Array, Float64Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::ops::ColumnPredicate;

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
        let preds = [Predicate::from(ColumnPredicate {
            column: 0,
            op: CmpOp::GtEq,
            literal: Literal::Int64(1),
        })];
        let out = filter_project(HostFilterArgs {
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
        let preds = [Predicate::from(ColumnPredicate {
            column: 1,
            op: CmpOp::Gt,
            literal: Literal::Float64(100.0),
        })];
        let out = filter_project(HostFilterArgs {
            batch: &b,
            predicates: &preds,
            projection: &[0],
        })
        .unwrap();
        let a = out.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(a.values().to_vec(), vec![3]);
    }

    #[test]
    fn signed_zeros_compare_equal_with_literals_and_columns_as_in_datafusion() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("f", DataType::Float64, true),
            Field::new("g", DataType::Float64, true),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Float64Array::from(vec![-0.0, 0.0, -0.0, 1.0])),
                Arc::new(Float64Array::from(vec![0.0, -0.0, -0.0, f64::NAN])),
            ],
        )
        .unwrap();
        let kept = |predicates: &[Predicate]| {
            let m = mask(&b, predicates).unwrap().unwrap();
            (0..m.len())
                .map(|i| m.is_valid(i) && m.value(i))
                .collect::<Vec<_>>()
        };
        let literal = |op, v| {
            Predicate::from(ColumnPredicate {
                column: 0,
                op,
                literal: Literal::Float64(v),
            })
        };
        assert_eq!(kept(&[literal(CmpOp::Eq, 0.0)]), [true, true, true, false]);
        assert_eq!(kept(&[literal(CmpOp::Eq, -0.0)]), [true, true, true, false]);
        assert_eq!(kept(&[literal(CmpOp::Lt, 0.0)]), [false; 4]);
        assert_eq!(
            kept(&[literal(CmpOp::GtEq, 0.0), literal(CmpOp::LtEq, -0.0)]),
            [true, true, true, false]
        );
        let columns = Predicate::CompareColumns {
            left: 0,
            op: CmpOp::Eq,
            right: 1,
        };
        assert_eq!(kept(&[columns]), [true, true, true, false]);
    }

    #[test]
    fn a_literal_of_another_type_is_unsupported_not_coerced() {
        let b = batch();
        let preds = [Predicate::from(ColumnPredicate {
            column: 0,
            op: CmpOp::Eq,
            literal: Literal::Float64(1.0),
        })];
        let err = filter_project(HostFilterArgs {
            batch: &b,
            predicates: &preds,
            projection: &[0],
        })
        .unwrap_err();
        assert!(matches!(err, EngineError::Unsupported { .. }));
    }
}
