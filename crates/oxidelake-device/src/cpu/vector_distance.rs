//! CPU vector distance: f64 accumulation per row, rows split across rayon workers for
//! large batches. The loops are the same sequential sums DataFusion's `array_distance`
//! and `cosine_distance` perform, so results agree to the last bit.

use arrow::array::{Array, Float32Array, Float64Array};
use oxidelake_core::EngineError;
use rayon::prelude::*;

use crate::ops::{DistanceMetric, VectorDistanceArgs};

/// Batches with at least this many rows are split across rayon workers.
const PARALLEL_ROWS: usize = 1 << 14;

fn distance(metric: DistanceMetric, row: &[f32], query: &[f32]) -> Option<f64> {
    match metric {
        DistanceMetric::L2 => {
            let mut sum = 0.0f64;
            for (a, q) in row.iter().zip(query) {
                let d = f64::from(*a) - f64::from(*q);
                sum += d * d;
            }
            Some(sum.sqrt())
        }
        DistanceMetric::Cosine => {
            let (mut dot, mut sq_a, mut sq_q) = (0.0f64, 0.0f64, 0.0f64);
            for (a, q) in row.iter().zip(query) {
                let (a, q) = (f64::from(*a), f64::from(*q));
                dot += a * q;
                sq_a += a * a;
                sq_q += q * q;
            }
            (sq_a != 0.0 && sq_q != 0.0).then(|| 1.0 - dot / (sq_a.sqrt() * sq_q.sqrt()))
        }
    }
}

/// Distances of every row to the query.
pub(crate) fn vector_distance(args: VectorDistanceArgs<'_>) -> Result<Float64Array, EngineError> {
    crate::ops::validate::vector_distance(&args)?;
    let list = args.vectors;
    let dim = list.value_length() as usize;
    let values = list
        .values()
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(|| {
            EngineError::Internal("list values are not Float32 after validation".into())
        })?;
    let row = |i: usize| -> Option<f64> {
        if list.is_null(i) {
            return None;
        }
        let start = (list.offset() + i) * dim;
        if values
            .nulls()
            .is_some_and(|n| (start..start + dim).any(|j| n.is_null(j)))
        {
            return None;
        }
        distance(
            args.metric,
            &values.values()[start..start + dim],
            args.query,
        )
    };
    let rows = list.len();
    let out: Vec<Option<f64>> = if rows < PARALLEL_ROWS {
        (0..rows).map(row).collect()
    } else {
        (0..rows).into_par_iter().map(row).collect()
    };
    Ok(Float64Array::from(out))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::FixedSizeListArray;
    use arrow::datatypes::{DataType, Field};

    use super::*;

    fn vectors() -> FixedSizeListArray {
        let values = Float32Array::from(vec![3.0, 4.0, 0.0, 0.0, 1.0, 1.0]);
        let field = Arc::new(Field::new("item", DataType::Float32, true));
        FixedSizeListArray::new(
            field,
            2,
            Arc::new(values),
            Some(vec![true, true, false].into()),
        )
    }

    #[test]
    fn l2_is_the_euclidean_norm_of_the_difference_and_null_rows_stay_null() {
        let v = vectors();
        let d = vector_distance(VectorDistanceArgs {
            vectors: &v,
            query: &[0.0, 0.0],
            metric: DistanceMetric::L2,
        })
        .unwrap();
        assert_eq!(
            d.iter().collect::<Vec<_>>(),
            vec![Some(5.0), Some(0.0), None]
        );
    }

    #[test]
    fn cosine_of_a_zero_vector_is_null_as_in_datafusion() {
        let v = vectors();
        let d = vector_distance(VectorDistanceArgs {
            vectors: &v,
            query: &[3.0, 4.0],
            metric: DistanceMetric::Cosine,
        })
        .unwrap();
        assert!(d.value(0).abs() < 1e-12);
        assert!(d.is_null(1));
    }

    #[test]
    fn a_query_of_the_wrong_length_is_rejected() {
        let v = vectors();
        assert!(
            vector_distance(VectorDistanceArgs {
                vectors: &v,
                query: &[1.0],
                metric: DistanceMetric::L2
            })
            .is_err()
        );
    }
}
