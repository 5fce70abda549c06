//! `GpuVectorDistanceExec`: appends the distance of a vector column to a query vector.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, ArrayRef, FixedSizeListArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::ops::{DistanceMetric, VectorDistanceArgs};

use crate::exec_support::{BackendChoice, ExecBackend, OperatorMetrics, single_child};
use crate::placement_label;
use crate::segment::{SegmentBatch, each_batch, host_items, host_stream};

/// Outputs every input column plus a nullable Float64 column with the L2 or cosine
/// distance between a `FixedSizeList<Float32>` column and a query vector.
#[derive(Debug)]
pub struct GpuVectorDistanceExec {
    input: Arc<dyn ExecutionPlan>,
    column: usize,
    query: Vec<f32>,
    metric: DistanceMetric,
    output_name: String,
    placement: BackendKind,
    backend: BackendChoice,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl GpuVectorDistanceExec {
    /// Distances of `input`'s column `column` to `query`, output as `output_name`.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        column: usize,
        query: Vec<f32>,
        metric: DistanceMetric,
        output_name: impl Into<String>,
        placement: BackendKind,
    ) -> Result<Self> {
        let input_schema = input.schema();
        let field = input_schema
            .fields()
            .get(column)
            .ok_or_else(|| DataFusionError::Plan(format!("vector column {column} out of range")))?;
        match field.data_type() {
            DataType::FixedSizeList(item, dim) if item.data_type() == &DataType::Float32 => {
                if usize::try_from(*dim).ok() != Some(query.len()) {
                    return Err(DataFusionError::Plan(format!(
                        "query vector has {} elements but {} holds vectors of {dim}",
                        query.len(),
                        field.name()
                    )));
                }
            }
            other => {
                return Err(EngineError::unsupported(
                    "GpuVectorDistanceExec input",
                    format!(
                        "{} is {other}; only FixedSizeList<Float32> is covered",
                        field.name()
                    ),
                )
                .into());
            }
        }
        let output_name = output_name.into();
        let mut fields: Vec<Arc<Field>> = input_schema.fields().iter().cloned().collect();
        fields.push(Arc::new(Field::new(&output_name, DataType::Float64, true)));
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            input_schema.metadata().clone(),
        ));
        let ip = input.properties();
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            ip.output_partitioning().clone(),
            ip.emission_type,
            ip.boundedness,
        );
        Ok(Self {
            input,
            column,
            query,
            metric,
            output_name,
            placement,
            backend: BackendChoice::Detect,
            schema,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// Runs on `backend` instead of asking the hardware detector at execute time.
    pub fn with_backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }

    /// The input plan.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// Index of the vector column.
    pub fn column(&self) -> usize {
        self.column
    }

    /// The query vector.
    pub fn query(&self) -> &[f32] {
        &self.query
    }

    /// The distance metric.
    pub fn metric(&self) -> DistanceMetric {
        self.metric
    }

    /// Name of the appended distance column.
    pub fn output_name(&self) -> &str {
        &self.output_name
    }

    /// Where the planner placed the operator.
    pub fn placement(&self) -> BackendKind {
        self.placement
    }
}

impl DisplayAs for GpuVectorDistanceExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let column = self
            .input
            .schema()
            .fields()
            .get(self.column)
            .map(|f| f.name().clone())
            .unwrap_or_default();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "{}: {}={}({column}@{}, query[{}])",
                placement_label("GpuVectorDistanceExec", self.placement),
                self.output_name,
                self.metric.name(),
                self.column,
                self.query.len()
            ),
            DisplayFormatType::TreeRender => write!(
                f,
                "placement={}\nmetric={}",
                self.placement,
                self.metric.name()
            ),
        }
    }
}

impl ExecutionPlan for GpuVectorDistanceExec {
    crate::exec_support::operator_basics!("GpuVectorDistanceExec");

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let exec = GpuVectorDistanceExec::try_new(
            single_child(children, "GpuVectorDistanceExec")?,
            self.column,
            self.query.clone(),
            self.metric,
            self.output_name.clone(),
            self.placement,
        )?
        .with_backend(self.backend.clone());
        Ok(Arc::new(exec))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let exec = ExecBackend::for_task(&self.backend, self.placement, context.session_config())?;
        let input = self.input.execute(partition, context)?;
        let metrics = OperatorMetrics::new(
            &self.metrics,
            partition,
            "GpuVectorDistanceExec",
            self.placement,
            &exec,
        );
        let (column, query, metric, schema) = (
            self.column,
            self.query.clone(),
            self.metric,
            Arc::clone(&self.schema),
        );
        // Gathered to a device's batch size, each batch on the blocking pool there.
        let batches = host_items(input, exec.backend.batching());
        let backend = Arc::clone(&exec.backend);
        let work = move |item: SegmentBatch| {
            let batch = item.into_host()?;
            let started = Instant::now();
            let vectors = batch
                .column(column)
                .as_any()
                .downcast_ref::<FixedSizeListArray>()
                .ok_or_else(|| {
                    DataFusionError::Internal("vector column is not a FixedSizeList".into())
                })?;
            // On the device: the vectors and one distance per row.
            let state = || vectors.get_array_memory_size() + 8 * vectors.len();
            let distances = exec.run_within_budget(&metrics, state, |backend, stream| {
                backend.vector_distance(
                    stream,
                    VectorDistanceArgs {
                        vectors,
                        query: &query,
                        metric,
                    },
                )
            })?;
            let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
            columns.push(Arc::new(distances));
            let out = RecordBatch::try_new(Arc::clone(&schema), columns)?;
            let moved = exec.bytes_moved(|| vectors.get_array_memory_size());
            metrics.record(batch.num_rows(), out.num_rows(), started, moved);
            Ok(SegmentBatch::host(out))
        };
        let batches = each_batch(batches, backend.as_ref(), work);
        Ok(host_stream(batches, Arc::clone(&self.schema)))
    }
}
