//! `KeySetExpr`: "the probe key is one of the build side's keys", for build sides too
//! large to list in the plan.
//!
//! Why not an `IN (...)` list: a list expression has one literal child per key, and
//! every rewrite of the expression (each scan's file open maps its columns, simplifies
//! it, derives pruning predicates and literal guarantees from it) walks all of them. With
//! 57,000 keys (TPC-H Q10's orders) that cost the lineitem and customer scans 100 ms each
//! to open, more than the join they fed. DataFusion's own join lists at most
//! `datafusion.optimizer.hash_join_inlist_pushdown_max_distinct_values` keys and past
//! that probes its hash table (`HashTableLookupExpr`), an expression whose only child
//! is the key column. This is the same for our joins: the keys sit in one hash set
//! behind a leaf expression; scans cannot prune row groups with it (they could not with
//! a long list either) but filter rows with it at the cost of one set lookup per row.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::error::Result;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, InListExpr};

/// `probe IN (keys)` over a set built once, with the probe as its only child.
#[derive(Debug)]
pub(crate) struct KeySetExpr {
    probe: Arc<dyn PhysicalExpr>,
    /// The set, as a list expression over column 0 of `key_schema` (its evaluation is a
    /// hash-set lookup per row); shared by every rewrite of this expression.
    set: Arc<InListExpr>,
    key_schema: SchemaRef,
    keys: usize,
}

impl KeySetExpr {
    /// The set of `keys` (nulls never match), probed by `probe` evaluated over batches
    /// of `probe_schema`. Fails where the probe's type differs from the keys'.
    pub(crate) fn try_new(
        probe: Arc<dyn PhysicalExpr>,
        keys: ArrayRef,
        probe_schema: &Schema,
    ) -> Result<Self> {
        let key_type: DataType = probe.data_type(probe_schema)?;
        let key_schema = Arc::new(Schema::new(vec![Field::new("key", key_type, true)]));
        // A null build key matches no probe row; left in, it would turn every miss
        // into NULL (SQL's `x IN (.., NULL)`) instead of false.
        let keys = match keys.logical_nulls() {
            Some(nulls) if nulls.null_count() > 0 => {
                let valid = arrow::array::BooleanArray::new(nulls.inner().clone(), None);
                arrow::compute::filter(&keys, &valid)?
            }
            _ => keys,
        };
        let count = keys.len();
        let set = InListExpr::try_new_from_array(
            Arc::new(Column::new("key", 0)),
            keys,
            false,
            &key_schema,
        )?;
        Ok(Self {
            probe,
            set: Arc::new(set),
            key_schema,
            keys: count,
        })
    }
}

impl fmt::Display for KeySetExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} IN (SET) <{} build keys>", self.probe, self.keys)
    }
}

impl PartialEq for KeySetExpr {
    /// The same probe and the same set (compared by identity: two joins never share one,
    /// and comparing the keys would cost what the set spares).
    fn eq(&self, other: &Self) -> bool {
        self.probe.as_ref() == other.probe.as_ref() && Arc::ptr_eq(&self.set, &other.set)
    }
}

impl Eq for KeySetExpr {}

impl Hash for KeySetExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.probe.dyn_hash(state);
        Arc::as_ptr(&self.set).hash(state);
    }
}

impl PhysicalExpr for KeySetExpr {
    fn data_type(&self, _input_schema: &Schema) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn nullable(&self, input_schema: &Schema) -> Result<bool> {
        self.probe.nullable(input_schema)
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<ColumnarValue> {
        let probe = self.probe.evaluate(batch)?.into_array(batch.num_rows())?;
        let keys = RecordBatch::try_new(Arc::clone(&self.key_schema), vec![probe])?;
        self.set.evaluate(&keys)
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.probe]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        let probe = children.into_iter().next().ok_or_else(|| {
            datafusion::error::DataFusionError::Internal(
                "a key set takes exactly one child (the probe key)".into(),
            )
        })?;
        Ok(Arc::new(Self {
            probe,
            set: Arc::clone(&self.set),
            key_schema: Arc::clone(&self.key_schema),
            keys: self.keys,
        }))
    }

    fn fmt_sql(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.probe.fmt_sql(f)?;
        write!(f, " IN (<{} build keys>)", self.keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use datafusion::common::tree_node::TreeNode;

    fn probe_batch(values: Vec<Option<i64>>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("other", DataType::Int64, true),
            Field::new("k", DataType::Int64, true),
        ]));
        let k: ArrayRef = Arc::new(Int64Array::from(values.clone()));
        let other: ArrayRef = Arc::new(Int64Array::from(vec![0; values.len()]));
        RecordBatch::try_new(schema, vec![other, k]).unwrap()
    }

    fn kept(expr: &dyn PhysicalExpr, batch: &RecordBatch) -> Vec<Option<bool>> {
        let mask = expr
            .evaluate(batch)
            .unwrap()
            .into_array(batch.num_rows())
            .unwrap();
        mask.as_boolean().iter().collect()
    }

    #[test]
    fn a_key_set_keeps_the_probe_rows_whose_key_a_build_row_holds() {
        let batch = probe_batch(vec![Some(1), Some(2), None, Some(7)]);
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![Some(7), None, Some(1)]));
        let set =
            KeySetExpr::try_new(Arc::new(Column::new("k", 1)), keys, &batch.schema()).unwrap();
        assert_eq!(
            kept(&set, &batch),
            vec![Some(true), Some(false), None, Some(true)]
        );
    }

    #[test]
    fn a_rewritten_key_set_probes_its_new_column_with_the_same_keys_and_one_child() {
        let batch = probe_batch(vec![Some(5), Some(6)]);
        let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(0..100_000));
        let set: Arc<dyn PhysicalExpr> = Arc::new(
            KeySetExpr::try_new(Arc::new(Column::new("k", 1)), keys, &batch.schema()).unwrap(),
        );
        assert_eq!(set.children().len(), 1, "the keys are no children to walk");
        // A scan maps the probe column to its file's column: here column 0 ("other", all 0).
        let moved = set
            .transform(|e| {
                Ok(match e.downcast_ref::<Column>() {
                    Some(_) => datafusion::common::tree_node::Transformed::yes(Arc::new(
                        Column::new("other", 0),
                    )
                        as Arc<dyn PhysicalExpr>),
                    None => datafusion::common::tree_node::Transformed::no(e),
                })
            })
            .unwrap()
            .data;
        assert_eq!(kept(moved.as_ref(), &batch), vec![Some(true), Some(true)]);
        assert!(moved.to_string().contains("<100000 build keys>"));
    }

    #[test]
    fn a_key_set_of_another_type_than_its_probe_is_refused() {
        let batch = probe_batch(vec![Some(1)]);
        let keys: ArrayRef = Arc::new(arrow::array::StringArray::from(vec!["a"]));
        assert!(KeySetExpr::try_new(Arc::new(Column::new("k", 1)), keys, &batch.schema()).is_err());
    }
}
