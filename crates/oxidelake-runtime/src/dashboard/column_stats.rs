//! Per-column statistics of a query result for the Describe panel.

use arrow::array::{Array, ArrayRef, Float64Array};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use oxidelake_tui::ColumnStats;

fn is_numeric(dt: &DataType) -> bool {
    dt.is_numeric()
}

fn format_number(v: f64, integer: bool) -> String {
    if integer {
        format!("{}", v as i64)
    } else {
        format!("{v:.2}")
    }
}

/// The value at percentile `p` (nearest rank) of sorted `values`.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn numeric_stats(name: &str, columns: &[ArrayRef], nulls: u64, integer: bool) -> ColumnStats {
    let mut values: Vec<f64> = Vec::new();
    for c in columns {
        if let Ok(cast) = arrow::compute::cast(c, &DataType::Float64)
            && let Some(f) = cast.as_any().downcast_ref::<Float64Array>()
        {
            values.extend(f.iter().flatten());
        }
    }
    values.sort_by(f64::total_cmp);
    let show = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format_number(v, integer));
    ColumnStats {
        name: name.to_string(),
        min: show(values.first().copied()),
        max: show(values.last().copied()),
        null_count: nulls,
        p25: show(percentile(&values, 25.0)),
        p50: show(percentile(&values, 50.0)),
        p99: show(percentile(&values, 99.0)),
    }
}

fn text_stats(name: &str, columns: &[ArrayRef], nulls: u64) -> ColumnStats {
    let options = FormatOptions::default();
    let mut min: Option<String> = None;
    let mut max: Option<String> = None;
    for c in columns {
        let Ok(formatter) = ArrayFormatter::try_new(c.as_ref(), &options) else {
            continue;
        };
        for row in 0..c.len() {
            if c.is_null(row) {
                continue;
            }
            let v = formatter.value(row).to_string();
            if min.as_ref().is_none_or(|m| v < *m) {
                min = Some(v.clone());
            }
            if max.as_ref().is_none_or(|m| v > *m) {
                max = Some(v);
            }
        }
    }
    ColumnStats {
        name: name.to_string(),
        min: min.unwrap_or_else(|| "-".into()),
        max: max.unwrap_or_else(|| "-".into()),
        null_count: nulls,
        p25: "-".into(),
        p50: "-".into(),
        p99: "-".into(),
    }
}

/// Min, max, NULL count and (for numeric columns) P25/P50/P99 of every column.
pub(crate) fn column_stats(batches: &[RecordBatch]) -> Vec<ColumnStats> {
    let Some(first) = batches.first() else {
        return Vec::new();
    };
    let schema = first.schema();
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let columns: Vec<ArrayRef> = batches.iter().map(|b| b.column(i).clone()).collect();
            let nulls = columns.iter().map(|c| c.null_count() as u64).sum();
            if is_numeric(field.data_type()) {
                let integer = field.data_type().is_integer();
                numeric_stats(field.name(), &columns, nulls, integer)
            } else {
                text_stats(field.name(), &columns, nulls)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    #[test]
    fn numeric_columns_get_percentiles_and_text_columns_min_and_max() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter(
                    (1..=100).map(|i| (i != 50).then_some(i)),
                )),
                Arc::new(StringArray::from_iter(
                    (1..=100).map(|i| Some(format!("v{:03}", i))),
                )),
            ],
        )
        .unwrap();
        let stats = column_stats(&[batch]);
        assert_eq!(
            (
                stats[0].min.as_str(),
                stats[0].max.as_str(),
                stats[0].null_count
            ),
            ("1", "100", 1)
        );
        assert_eq!(
            (
                stats[0].p25.as_str(),
                stats[0].p50.as_str(),
                stats[0].p99.as_str()
            ),
            ("25", "51", "100")
        );
        assert_eq!(
            (stats[1].min.as_str(), stats[1].max.as_str()),
            ("v001", "v100")
        );
        assert_eq!(stats[1].p50, "-");
    }
}
