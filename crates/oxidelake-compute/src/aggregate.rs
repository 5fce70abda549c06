//! `GpuAggregateExec`: SUM / COUNT / MIN / MAX grouped by one Int64 key.
//!
//! Every input batch is reduced to partial results on the chosen backend (one row per
//! group seen in the batch); when the input is exhausted the partials are merged on the
//! CPU, which is cheap because v1 covers low-cardinality keys only. All input partitions
//! are consumed by the single output partition, so no repartitioning is needed around it.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, ExecutionPlanProperties,
    InputDistributionRequirements, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::GpuBackend;
use oxidelake_device::ops::{AggSpec, AggregateArgs};

use crate::exec_support::{BackendChoice, ExecBackend, OperatorMetrics, single_child};
use crate::placement_label;

/// Grouped aggregation with one output row per distinct key (NULL keys form a group).
/// Output: the key column, then one column per aggregate named `func(column)`.
#[derive(Debug)]
pub struct GpuAggregateExec {
    input: Arc<dyn ExecutionPlan>,
    group_column: usize,
    aggregates: Vec<AggSpec>,
    placement: BackendKind,
    backend: BackendChoice,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl GpuAggregateExec {
    /// Aggregates `input` by its Int64 column `group_column`.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        group_column: usize,
        aggregates: Vec<AggSpec>,
        placement: BackendKind,
    ) -> Result<Self> {
        let input_schema = input.schema();
        let field =
            |i: usize| {
                input_schema.fields().get(i).cloned().ok_or_else(|| {
                    DataFusionError::Plan(format!("aggregate column {i} out of range"))
                })
            };
        let key = field(group_column)?;
        if key.data_type() != &DataType::Int64 {
            return Err(EngineError::unsupported(
                "GpuAggregateExec key",
                format!(
                    "{} is {}; only one Int64 key is covered",
                    key.name(),
                    key.data_type()
                ),
            )
            .into());
        }
        let mut fields = vec![Field::new(key.name(), DataType::Int64, true)];
        for spec in &aggregates {
            let input_field = field(spec.column)?;
            if !matches!(input_field.data_type(), DataType::Int64 | DataType::Float64) {
                return Err(EngineError::unsupported(
                    "GpuAggregateExec input",
                    format!(
                        "{}({}) over {}",
                        spec.func.name(),
                        input_field.name(),
                        input_field.data_type()
                    ),
                )
                .into());
            }
            fields.push(Field::new(
                format!("{}({})", spec.func.name(), input_field.name()),
                spec.func.output_type(input_field.data_type()),
                spec.func != oxidelake_device::ops::AggFunc::Count,
            ));
        }
        let schema = Arc::new(Schema::new(fields));
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Ok(Self {
            input,
            group_column,
            aggregates,
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

    /// Takes the output field names and nullability of `schema` (the aggregate this node
    /// replaces), so the rewrite is invisible to the plan above. The data types must be
    /// the ones this node produces.
    pub fn with_output_schema(mut self, schema: SchemaRef) -> Result<Self> {
        let ours: Vec<&DataType> = self.schema.fields().iter().map(|f| f.data_type()).collect();
        let theirs: Vec<&DataType> = schema.fields().iter().map(|f| f.data_type()).collect();
        if ours != theirs {
            return Err(DataFusionError::Plan(format!(
                "GpuAggregateExec produces {ours:?}, the replaced aggregate {theirs:?}"
            )));
        }
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        self.schema = schema;
        self.properties = Arc::new(properties);
        Ok(self)
    }

    /// The output schema.
    pub fn output_schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The input plan.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// Index of the group-by column.
    pub fn group_column(&self) -> usize {
        self.group_column
    }

    /// The aggregates.
    pub fn aggregates(&self) -> &[AggSpec] {
        &self.aggregates
    }

    /// Where the planner placed the operator.
    pub fn placement(&self) -> BackendKind {
        self.placement
    }
}

impl DisplayAs for GpuAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .schema
            .fields()
            .iter()
            .skip(1)
            .map(|f| f.name().clone())
            .collect();
        let key = self.schema.field(0).name();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "{}: gby=[{key}@{}], aggr=[{}]",
                placement_label("GpuAggregateExec", self.placement),
                self.group_column,
                names.join(", ")
            ),
            DisplayFormatType::TreeRender => write!(f, "placement={}\ngby={key}", self.placement),
        }
    }
}

/// Merges partial results (key, partial aggregates) into final ones.
fn merge_partials(
    cpu: &dyn GpuBackend,
    stream: &oxidelake_device::DeviceStream,
    partials: &[RecordBatch],
    aggregates: &[AggSpec],
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let all = concat_batches(schema, partials)?;
    let merge: Vec<AggSpec> = aggregates
        .iter()
        .enumerate()
        .map(|(i, a)| AggSpec {
            func: a.func.merge_func(),
            column: i + 1,
        })
        .collect();
    let merged = cpu
        .aggregate(
            stream,
            AggregateArgs {
                batch: &all,
                group_column: 0,
                aggregates: &merge,
            },
        )
        .map_err(DataFusionError::from)?;
    Ok(RecordBatch::try_new(
        Arc::clone(schema),
        merged.columns().to_vec(),
    )?)
}

impl ExecutionPlan for GpuAggregateExec {
    fn name(&self) -> &str {
        "GpuAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    /// One input partition: the operator reduces everything it reads into one result.
    /// Declaring it lets DataFusion coalesce the input, and lets Ballista cut a stage
    /// there, so a distributed task sees all of the input and not just its own split.
    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        InputDistributionRequirements::new(vec![Distribution::SinglePartition])
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
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
        let exec = GpuAggregateExec::try_new(
            single_child(children, "GpuAggregateExec")?,
            self.group_column,
            self.aggregates.clone(),
            self.placement,
        )?
        .with_backend(self.backend.clone())
        .with_output_schema(Arc::clone(&self.schema))?;
        Ok(Arc::new(exec))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "GpuAggregateExec has one output partition, asked for {partition}"
            )));
        }
        let partitions = self.input.output_partitioning().partition_count();
        let exec = Arc::new(ExecBackend::new(&self.backend)?);
        let metrics = Arc::new(OperatorMetrics::new(
            &self.metrics,
            partition,
            "GpuAggregateExec",
            exec.kind(),
        ));
        let (group_column, aggregates, schema) = (
            self.group_column,
            Arc::new(self.aggregates.clone()),
            Arc::clone(&self.schema),
        );
        // One task per input partition reduces its batches to partials in parallel.
        let mut tasks = Vec::with_capacity(partitions);
        for p in 0..partitions {
            let mut input = self.input.execute(p, Arc::clone(&context))?;
            let (exec, metrics, aggregates, schema) = (
                Arc::clone(&exec),
                Arc::clone(&metrics),
                Arc::clone(&aggregates),
                Arc::clone(&schema),
            );
            // SpawnedTask aborts the task when dropped, so a cancelled query stops reading.
            tasks.push(SpawnedTask::spawn(async move {
                let mut partials = Vec::new();
                while let Some(batch) = input.try_next().await? {
                    let started = Instant::now();
                    let partial = exec.run(&metrics, |backend, stream| {
                        backend.aggregate(
                            stream,
                            AggregateArgs {
                                batch: &batch,
                                group_column,
                                aggregates: &aggregates,
                            },
                        )
                    })?;
                    // Partials have the output layout (same names, types and nullability).
                    partials.push(RecordBatch::try_new(
                        Arc::clone(&schema),
                        partial.columns().to_vec(),
                    )?);
                    metrics.rows_in.add(batch.num_rows());
                    metrics
                        .baseline
                        .elapsed_compute()
                        .add_duration(started.elapsed());
                    metrics.telemetry.record_batch(
                        batch.num_rows() as u64,
                        0,
                        started.elapsed(),
                        0,
                    );
                }
                Ok::<_, DataFusionError>(partials)
            }));
        }
        let fut = async move {
            let mut partials = Vec::new();
            for task in tasks {
                let part = task
                    .await
                    .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))??;
                partials.extend(part);
            }
            let started = Instant::now();
            let out = merge_partials(&exec.cpu, &exec.cpu_stream, &partials, &aggregates, &schema)?;
            metrics.record(0, out.num_rows(), started, 0);
            Ok(out)
        };
        let stream = futures::stream::once(fut).boxed();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
