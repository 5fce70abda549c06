//! The CPU path of computed columns: the expression tree evaluated a whole column at a
//! time over the operands' images, one tight loop per node.
//!
//! A NULL operand slot is zeroed when loaded, so a checked operation cannot report an
//! overflow for a value that is not there. A NULL *result* row still carries the value
//! its non-NULL operands produced (the loops do not branch on validity), so a later
//! checked node can, rarely, report an overflow that only a NULL row had: the operator
//! then runs that batch with DataFusion, which is correct and only slower.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Decimal128Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array,
};
use arrow::buffer::{Buffer, NullBuffer, ScalarBuffer};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

use super::program::{mode_code, value_opcode, wrap};
use super::{
    Arith, ValueColumn, ValueExpr, YEAR_DAYS, check_value_column, load_images, overflow_error,
    year_of_days,
};

/// A node's images: one per row, or one for every row.
enum Images<'a> {
    Rows(std::borrow::Cow<'a, [i64]>),
    Const(i64),
}

struct Evaluated<'a> {
    images: Images<'a>,
    nulls: Option<NullBuffer>,
}

/// The operand columns of one batch, loaded once however many expressions read them.
struct Loaded {
    columns: Vec<(usize, Vec<i64>, Option<NullBuffer>)>,
}

impl Loaded {
    fn load(batch: &RecordBatch, columns: &[usize]) -> Result<Self, EngineError> {
        let mut out = Vec::with_capacity(columns.len());
        for column in columns {
            let array = batch.column(*column);
            let mut images = load_images(array.as_ref())?;
            let nulls = array.logical_nulls().filter(|n| n.null_count() > 0);
            if let Some(nulls) = &nulls {
                for row in nulls
                    .iter()
                    .enumerate()
                    .filter(|(_, ok)| !ok)
                    .map(|(i, _)| i)
                {
                    images[row] = 0;
                }
            }
            out.push((*column, images, nulls));
        }
        Ok(Self { columns: out })
    }

    fn get(&self, column: usize) -> Option<&(usize, Vec<i64>, Option<NullBuffer>)> {
        self.columns.iter().find(|(c, _, _)| *c == column)
    }
}

/// Computes `columns` over `batch` on the CPU: one array per column, of its type. Fails
/// with the overflow error when a checked (decimal) value needs more than 64 bits.
pub fn evaluate_on_host(
    batch: &RecordBatch,
    columns: &[ValueColumn],
) -> Result<Vec<ArrayRef>, EngineError> {
    let schema = batch.schema();
    let mut reads = Vec::new();
    for column in columns {
        check_value_column(&schema, column)?;
        column.expr.columns(&mut reads);
    }
    let loaded = Loaded::load(batch, &reads)?;
    let rows = batch.num_rows();
    columns
        .iter()
        .map(|column| {
            let out = eval(&column.expr, &loaded)?;
            let values = match out.images {
                Images::Rows(v) => v.into_owned(),
                Images::Const(v) => vec![v; rows],
            };
            output_array(values, out.nulls, &column.data_type)
        })
        .collect()
}

fn eval<'a>(expr: &ValueExpr, loaded: &'a Loaded) -> Result<Evaluated<'a>, EngineError> {
    Ok(match expr {
        ValueExpr::Column(c) => {
            let (_, images, nulls) =
                loaded.get(*c).ok_or_else(|| EngineError::InvalidArgument {
                    what: "computed column input",
                    detail: format!("column {c} was not loaded"),
                })?;
            Evaluated {
                images: Images::Rows(std::borrow::Cow::Borrowed(images)),
                nulls: nulls.clone(),
            }
        }
        ValueExpr::Year(c) => {
            let (_, days, nulls) = loaded.get(*c).ok_or_else(|| EngineError::InvalidArgument {
                what: "computed column input",
                detail: format!("column {c} was not loaded"),
            })?;
            let years: Vec<i64> = days.iter().map(|d| year_of_days(*d)).collect();
            // Arrow's calendar ends at chrono's range: beyond it the year is NULL.
            let outside = days.iter().any(|d| !YEAR_DAYS.contains(d));
            let nulls = if outside {
                let in_range = NullBuffer::from(
                    days.iter()
                        .map(|d| YEAR_DAYS.contains(d))
                        .collect::<Vec<bool>>(),
                );
                NullBuffer::union(nulls.as_ref(), Some(&in_range))
            } else {
                nulls.clone()
            };
            Evaluated {
                images: Images::Rows(years.into()),
                nulls,
            }
        }
        ValueExpr::Int(v) => Evaluated {
            images: Images::Const(*v),
            nulls: None,
        },
        ValueExpr::Float(v) => Evaluated {
            images: Images::Const(v.to_bits() as i64),
            nulls: None,
        },
        ValueExpr::Arith {
            op,
            mode,
            left,
            right,
        } => {
            let (l, r) = (eval(left, loaded)?, eval(right, loaded)?);
            let code = match op {
                Arith::Add => value_opcode::ADD,
                Arith::Sub => value_opcode::SUB,
                Arith::Mul => value_opcode::MUL,
            };
            let nulls = NullBuffer::union(l.nulls.as_ref(), r.nulls.as_ref());
            let images = binary(code, mode_code(*mode), l.images, r.images)?;
            Evaluated { images, nulls }
        }
        ValueExpr::Scale { input, power } => {
            let x = eval(input, loaded)?;
            let factor = 10i64.pow(u32::from(*power));
            let images = binary(value_opcode::MUL, 1, x.images, Images::Const(factor))?;
            Evaluated {
                images,
                nulls: x.nulls,
            }
        }
        ValueExpr::ToFloat(input) => {
            let x = eval(input, loaded)?;
            Evaluated {
                images: unary(x.images, |v| (v as f64).to_bits() as i64),
                nulls: x.nulls,
            }
        }
        ValueExpr::FloatNeg(input) => {
            let x = eval(input, loaded)?;
            Evaluated {
                images: unary(x.images, |v| v ^ i64::MIN),
                nulls: x.nulls,
            }
        }
        ValueExpr::Wrap { input, bits } => {
            let x = eval(input, loaded)?;
            let bits = i32::from(*bits);
            Evaluated {
                images: unary(x.images, |v| wrap(v, bits)),
                nulls: x.nulls,
            }
        }
    })
}

fn unary<'a>(images: Images<'a>, f: impl Fn(i64) -> i64) -> Images<'a> {
    match images {
        Images::Const(v) => Images::Const(f(v)),
        Images::Rows(v) => Images::Rows(v.iter().map(|x| f(*x)).collect::<Vec<_>>().into()),
    }
}

/// `l op r` over images; a checked overflow on any row fails the batch.
fn binary<'a>(op: i32, mode: i32, l: Images<'a>, r: Images<'a>) -> Result<Images<'a>, EngineError> {
    use value_opcode::{ADD, MUL, SUB};
    let float = |v: i64| f64::from_bits(v as u64);
    let bits = |v: f64| v.to_bits() as i64;
    // One specialised loop per operator and mode, so the dispatch is outside the loop
    // and the wrapping and float loops vectorise; `apply` is the same table row by row.
    let (out, overflow) = match (op, mode) {
        (ADD, 0) => combine(l, r, |a, b| (a.wrapping_add(b), false)),
        (SUB, 0) => combine(l, r, |a, b| (a.wrapping_sub(b), false)),
        (MUL, 0) => combine(l, r, |a, b| (a.wrapping_mul(b), false)),
        (ADD, 1) => combine(l, r, i64::overflowing_add),
        (SUB, 1) => combine(l, r, i64::overflowing_sub),
        (MUL, 1) => combine(l, r, i64::overflowing_mul),
        (ADD, _) => combine(l, r, |a, b| (bits(float(a) + float(b)), false)),
        (SUB, _) => combine(l, r, |a, b| (bits(float(a) - float(b)), false)),
        _ => combine(l, r, |a, b| (bits(float(a) * float(b)), false)),
    };
    if overflow {
        return Err(overflow_error());
    }
    Ok(out)
}

/// `f` over the operands' rows (a constant stands for every row), and whether any row
/// reported an overflow.
fn combine<'a>(
    l: Images<'a>,
    r: Images<'a>,
    f: impl Fn(i64, i64) -> (i64, bool),
) -> (Images<'a>, bool) {
    let mut overflow = false;
    let mut g = |a: i64, b: i64| {
        let (v, o) = f(a, b);
        overflow |= o;
        v
    };
    let out = match (l, r) {
        (Images::Const(a), Images::Const(b)) => Images::Const(g(a, b)),
        (Images::Rows(a), Images::Const(b)) => {
            Images::Rows(a.iter().map(|a| g(*a, b)).collect::<Vec<_>>().into())
        }
        (Images::Const(a), Images::Rows(b)) => {
            Images::Rows(b.iter().map(|b| g(a, *b)).collect::<Vec<_>>().into())
        }
        (Images::Rows(a), Images::Rows(b)) => Images::Rows(
            a.iter()
                .zip(b.iter())
                .map(|(a, b)| g(*a, *b))
                .collect::<Vec<_>>()
                .into(),
        ),
    };
    (out, overflow)
}

/// The array of type `dt` holding `values` (images) with `nulls`.
pub fn output_array(
    values: Vec<i64>,
    nulls: Option<NullBuffer>,
    dt: &DataType,
) -> Result<ArrayRef, EngineError> {
    let len = values.len();
    if nulls.as_ref().is_some_and(|n| n.len() != len) {
        return Err(EngineError::InvalidArgument {
            what: "computed column validity",
            detail: format!(
                "{} validity bits for {len} values",
                nulls.map_or(0, |n| n.len())
            ),
        });
    }
    Ok(match dt {
        DataType::Int64 => Arc::new(Int64Array::new(values.into(), nulls)),
        DataType::Int32 => Arc::new(Int32Array::new(
            values.iter().map(|v| *v as i32).collect(),
            nulls,
        )),
        DataType::Int16 => Arc::new(Int16Array::new(
            values.iter().map(|v| *v as i16).collect(),
            nulls,
        )),
        DataType::Int8 => Arc::new(Int8Array::new(
            values.iter().map(|v| *v as i8).collect(),
            nulls,
        )),
        DataType::Float64 => {
            // The images are f64 bit patterns: reinterpret the buffer, no copy.
            let bits = ScalarBuffer::<f64>::new(Buffer::from_vec(values), 0, len);
            Arc::new(Float64Array::new(bits, nulls))
        }
        DataType::Decimal128(p, s) => {
            let wide: Vec<i128> = values.iter().map(|v| i128::from(*v)).collect();
            Arc::new(Decimal128Array::new(wide.into(), nulls).with_precision_and_scale(*p, *s)?)
        }
        other => {
            return Err(EngineError::unsupported(
                "computed column",
                format!("output type {other}"),
            ));
        }
    })
}
