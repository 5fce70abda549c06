//! The serialised parameters of each GPU node.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema};
use datafusion::common::JoinType;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::ExecutionPlan;
use oxidelake_compute::ops::{
    AggFunc, AggSpec, CmpOp, ColumnPredicate, DistanceMetric, Literal, Predicate,
};
use oxidelake_compute::{GpuAggregateExec, GpuFilterExec, GpuHashJoinExec, GpuVectorDistanceExec};
use oxidelake_core::BackendKind;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) enum Backend {
    Cpu,
    Cuda,
    Metal,
}

impl From<BackendKind> for Backend {
    fn from(kind: BackendKind) -> Self {
        match kind {
            BackendKind::CpuSimd => Backend::Cpu,
            BackendKind::Cuda => Backend::Cuda,
            BackendKind::Metal => Backend::Metal,
        }
    }
}

impl From<Backend> for BackendKind {
    fn from(b: Backend) -> Self {
        match b {
            Backend::Cpu => BackendKind::CpuSimd,
            Backend::Cuda => BackendKind::Cuda,
            Backend::Metal => BackendKind::Metal,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Aggregate {
    /// 0 SUM, 1 COUNT, 2 MIN, 3 MAX.
    func: u8,
    column: usize,
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
        left_key: usize,
        right_key: usize,
        /// 0 Inner, 1 RightSemi, 2 RightAnti.
        join_type: u8,
        placement: Backend,
    },
    Aggregate {
        group_column: usize,
        aggregates: Vec<Aggregate>,
        /// Output field names and nullability (types follow from the inputs).
        output: Vec<(String, bool)>,
        placement: Backend,
    },
    VectorDistance {
        column: usize,
        query: Vec<f32>,
        cosine: bool,
        output_name: String,
        placement: Backend,
    },
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

fn func_code(func: AggFunc) -> u8 {
    match func {
        AggFunc::Sum => 0,
        AggFunc::Count => 1,
        AggFunc::Min => 2,
        AggFunc::Max => 3,
    }
}

fn func_of(code: u8) -> Result<AggFunc> {
    Ok(match code {
        0 => AggFunc::Sum,
        1 => AggFunc::Count,
        2 => AggFunc::Min,
        3 => AggFunc::Max,
        other => return Err(bad(format!("aggregate code {other}"))),
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
            NodePayload::Aggregate { .. } => "GpuAggregateExec",
            NodePayload::VectorDistance { .. } => "GpuVectorDistanceExec",
        }
    }

    /// The payload of `node`, if it is one of ours.
    pub(super) fn from_plan(node: &Arc<dyn ExecutionPlan>) -> Option<Self> {
        if let Some(f) = node.downcast_ref::<GpuFilterExec>() {
            return Some(NodePayload::Filter {
                predicates: f.predicates().iter().map(Pred::from).collect(),
                projection: f.projection().to_vec(),
                placement: f.placement().into(),
            });
        }
        if let Some(j) = node.downcast_ref::<GpuHashJoinExec>() {
            let (left_key, right_key) = j.keys();
            return Some(NodePayload::HashJoin {
                left_key,
                right_key,
                join_type: match j.join_type() {
                    JoinType::RightSemi => 1,
                    JoinType::RightAnti => 2,
                    _ => 0,
                },
                placement: j.placement().into(),
            });
        }
        if let Some(a) = node.downcast_ref::<GpuAggregateExec>() {
            return Some(NodePayload::Aggregate {
                group_column: a.group_column(),
                aggregates: a
                    .aggregates()
                    .iter()
                    .map(|s| Aggregate {
                        func: func_code(s.func),
                        column: s.column,
                    })
                    .collect(),
                output: a
                    .output_schema()
                    .fields()
                    .iter()
                    .map(|f| (f.name().clone(), f.is_nullable()))
                    .collect(),
                placement: a.placement().into(),
            });
        }
        if let Some(v) = node.downcast_ref::<GpuVectorDistanceExec>() {
            return Some(NodePayload::VectorDistance {
                column: v.column(),
                query: v.query().to_vec(),
                cosine: v.metric() == DistanceMetric::Cosine,
                output_name: v.output_name().to_string(),
                placement: v.placement().into(),
            });
        }
        None
    }

    /// Rebuilds the node over its decoded `inputs`.
    pub(super) fn into_plan(
        self,
        inputs: &[Arc<dyn ExecutionPlan>],
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
                left_key,
                right_key,
                join_type,
                placement,
            } => {
                let join_type = match join_type {
                    0 => JoinType::Inner,
                    1 => JoinType::RightSemi,
                    2 => JoinType::RightAnti,
                    other => return Err(bad(format!("join type code {other}"))),
                };
                let [left, right] = inputs else {
                    return Err(bad(format!(
                        "GpuHashJoinExec needs 2 inputs, got {}",
                        inputs.len()
                    )));
                };
                Arc::new(GpuHashJoinExec::try_new_with_type(
                    Arc::clone(left),
                    Arc::clone(right),
                    left_key,
                    right_key,
                    join_type,
                    placement.into(),
                )?)
            }
            NodePayload::Aggregate {
                group_column,
                aggregates,
                output,
                placement,
            } => {
                let specs = aggregates
                    .into_iter()
                    .map(|a| {
                        Ok(AggSpec {
                            func: func_of(a.func)?,
                            column: a.column,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let exec = GpuAggregateExec::try_new(
                    one_input(inputs, "GpuAggregateExec")?,
                    group_column,
                    specs,
                    placement.into(),
                )?;
                let fields = exec.output_schema().fields();
                if fields.len() != output.len() {
                    return Err(bad(format!(
                        "{} output fields for {} columns",
                        output.len(),
                        fields.len()
                    )));
                }
                let renamed: Vec<Field> = fields
                    .iter()
                    .zip(&output)
                    .map(|(f, (name, nullable))| Field::new(name, f.data_type().clone(), *nullable))
                    .collect();
                Arc::new(exec.with_output_schema(Arc::new(Schema::new(renamed)))?)
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
        })
    }
}
