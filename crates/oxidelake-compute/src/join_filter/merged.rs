//! A Partitioned-mode join's dynamic filter without its routing hash.
//!
//! DataFusion fills a Partitioned-mode hash join's filter with
//! `CASE hash(keys) % n WHEN 0 THEN f0 WHEN 1 THEN f1 … ELSE false END`: each probe row
//! is checked against the build partition the repartition will route it to. Evaluating
//! that hashes every row and splits each batch by branch. On TPC-H Q17 (lineitem's 6
//! million rows against 204 part keys in two partitions) it took 188 ms, more than the
//! scan under it.
//!
//! When every branch is a conjunction of key bounds (`k >= lo`, `k <= hi`) and key lists
//! (`k IN (…)`), the merged filter `k >= min(lo) AND k <= max(hi) AND k IN (every list)`
//! keeps the same rows without the hash: a key lies in partition p's list only if it
//! routes to p (both sides are partitioned by the same hash), so the union of the lists
//! keeps exactly the rows some branch keeps, and the merged bounds only widen. A
//! constraint that not every branch has is left out (the result keeps more rows, never
//! fewer). A branch with anything else (a hash-table lookup, our joins' key sets) or an
//! `ELSE` other than false leaves the filter as it is.

use std::sync::Arc;

use arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, CaseExpr, InListExpr, Literal, lit};
use datafusion::physical_expr::{PhysicalExpr, conjunction, split_conjunction};

/// What the branches say about one key expression.
struct Subject {
    expr: Arc<dyn PhysicalExpr>,
    lows: Vec<ScalarValue>,
    highs: Vec<ScalarValue>,
    lists: Vec<Arc<dyn PhysicalExpr>>,
    /// Branches that listed this key.
    listed: usize,
}

fn is_false(expr: &Arc<dyn PhysicalExpr>) -> bool {
    expr.downcast_ref::<Literal>()
        .is_some_and(|l| l.value() == &ScalarValue::Boolean(Some(false)))
}

/// `filter` without its routing `CASE` (module docs), or `None` when it is not of that
/// form. `schema` is the schema of the batches the filter is evaluated on.
pub(super) fn merged(
    filter: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
) -> Option<Arc<dyn PhysicalExpr>> {
    let case = filter.downcast_ref::<CaseExpr>()?;
    case.expr()?;
    if case.else_expr().is_some_and(|e| !is_false(e)) {
        return None;
    }
    let branches: Vec<&Arc<dyn PhysicalExpr>> = case
        .when_then_expr()
        .iter()
        .map(|(_, then)| then)
        .filter(|then| !is_false(then))
        .collect();
    if branches.is_empty() {
        return Some(lit(false));
    }
    let mut subjects: Vec<Subject> = Vec::new();
    let mut subject = |expr: &Arc<dyn PhysicalExpr>| -> usize {
        match subjects
            .iter()
            .position(|s| s.expr.as_ref() == expr.as_ref())
        {
            Some(i) => i,
            None => {
                subjects.push(Subject {
                    expr: Arc::clone(expr),
                    lows: Vec::new(),
                    highs: Vec::new(),
                    lists: Vec::new(),
                    listed: 0,
                });
                subjects.len() - 1
            }
        }
    };
    let mut parts_of: Vec<(usize, Part)> = Vec::new();
    for branch in &branches {
        for part in split_conjunction(branch) {
            if let Some(binary) = part.downcast_ref::<BinaryExpr>() {
                let value = binary.right().downcast_ref::<Literal>()?.value().clone();
                let bound = match binary.op() {
                    Operator::GtEq => Part::Low(value),
                    Operator::LtEq => Part::High(value),
                    _ => return None,
                };
                parts_of.push((subject(binary.left()), bound));
            } else if let Some(list) = part.downcast_ref::<InListExpr>() {
                let constant = list
                    .list()
                    .iter()
                    .all(|e| e.downcast_ref::<Literal>().is_some());
                if list.negated() || !constant {
                    return None;
                }
                parts_of.push((subject(list.expr()), Part::List(list.list().to_vec())));
            } else {
                return None;
            }
        }
    }
    for (i, part) in parts_of {
        let s = &mut subjects[i];
        match part {
            Part::Low(v) => s.lows.push(v),
            Part::High(v) => s.highs.push(v),
            Part::List(items) => {
                s.listed += 1;
                s.lists.extend(items);
            }
        }
    }
    let every = branches.len();
    let mut parts: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
    for s in subjects {
        if s.lows.len() == every {
            let low = s
                .lows
                .into_iter()
                .reduce(|a, b| if b < a { b } else { a })?;
            parts.push(Arc::new(BinaryExpr::new(
                Arc::clone(&s.expr),
                Operator::GtEq,
                lit(low),
            )));
        }
        if s.highs.len() == every {
            let high = s
                .highs
                .into_iter()
                .reduce(|a, b| if b > a { b } else { a })?;
            parts.push(Arc::new(BinaryExpr::new(
                Arc::clone(&s.expr),
                Operator::LtEq,
                lit(high),
            )));
        }
        if s.listed == every {
            parts.push(Arc::new(
                InListExpr::try_new(Arc::clone(&s.expr), s.lists, false, schema).ok()?,
            ));
        }
    }
    (!parts.is_empty()).then(|| conjunction(parts))
}

/// One conjunct of a branch.
enum Part {
    Low(ScalarValue),
    High(ScalarValue),
    List(Vec<Arc<dyn PhysicalExpr>>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field};
    use arrow::record_batch::RecordBatch;
    use datafusion::common::tree_node::TreeNode;
    use datafusion::physical_expr::expressions::Column;

    fn schema() -> Arc<Schema> {
        Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]))
    }

    fn k() -> Arc<dyn PhysicalExpr> {
        Arc::new(Column::new("k", 0))
    }

    /// `k >= lo AND k <= hi AND k IN (keys)`, one partition's branch.
    fn branch(keys: &[i64]) -> Arc<dyn PhysicalExpr> {
        let values: Vec<Arc<dyn PhysicalExpr>> = keys.iter().map(|v| lit(*v)).collect();
        let lo = *keys.iter().min().unwrap();
        let hi = *keys.iter().max().unwrap();
        conjunction(vec![
            Arc::new(BinaryExpr::new(k(), Operator::GtEq, lit(lo))) as Arc<dyn PhysicalExpr>,
            Arc::new(BinaryExpr::new(k(), Operator::LtEq, lit(hi))),
            Arc::new(InListExpr::try_new(k(), values, false, &schema()).unwrap()),
        ])
    }

    /// The routing CASE: here `k % 2` stands for the hash (even keys in partition 0).
    fn routed(branches: Vec<Arc<dyn PhysicalExpr>>, otherwise: bool) -> Arc<dyn PhysicalExpr> {
        let route = Arc::new(BinaryExpr::new(k(), Operator::Modulo, lit(2i64)));
        let when_then = branches
            .into_iter()
            .enumerate()
            .map(|(i, b)| (lit(i as i64), b))
            .collect();
        Arc::new(CaseExpr::try_new(Some(route), when_then, Some(lit(otherwise))).unwrap())
    }

    fn kept(filter: &Arc<dyn PhysicalExpr>, keys: &[Option<i64>]) -> Vec<i64> {
        let column: ArrayRef = Arc::new(Int64Array::from(keys.to_vec()));
        let batch = RecordBatch::try_new(schema(), vec![Arc::clone(&column)]).unwrap();
        let mask = filter
            .evaluate(&batch)
            .unwrap()
            .into_array(keys.len())
            .unwrap();
        let mask = mask.as_boolean();
        (0..keys.len())
            .filter(|i| mask.is_valid(*i) && mask.value(*i))
            .filter_map(|i| keys[i])
            .collect()
    }

    #[test]
    fn routed_key_lists_merge_into_one_list_that_keeps_the_same_rows_without_the_case() {
        let filter = routed(vec![branch(&[4, 10, 2]), branch(&[7, 3])], false);
        let merged = merged(&filter, &schema()).expect("key lists merge");
        let has_case = merged
            .exists(|e| Ok(e.downcast_ref::<CaseExpr>().is_some()))
            .unwrap();
        assert!(!has_case, "{merged}");
        let probe: Vec<Option<i64>> = (0..14).map(Some).chain([None]).collect();
        assert_eq!(kept(&merged, &probe), kept(&filter, &probe));
        assert_eq!(kept(&merged, &probe), vec![2, 3, 4, 7, 10]);
    }

    #[test]
    fn a_branch_without_a_key_list_keeps_the_merged_range_only() {
        let range_only = conjunction(vec![
            Arc::new(BinaryExpr::new(k(), Operator::GtEq, lit(20i64))) as Arc<dyn PhysicalExpr>,
            Arc::new(BinaryExpr::new(k(), Operator::LtEq, lit(30i64))),
        ]);
        let filter = routed(vec![branch(&[4, 2]), range_only], false);
        let merged = merged(&filter, &schema()).unwrap();
        assert_eq!(
            kept(&merged, &[Some(1), Some(2), Some(25), Some(31)]),
            vec![2, 25]
        );
    }

    #[test]
    fn other_branches_or_an_else_that_keeps_rows_leave_the_filter_alone() {
        assert!(merged(&routed(vec![branch(&[2])], true), &schema()).is_none());
        let other: Arc<dyn PhysicalExpr> =
            Arc::new(BinaryExpr::new(k(), Operator::NotEq, lit(5i64)));
        assert!(merged(&routed(vec![branch(&[2]), other], false), &schema()).is_none());
        assert!(merged(&k(), &schema()).is_none(), "not a CASE");
    }
}
