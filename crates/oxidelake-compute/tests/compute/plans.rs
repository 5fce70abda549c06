//! Plans built from SQL for the operator tests.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::MemTable;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::prelude::SessionContext;
use oxidelake_compute::{BackendChoice, DeviceToHostExec, GpuProjectionExec, HostToDeviceExec};
use oxidelake_core::BackendKind;
use oxidelake_device::CpuBackend;

/// The CPU backend, fixed (the reference every device run is compared with).
pub fn cpu() -> BackendChoice {
    BackendChoice::Fixed(Arc::new(CpuBackend::new()))
}

/// `input` uploaded to `backend` by a transition placed for cuda.
pub fn upload(input: Arc<dyn ExecutionPlan>, backend: &BackendChoice) -> Arc<dyn ExecutionPlan> {
    Arc::new(HostToDeviceExec::new(input, BackendKind::Cuda).with_backend(backend.clone()))
}

/// `input`'s device batches copied back by a transition placed for cuda.
pub fn download(input: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    Arc::new(DeviceToHostExec::new(Arc::clone(input), BackendKind::Cuda))
}

/// `SELECT {select}` over `input` as a `GpuProjectionExec` placed for cuda on `backend`:
/// DataFusion plans the select list over a table of `input`'s schema (so the
/// expressions carry its types and casts), and its projection is rebuilt over `input`,
/// each column found again by name (the planned scan reads only the columns named).
pub async fn gpu_projection(
    input: Arc<dyn ExecutionPlan>,
    select: &str,
    backend: BackendChoice,
) -> Arc<dyn ExecutionPlan> {
    let ctx = SessionContext::new();
    let table = MemTable::try_new(input.schema(), vec![vec![]]).unwrap();
    ctx.register_table("t", Arc::new(table)).unwrap();
    let plan = ctx
        .sql(&format!("SELECT {select} FROM t"))
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let mut exprs = None;
    plan.apply(|node| {
        if let Some(p) = node.downcast_ref::<ProjectionExec>() {
            exprs = Some(p.expr().to_vec());
        }
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    })
    .unwrap();
    let schema = input.schema();
    let exprs = exprs
        .unwrap_or_else(|| panic!("no projection in the plan of {select}"))
        .into_iter()
        .map(|mut p| {
            p.expr = Arc::clone(&p.expr)
                .transform(|e| match e.downcast_ref::<Column>() {
                    Some(c) => {
                        let at = schema.index_of(c.name()).unwrap();
                        Ok(Transformed::yes(
                            Arc::new(Column::new(c.name(), at)) as Arc<dyn PhysicalExpr>
                        ))
                    }
                    None => Ok(Transformed::no(e)),
                })
                .unwrap()
                .data;
            p
        })
        .collect();
    Arc::new(
        GpuProjectionExec::try_new(exprs, input, BackendKind::Cuda)
            .unwrap()
            .with_backend(backend),
    )
}
