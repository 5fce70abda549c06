//! Sessions with the placement rule and a mocked detector, and small tables.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use oxidelake_core::BackendKind;
use oxidelake_planner::{
    BackendProbe, CpuTarget, FixedProbe, HardwarePlacementRule, OxideOptions, PlacementTarget,
    explain_with_placement, physical_optimizer_rules,
};

/// A session placing for `target`, with a detector that reports `local`.
pub fn session(target: PlacementTarget, local: BackendKind) -> SessionContext {
    session_with_partitions(target, local, 2)
}

/// [`session`] with `partitions` target partitions (1 makes DataFusion plan single-mode
/// aggregates, which the whole-aggregate GPU operator takes).
pub fn session_with_partitions(
    target: PlacementTarget,
    local: BackendKind,
    partitions: usize,
) -> SessionContext {
    let options = OxideOptions {
        placement_target: target,
        ..OxideOptions::default()
    };
    let config = SessionConfig::new()
        .with_target_partitions(partitions)
        .with_option_extension(options);
    let rule = HardwarePlacementRule::new(Arc::new(FixedProbe(local)));
    let state = SessionStateBuilder::new()
        .with_default_features()
        .with_config(config)
        .with_physical_optimizer_rules(physical_optimizer_rules(rule))
        .build();
    let ctx = SessionContext::new_with_state(state);
    // What the runtime registers on every session (oxide_scalar_udfs).
    ctx.register_udf(oxidelake_compute::l2_distance_udf());
    register_tables(&ctx);
    ctx
}

fn register_tables(ctx: &SessionContext) {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let t_schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("v", DataType::FixedSizeList(Arc::clone(&item), 2), true),
    ]));
    let t = RecordBatch::try_new(
        Arc::clone(&t_schema),
        vec![
            Arc::new(Int64Array::from(vec![Some(1), Some(2), None, Some(2)])) as ArrayRef,
            Arc::new(Int64Array::from(vec![Some(10), None, Some(30), Some(40)])),
            Arc::new(Float64Array::from(vec![
                Some(1.5),
                Some(2.5),
                None,
                Some(-1.0),
            ])),
            Arc::new(StringArray::from(vec![
                Some("x"),
                None,
                Some("y"),
                Some("x"),
            ])),
            Arc::new(FixedSizeListArray::new(
                item,
                2,
                Arc::new(Float32Array::from(vec![
                    1.0, 0.0, 0.0, 1.0, 3.0, 4.0, 1.0, 1.0,
                ])),
                None,
            )),
        ],
    )
    .unwrap();
    let d_schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let d = RecordBatch::try_new(
        Arc::clone(&d_schema),
        vec![
            Arc::new(Int64Array::from(vec![Some(1), Some(2), Some(3)])) as ArrayRef,
            Arc::new(Int64Array::from(vec![Some(10), Some(20), None])),
            Arc::new(StringArray::from(vec!["one", "two", "three"])),
        ],
    )
    .unwrap();
    ctx.register_table(
        "t",
        Arc::new(MemTable::try_new(t_schema, vec![vec![t]]).unwrap()),
    )
    .unwrap();
    ctx.register_table(
        "d",
        Arc::new(MemTable::try_new(d_schema, vec![vec![d]]).unwrap()),
    )
    .unwrap();
}

pub async fn physical_plan(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    ctx.sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap()
}

/// EXPLAIN text of `sql` placed for `target` with a detector that reports `local`.
pub async fn explain(target: PlacementTarget, local: BackendKind, sql: &str) -> String {
    let ctx = session(target, local);
    let plan = physical_plan(&ctx, sql).await;
    let backend = match FixedProbe(local).resolve(target) {
        Some(kind) => Ok(kind),
        None if target == PlacementTarget::Cpu => Err(CpuTarget::Requested),
        None => Err(CpuTarget::NoGpuDetected),
    };
    explain_with_placement(&plan, backend)
}
