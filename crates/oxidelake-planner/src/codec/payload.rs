//! The serialised parameters of each GPU node.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema};
use datafusion::common::JoinType;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::PartitionMode;
use datafusion::physical_plan::projection::ProjectionExpr;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::protobuf::PhysicalExprNode;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, DistanceMetric, Literal, Predicate};
use oxidelake_compute::{
    AggInput, DeviceToHostExec, GpuFilterExec, GpuHashJoinExec, GpuPartialAggregateExec,
    GpuProjectionExec, GpuVectorDistanceExec, HostToDeviceExec, PartialAggSpec, PartialFunc,
};
use oxidelake_core::BackendKind;
use prost::Message;
use serde::{Deserialize, Serialize};

use super::field_text::{FieldText, data_type, field_text};
use super::join_filter::JoinFilterPayload;

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) enum Backend {
    Cpu,
    Cuda,
}

impl From<BackendKind> for Backend {
    fn from(kind: BackendKind) -> Self {
        match kind {
            BackendKind::CpuSimd => Backend::Cpu,
            BackendKind::Cuda => Backend::Cuda,
        }
    }
}

impl From<Backend> for BackendKind {
    fn from(b: Backend) -> Self {
        match b {
            Backend::Cpu => BackendKind::CpuSimd,
            Backend::Cuda => BackendKind::Cuda,
        }
    }
}

/// A filter predicate tree ([`Predicate`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum Pred {
    Compare {
        column: usize,
        /// [`CmpOp::code`].
        op: u8,
        literal: Lit,
    },
    CompareColumns {
        left: usize,
        op: u8,
        right: usize,
    },
    Like {
        column: usize,
        pattern: String,
        negated: bool,
    },
    IsNull {
        column: usize,
        negated: bool,
    },
    And(Vec<Pred>),
    Or(Vec<Pred>),
    Not(Box<Pred>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum Lit {
    Int(i64),
    Float(f64),
    Str(String),
}

impl From<&Predicate> for Pred {
    fn from(p: &Predicate) -> Self {
        match p {
            Predicate::Compare(c) => Pred::Compare {
                column: c.column,
                op: c.op.code() as u8,
                literal: match &c.literal {
                    Literal::Int64(v) => Lit::Int(*v),
                    Literal::Float64(v) => Lit::Float(*v),
                    Literal::Utf8(v) => Lit::Str(v.clone()),
                },
            },
            Predicate::CompareColumns { left, op, right } => Pred::CompareColumns {
                left: *left,
                op: op.code() as u8,
                right: *right,
            },
            Predicate::Like {
                column,
                pattern,
                negated,
            } => Pred::Like {
                column: *column,
                pattern: pattern.clone(),
                negated: *negated,
            },
            Predicate::IsNull { column, negated } => Pred::IsNull {
                column: *column,
                negated: *negated,
            },
            Predicate::And(c) => Pred::And(c.iter().map(Pred::from).collect()),
            Predicate::Or(c) => Pred::Or(c.iter().map(Pred::from).collect()),
            Predicate::Not(p) => Pred::Not(Box::new(Pred::from(p.as_ref()))),
        }
    }
}

impl Pred {
    fn into_predicate(self) -> Result<Predicate> {
        let all = |c: Vec<Pred>| {
            c.into_iter()
                .map(Pred::into_predicate)
                .collect::<Result<Vec<_>>>()
        };
        Ok(match self {
            Pred::Compare {
                column,
                op,
                literal,
            } => Predicate::Compare(ColumnPredicate {
                column,
                op: op_of(op)?,
                literal: match literal {
                    Lit::Int(v) => Literal::Int64(v),
                    Lit::Float(v) => Literal::Float64(v),
                    Lit::Str(v) => Literal::Utf8(v),
                },
            }),
            Pred::CompareColumns { left, op, right } => Predicate::CompareColumns {
                left,
                op: op_of(op)?,
                right,
            },
            Pred::Like {
                column,
                pattern,
                negated,
            } => Predicate::Like {
                column,
                pattern,
                negated,
            },
            Pred::IsNull { column, negated } => Predicate::IsNull { column, negated },
            Pred::And(c) => Predicate::And(all(c)?),
            Pred::Or(c) => Predicate::Or(all(c)?),
            Pred::Not(p) => Predicate::Not(Box::new(p.into_predicate()?)),
        })
    }
}

/// One aggregate of a partial aggregation ([`PartialAggSpec`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PartialAggregate {
    /// 0 SUM, 1 COUNT, 2 MIN, 3 MAX, 4 AVG.
    func: u8,
    /// The argument column (none for COUNT(*)) and the type it is cast to, as Arrow
    /// writes and parses data types.
    input: Option<(usize, Option<String>)>,
}

/// One GPU node's parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) enum NodePayload {
    Filter {
        predicates: Vec<Pred>,
        projection: Vec<usize>,
        placement: Backend,
    },
    HashJoin {
        /// The key column pairs (build, probe).
        on: Vec<(usize, usize)>,
        filter: Option<JoinFilterPayload>,
        /// 0 Inner, 1 RightSemi, 2 RightAnti, 3 Right.
        join_type: u8,
        /// Partitioned mode (one build table per partition); CollectLeft otherwise.
        partitioned: bool,
        /// The output columns (indices into the unprojected output), when projected.
        projection: Option<Vec<usize>>,
        placement: Backend,
    },
    PartialAggregate {
        keys: Vec<usize>,
        aggregates: Vec<PartialAggregate>,
        /// The output schema: the replaced partial aggregate's, state types included.
        output: Vec<FieldText>,
        placement: Backend,
    },
    VectorDistance {
        column: usize,
        query: Vec<f32>,
        cosine: bool,
        output_name: String,
        placement: Backend,
    },
    Projection {
        /// Per output column: the expression as a protobuf `PhysicalExprNode` over the
        /// input schema (DataFusion's own encoding, through this codec), and its name.
        exprs: Vec<(Vec<u8>, String)>,
        placement: Backend,
    },
    /// A `HostToDeviceExec` (ADR-0014): the executor's own backend is detected there.
    HostToDevice { placement: Backend },
    /// A `DeviceToHostExec` (ADR-0014).
    DeviceToHost { placement: Backend },
}

fn op_of(code: u8) -> Result<CmpOp> {
    Ok(match code {
        0 => CmpOp::Eq,
        1 => CmpOp::Lt,
        2 => CmpOp::LtEq,
        3 => CmpOp::Gt,
        4 => CmpOp::GtEq,
        5 => CmpOp::NotEq,
        other => return Err(bad(format!("comparison code {other}"))),
    })
}

fn partial_func_code(func: PartialFunc) -> u8 {
    match func {
        PartialFunc::Sum => 0,
        PartialFunc::Count => 1,
        PartialFunc::Min => 2,
        PartialFunc::Max => 3,
        PartialFunc::Avg => 4,
        PartialFunc::CheckedSum => 5,
    }
}

fn partial_func_of(code: u8) -> Result<PartialFunc> {
    Ok(match code {
        0 => PartialFunc::Sum,
        1 => PartialFunc::Count,
        2 => PartialFunc::Min,
        3 => PartialFunc::Max,
        4 => PartialFunc::Avg,
        5 => PartialFunc::CheckedSum,
        other => return Err(bad(format!("partial aggregate code {other}"))),
    })
}

fn bad(detail: String) -> DataFusionError {
    DataFusionError::Internal(format!("malformed OxideLake plan payload: {detail}"))
}

fn one_input(inputs: &[Arc<dyn ExecutionPlan>], node: &str) -> Result<Arc<dyn ExecutionPlan>> {
    match inputs {
        [input] => Ok(Arc::clone(input)),
        other => Err(bad(format!("{node} needs 1 input, got {}", other.len()))),
    }
}

impl NodePayload {
    pub(super) fn node_name(&self) -> &'static str {
        match self {
            NodePayload::Filter { .. } => "GpuFilterExec",
            NodePayload::HashJoin { .. } => "GpuHashJoinExec",
            NodePayload::PartialAggregate { .. } => "GpuPartialAggregateExec",
            NodePayload::VectorDistance { .. } => "GpuVectorDistanceExec",
            NodePayload::Projection { .. } => "GpuProjectionExec",
            NodePayload::HostToDevice { .. } => "HostToDeviceExec",
            NodePayload::DeviceToHost { .. } => "DeviceToHostExec",
        }
    }

    /// The payload of `node`, if it is one of ours.
    pub(super) fn from_plan(
        node: &Arc<dyn ExecutionPlan>,
        codec: &dyn PhysicalExtensionCodec,
    ) -> Result<Option<Self>> {
        if let Some(f) = node.downcast_ref::<GpuFilterExec>() {
            return Ok(Some(NodePayload::Filter {
                predicates: f.predicates().iter().map(Pred::from).collect(),
                projection: f.projection().to_vec(),
                placement: f.placement().into(),
            }));
        }
        if let Some(j) = node.downcast_ref::<GpuHashJoinExec>() {
            let filter = j
                .filter()
                .map(|f| JoinFilterPayload::encode(f, codec))
                .transpose()?;
            return Ok(Some(NodePayload::HashJoin {
                on: j.on().to_vec(),
                filter,
                join_type: match j.join_type() {
                    JoinType::RightSemi => 1,
                    JoinType::RightAnti => 2,
                    JoinType::Right => 3,
                    _ => 0,
                },
                partitioned: j.mode() == PartitionMode::Partitioned,
                projection: j.projection().map(<[usize]>::to_vec),
                placement: j.placement().into(),
            }));
        }
        if let Some(a) = node.downcast_ref::<GpuPartialAggregateExec>() {
            return Ok(Some(NodePayload::PartialAggregate {
                keys: a.keys().to_vec(),
                aggregates: a
                    .aggregates()
                    .iter()
                    .map(|s| PartialAggregate {
                        func: partial_func_code(s.func),
                        input: s
                            .input
                            .as_ref()
                            .map(|i| (i.column, i.cast.as_ref().map(ToString::to_string))),
                    })
                    .collect(),
                output: a.schema().fields().iter().map(|f| field_text(f)).collect(),
                placement: a.placement().into(),
            }));
        }
        if let Some(v) = node.downcast_ref::<GpuVectorDistanceExec>() {
            return Ok(Some(NodePayload::VectorDistance {
                column: v.column(),
                query: v.query().to_vec(),
                cosine: v.metric() == DistanceMetric::Cosine,
                output_name: v.output_name().to_string(),
                placement: v.placement().into(),
            }));
        }
        if let Some(p) = node.downcast_ref::<GpuProjectionExec>() {
            let exprs = p
                .exprs()
                .iter()
                .map(|e| {
                    let node = serialize_physical_expr(&e.expr, codec)?;
                    Ok((node.encode_to_vec(), e.alias.clone()))
                })
                .collect::<Result<Vec<_>>>()?;
            return Ok(Some(NodePayload::Projection {
                exprs,
                placement: p.placement().into(),
            }));
        }
        if let Some(t) = node.downcast_ref::<HostToDeviceExec>() {
            return Ok(Some(NodePayload::HostToDevice {
                placement: t.placement().into(),
            }));
        }
        if let Some(t) = node.downcast_ref::<DeviceToHostExec>() {
            return Ok(Some(NodePayload::DeviceToHost {
                placement: t.placement().into(),
            }));
        }
        Ok(None)
    }

    /// Rebuilds the node over its decoded `inputs`.
    pub(super) fn into_plan(
        self,
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        codec: &dyn PhysicalExtensionCodec,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(match self {
            NodePayload::Filter {
                predicates,
                projection,
                placement,
            } => {
                let predicates = predicates
                    .into_iter()
                    .map(Pred::into_predicate)
                    .collect::<Result<Vec<_>>>()?;
                Arc::new(GpuFilterExec::try_new(
                    one_input(inputs, "GpuFilterExec")?,
                    predicates,
                    projection,
                    placement.into(),
                )?)
            }
            NodePayload::HashJoin {
                on,
                filter,
                join_type,
                partitioned,
                projection,
                placement,
            } => {
                let join_type = match join_type {
                    0 => JoinType::Inner,
                    1 => JoinType::RightSemi,
                    2 => JoinType::RightAnti,
                    3 => JoinType::Right,
                    other => return Err(bad(format!("join type code {other}"))),
                };
                let [left, right] = inputs else {
                    return Err(bad(format!(
                        "GpuHashJoinExec needs 2 inputs, got {}",
                        inputs.len()
                    )));
                };
                let filter = filter.map(|f| f.decode(ctx, codec)).transpose()?;
                let mode = if partitioned {
                    PartitionMode::Partitioned
                } else {
                    PartitionMode::CollectLeft
                };
                Arc::new(
                    GpuHashJoinExec::try_new_in_mode(
                        Arc::clone(left),
                        Arc::clone(right),
                        on,
                        filter,
                        join_type,
                        mode,
                        placement.into(),
                    )?
                    .with_projection(projection)?,
                )
            }
            NodePayload::PartialAggregate {
                keys,
                aggregates,
                output,
                placement,
            } => {
                let specs = aggregates
                    .into_iter()
                    .map(|a| {
                        let input = match a.input {
                            Some((column, cast)) => Some(AggInput {
                                column,
                                cast: cast.as_deref().map(data_type).transpose()?,
                            }),
                            None => None,
                        };
                        Ok(PartialAggSpec {
                            func: partial_func_of(a.func)?,
                            input,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let fields = output
                    .iter()
                    .map(|(name, dt, nullable)| Ok(Field::new(name, data_type(dt)?, *nullable)))
                    .collect::<Result<Vec<_>>>()?;
                Arc::new(GpuPartialAggregateExec::try_new(
                    one_input(inputs, "GpuPartialAggregateExec")?,
                    keys,
                    specs,
                    Arc::new(Schema::new(fields)),
                    placement.into(),
                )?)
            }
            NodePayload::VectorDistance {
                column,
                query,
                cosine,
                output_name,
                placement,
            } => Arc::new(GpuVectorDistanceExec::try_new(
                one_input(inputs, "GpuVectorDistanceExec")?,
                column,
                query,
                if cosine {
                    DistanceMetric::Cosine
                } else {
                    DistanceMetric::L2
                },
                output_name,
                placement.into(),
            )?),
            NodePayload::Projection { exprs, placement } => {
                let input = one_input(inputs, "GpuProjectionExec")?;
                let schema = input.schema();
                let exprs = exprs
                    .into_iter()
                    .map(|(bytes, alias)| {
                        let node = PhysicalExprNode::decode(bytes.as_slice()).map_err(|e| {
                            bad(format!("projection expression does not decode: {e}"))
                        })?;
                        let expr = parse_physical_expr(&node, ctx, &schema, codec)?;
                        Ok(ProjectionExpr { expr, alias })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Arc::new(GpuProjectionExec::try_new(exprs, input, placement.into())?)
            }
            NodePayload::HostToDevice { placement } => Arc::new(HostToDeviceExec::new(
                one_input(inputs, "HostToDeviceExec")?,
                placement.into(),
            )),
            NodePayload::DeviceToHost { placement } => Arc::new(DeviceToHostExec::new(
                one_input(inputs, "DeviceToHostExec")?,
                placement.into(),
            )),
        })
    }
}
