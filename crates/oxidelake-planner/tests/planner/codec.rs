//! `OxidePhysicalCodec` round trips every GPU node.

use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::physical_plan::{ExecutionPlan, displayable};
use datafusion_proto::physical_plan::AsExecutionPlan;
use datafusion_proto::protobuf::PhysicalPlanNode;
use oxidelake_core::BackendKind;
use oxidelake_planner::{OxidePhysicalCodec, PlacementTarget};

use super::fixtures::{physical_plan, session, session_with_partitions};

fn gpu_nodes(plan: &Arc<dyn ExecutionPlan>) -> Vec<String> {
    let mut names = Vec::new();
    plan.apply(|node| {
        if node.name().starts_with("Gpu") {
            names.push(node.name().to_string());
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    names
}

#[tokio::test]
async fn every_gpu_node_survives_encode_and_decode_with_identical_explain_and_schema() {
    // (query, the node it must hold, target partitions)
    let cases = [
        (
            "SELECT k, a FROM t WHERE a < 500 AND b >= 1.0",
            "GpuFilterExec",
            2,
        ),
        (
            "SELECT k FROM t WHERE (s LIKE '%x%' OR s IN ('a', 'b')) AND NOT (a IS NULL) \
             AND a != k AND b <> 2.5",
            "GpuFilterExec",
            2,
        ),
        (
            "SELECT t.a, d.name FROM t JOIN d ON t.k = d.k",
            "GpuHashJoinExec",
            2,
        ),
        (
            // Two keys (numbered on the host) and a join filter, whose expression travels
            // as DataFusion protobuf inside the payload.
            "SELECT t.b, d.name FROM t JOIN d ON t.k = d.k AND t.s = d.name AND t.a + 1 > d.a",
            "GpuHashJoinExec",
            2,
        ),
        (
            "SELECT t.k FROM t WHERE NOT EXISTS (SELECT 1 FROM d WHERE d.k = t.k AND d.a < t.a)",
            "GpuHashJoinExec",
            2,
        ),
        (
            // One partition: DataFusion plans a final directly over the partial.
            "SELECT SUM(a), COUNT(*), MIN(b) FROM t",
            "GpuPartialAggregateExec",
            1,
        ),
        (
            "SELECT k, SUM(a) AS s, COUNT(a), MIN(b), MAX(b) FROM t GROUP BY k",
            "GpuPartialAggregateExec",
            2,
        ),
        (
            // String and composite keys, COUNT(*), AVG over a cast, and the cast's type
            // travelling as text.
            "SELECT s, k, COUNT(*), AVG(a), SUM(b) FROM t GROUP BY s, k",
            "GpuPartialAggregateExec",
            2,
        ),
        (
            "SELECT k, array_distance(v, [1.0, 0.0]) AS dist FROM t",
            "GpuVectorDistanceExec",
            2,
        ),
        (
            // The expressions travel as DataFusion protobuf and are translated again.
            "SELECT k, a * 3 - k AS x, -b * 0.5 AS y FROM t",
            "GpuProjectionExec",
            2,
        ),
        (
            // A filter comparing a computed column, over the projection computing it.
            "SELECT k FROM t WHERE a * 2 + k > 10",
            "GpuProjectionExec",
            2,
        ),
    ];
    let codec = OxidePhysicalCodec::default();
    for (sql, node, partitions) in cases {
        let ctx = session_with_partitions(PlacementTarget::Cuda, BackendKind::CpuSimd, partitions);
        let plan = physical_plan(&ctx, sql).await;
        assert!(
            gpu_nodes(&plan).contains(&node.to_string()),
            "{sql}: {:?}",
            gpu_nodes(&plan)
        );
        let proto = PhysicalPlanNode::try_from_physical_plan(Arc::clone(&plan), &codec).unwrap();
        let mut bytes: Vec<u8> = Vec::new();
        proto.try_encode(&mut bytes).unwrap();
        let decoded = PhysicalPlanNode::try_decode(&bytes)
            .unwrap()
            .try_into_physical_plan(&ctx.task_ctx(), &codec)
            .unwrap();
        assert_eq!(gpu_nodes(&decoded), gpu_nodes(&plan), "{sql}");
        assert_eq!(
            displayable(decoded.as_ref()).indent(true).to_string(),
            displayable(plan.as_ref()).indent(true).to_string(),
            "{sql}"
        );
        assert_eq!(decoded.schema(), plan.schema(), "{sql}");
        let original = datafusion::physical_plan::collect(plan, ctx.task_ctx())
            .await
            .unwrap();
        let round_tripped = datafusion::physical_plan::collect(decoded, ctx.task_ctx())
            .await
            .unwrap();
        // Rows compared in order-independent form: two partitions merge in arrival order.
        assert_eq!(
            super::partial_aggregate::sorted_rows(&original),
            super::partial_aggregate::sorted_rows(&round_tripped),
            "{sql}"
        );
    }
}

#[tokio::test]
async fn the_checked_sums_state_with_its_wrap_count_survives_encode_and_decode() {
    let codec = OxidePhysicalCodec::default();
    let ctx = session(PlacementTarget::Cuda, BackendKind::CpuSimd);
    // What the runtime registers on every session (oxide_aggregate_udfs): its state over
    // integers is the wrapped sum and a wrap count; over floats DataFusion's sum alone.
    ctx.register_udaf(oxidelake_compute::checked_sum_udaf().as_ref().clone());
    let sql = "SELECT k, SUM(a), SUM(b), COUNT(*) FROM t GROUP BY k";
    let plan = physical_plan(&ctx, sql).await;
    let text = displayable(plan.as_ref()).indent(true).to_string();
    assert!(
        text.contains("GpuPartialAggregateExec")
            && text.contains("sum(t.a)[sum], sum(t.a)[wraps]")
            && !text.contains("sum(t.b)[wraps]"),
        "{text}"
    );
    let proto = PhysicalPlanNode::try_from_physical_plan(Arc::clone(&plan), &codec).unwrap();
    let mut bytes: Vec<u8> = Vec::new();
    proto.try_encode(&mut bytes).unwrap();
    let decoded = PhysicalPlanNode::try_decode(&bytes)
        .unwrap()
        .try_into_physical_plan(&ctx.task_ctx(), &codec)
        .unwrap();
    assert_eq!(displayable(decoded.as_ref()).indent(true).to_string(), text);
    assert_eq!(decoded.schema(), plan.schema());
    let original = datafusion::physical_plan::collect(plan, ctx.task_ctx())
        .await
        .unwrap();
    let round_tripped = datafusion::physical_plan::collect(decoded, ctx.task_ctx())
        .await
        .unwrap();
    assert_eq!(
        super::partial_aggregate::sorted_rows(&original),
        super::partial_aggregate::sorted_rows(&round_tripped)
    );
}

#[tokio::test]
async fn a_truncated_payload_is_an_error_not_a_panic() {
    use datafusion_proto::physical_plan::PhysicalExtensionCodec;
    let ctx = session(PlacementTarget::Cuda, BackendKind::CpuSimd);
    let plan = physical_plan(&ctx, "SELECT k, a FROM t WHERE a < 500").await;
    let mut filter = None;
    plan.apply(|node| {
        if node.name() == "GpuFilterExec" {
            filter = Some(Arc::clone(node));
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    let filter = filter.unwrap();
    let codec = OxidePhysicalCodec::default();
    let converter = datafusion_proto::physical_plan::DefaultPhysicalProtoConverter {};
    let mut buf = Vec::new();
    codec
        .try_encode(Arc::clone(&filter), &mut buf, &converter)
        .unwrap();
    let inputs = filter.children().into_iter().cloned().collect::<Vec<_>>();
    for cut in [7, buf.len() - 1] {
        assert!(
            codec
                .try_decode(&buf[..cut], &inputs, &ctx.task_ctx(), &converter)
                .is_err()
        );
    }
}

/// The transition nodes of ADR-0014 a plan holds, in plan order.
fn transitions(plan: &Arc<dyn ExecutionPlan>) -> Vec<String> {
    let mut names = Vec::new();
    plan.apply(|node| {
        if matches!(node.name(), "HostToDeviceExec" | "DeviceToHostExec") {
            names.push(node.name().to_string());
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    names
}

#[tokio::test]
async fn device_transitions_survive_encode_and_decode_and_the_plan_keeps_its_rows() {
    use datafusion::physical_optimizer::PhysicalOptimizerRule;
    // Placed for cuda, the GPU operators get their transitions (ADR-0014): no option.
    let ctx = session(PlacementTarget::Cuda, BackendKind::CpuSimd);
    let codec = OxidePhysicalCodec::default();
    for sql in [
        "SELECT k, SUM(a), COUNT(*) FROM t WHERE a < 500 GROUP BY k",
        "SELECT t.a, d.name FROM t JOIN d ON t.k = d.k WHERE t.a > 10",
    ] {
        let placed = physical_plan(&ctx, sql).await;
        let plan = oxidelake_planner::DeviceTransitionRule
            .optimize(placed, ctx.state().config_options())
            .unwrap();
        let names = transitions(&plan);
        assert!(
            names.iter().any(|n| n == "HostToDeviceExec")
                && names.iter().any(|n| n == "DeviceToHostExec"),
            "{sql}: {names:?}"
        );
        let proto = PhysicalPlanNode::try_from_physical_plan(Arc::clone(&plan), &codec).unwrap();
        let mut bytes: Vec<u8> = Vec::new();
        proto.try_encode(&mut bytes).unwrap();
        let decoded = PhysicalPlanNode::try_decode(&bytes)
            .unwrap()
            .try_into_physical_plan(&ctx.task_ctx(), &codec)
            .unwrap();
        assert_eq!(transitions(&decoded), names, "{sql}");
        assert_eq!(
            displayable(decoded.as_ref()).indent(true).to_string(),
            displayable(plan.as_ref()).indent(true).to_string(),
            "{sql}"
        );
        let original = datafusion::physical_plan::collect(plan, ctx.task_ctx())
            .await
            .unwrap();
        let round_tripped = datafusion::physical_plan::collect(decoded, ctx.task_ctx())
            .await
            .unwrap();
        assert_eq!(
            super::partial_aggregate::sorted_rows(&original),
            super::partial_aggregate::sorted_rows(&round_tripped),
            "{sql}"
        );
    }
}
