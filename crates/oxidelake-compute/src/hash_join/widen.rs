//! Join keys whose values are 64-bit integers at heart, as Int64.
//!
//! Widening is one-to-one for these types (a widening, a reinterpretation of the same 64
//! bits, or a decimal of at most 18 digits), so equal Int64 values are equal keys. The
//! join's key encodings (`keys`, `radix`) share it.

use arrow::array::{ArrayRef, AsArray, Int64Array};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, Int8Type, Int16Type, Int32Type, Int64Type,
    TimeUnit, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use datafusion::error::{DataFusionError, Result};

/// Whether every value of `dt` maps to its own Int64 value (`v as i64` is one-to-one:
/// a widening, a reinterpretation of the same 64 bits, or a decimal of at most 18
/// digits, whose unscaled value fits).
pub(crate) fn widens_exactly(dt: &DataType) -> bool {
    match dt {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(_, _) => true,
        DataType::Decimal128(precision, _) => *precision <= 18,
        _ => false,
    }
}

/// `column` widened to Int64, NULLs kept (the types of [`widens_exactly`]).
pub(crate) fn widened(column: &ArrayRef) -> Result<Int64Array> {
    let a = column.as_ref();
    Ok(match a.data_type() {
        DataType::Int64 => a.as_primitive::<Int64Type>().clone(),
        DataType::Int8 => a.as_primitive::<Int8Type>().unary(i64::from),
        DataType::Int16 => a.as_primitive::<Int16Type>().unary(i64::from),
        DataType::Int32 => a.as_primitive::<Int32Type>().unary(i64::from),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().unary(i64::from),
        DataType::UInt16 => a.as_primitive::<UInt16Type>().unary(i64::from),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().unary(i64::from),
        // The same 64 bits read as signed: one-to-one, which is all equality needs.
        DataType::UInt64 => a
            .as_primitive::<UInt64Type>()
            .unary(|v| i64::from_ne_bytes(v.to_ne_bytes())),
        DataType::Date32 => a.as_primitive::<Date32Type>().unary(i64::from),
        DataType::Date64 => a.as_primitive::<Date64Type>().unary(|v| v),
        DataType::Timestamp(TimeUnit::Second, _) => {
            a.as_primitive::<TimestampSecondType>().unary(|v| v)
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            a.as_primitive::<TimestampMillisecondType>().unary(|v| v)
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            a.as_primitive::<TimestampMicrosecondType>().unary(|v| v)
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            a.as_primitive::<TimestampNanosecondType>().unary(|v| v)
        }
        // At most 18 digits: the unscaled value lies within ±(10^18 - 1), inside i64.
        // A value outside it is an invalid array; refusing it keeps keys one-to-one.
        DataType::Decimal128(precision, _) if *precision <= 18 => {
            a.as_primitive::<Decimal128Type>().try_unary(|v| {
                i64::try_from(v).map_err(|_| {
                    arrow::error::ArrowError::InvalidArgumentError(format!(
                        "join key {v} exceeds its Decimal128({precision}) type"
                    ))
                })
            })?
        }
        other => {
            return Err(DataFusionError::Internal(format!(
                "join key of type {other} cannot be widened to Int64"
            )));
        }
    })
}
