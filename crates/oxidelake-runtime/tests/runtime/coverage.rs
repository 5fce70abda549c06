//! GPU placement coverage of TPC-H: for each of the 22 queries at SF 0.1, placed for
//! CUDA, how many filters, joins, aggregates and computed projections became GPU
//! operators, and why the rest
//! stayed on the CPU. Prints the report that docs/placement-coverage.md records, and
//! fails if coverage falls below what it was when that page was written.

use oxidelake_core::BackendKind;
use oxidelake_planner::{OperatorFamily, PlacementCoverage};
use oxidelake_runtime::cli::tpch::tpch_query;

use super::data::tpch_lake;

/// The totals measured when docs/placement-coverage.md was last written (placed).
const FLOOR: [(OperatorFamily, usize); 4] = [
    (OperatorFamily::Filter, 43),
    // 62 until left semi, anti and outer joins stopped running swapped onto their larger
    // input (docs/placement-coverage.md, twenty-second session).
    (OperatorFamily::Join, 54),
    (OperatorFamily::Aggregate, 29),
    (OperatorFamily::Projection, 16),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_placement_coverage_for_cuda_is_reported_per_query_with_reasons() {
    let (_dir, session) = tpch_lake(0.1).await;
    let mut total = PlacementCoverage::default();
    let mut computed_arguments = Vec::new();
    let mut report = String::from(
        "| query | filters | joins | aggregates | computed projections |\n|---|---|---|---|---|\n",
    );
    for query in 1..=22 {
        let statements = tpch_query(query, 0.1).unwrap();
        // Q15 is create view / query / drop view: plan the query with the view present.
        let (setup, rest) = if statements.len() == 3 {
            (Some(&statements[0]), &statements[1..2])
        } else {
            (None, &statements[..1])
        };
        if let Some(sql) = setup {
            session.sql(sql).await.unwrap();
        }
        let plan = session.physical_plan(&rest[0]).await.unwrap();
        let coverage = PlacementCoverage::of(&plan, BackendKind::Cuda);
        if device_partials_over_a_cpu_projection(&plan) > 0 {
            computed_arguments.push(format!("Q{query}"));
        }
        let cell = |f| {
            let (p, t) = coverage.get(f);
            format!("{p}/{t}")
        };
        report.push_str(&format!(
            "| Q{query} | {} | {} | {} | {} |\n",
            cell(OperatorFamily::Filter),
            cell(OperatorFamily::Join),
            cell(OperatorFamily::Aggregate),
            cell(OperatorFamily::Projection)
        ));
        total.add(&coverage);
        if setup.is_some() {
            session.sql(&statements[2]).await.unwrap();
        }
    }
    let pct = |f| {
        let (p, t) = total.get(f);
        format!("{p}/{t} ({:.0} %)", 100.0 * p as f64 / t.max(1) as f64)
    };
    report.push_str(&format!(
        "| **all 22** | {} | {} | {} | {} |\n\nWhy the others stayed on the CPU:\n\n| operator | reason | count |\n|---|---|---|\n",
        pct(OperatorFamily::Filter),
        pct(OperatorFamily::Join),
        pct(OperatorFamily::Aggregate),
        pct(OperatorFamily::Projection)
    ));
    let mut reasons: Vec<_> = total.reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for ((family, reason), n) in reasons {
        report.push_str(&format!(
            "| {} | {} | {n} |\n",
            family.name(),
            reason.replace('|', "\\|")
        ));
    }
    report.push_str(&format!(
        "\nPlaced aggregates whose arguments a CPU projection computes: {}\n",
        computed_arguments.join(", ")
    ));
    println!("placement coverage (TPC-H SF 0.1, --placement cuda):\n\n{report}");
    for (family, floor) in FLOOR {
        let (placed, _) = total.get(family);
        assert!(
            placed >= floor,
            "{} placed fell to {placed} (was {floor})\n{report}",
            family.name()
        );
    }
}

/// Device partial aggregates reading a stock projection that computes aggregate
/// arguments on the CPU (the `__oxide_agg_arg_` columns the placement rule adds; a
/// GpuProjectionExec computing them does not count).
fn device_partials_over_a_cpu_projection(
    plan: &std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) -> usize {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    let mut n = 0;
    plan.apply(|node| {
        if node.name() == "GpuPartialAggregateExec"
            && node.children().iter().any(|c| {
                c.name() == "ProjectionExec"
                    && c.schema()
                        .fields()
                        .iter()
                        .any(|f| f.name().starts_with("__oxide_agg_arg_"))
            })
        {
            n += 1;
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    n
}
