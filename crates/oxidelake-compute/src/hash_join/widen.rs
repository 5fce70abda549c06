//! Join keys whose values are 64-bit integers at heart, as Int64.
//!
//! Widening is one-to-one for these types (a widening, a reinterpretation of the same 64
//! bits, or a decimal of at most 18 digits), so equal Int64 values are equal keys. The
//! join's key encodings (`keys`, `radix`) share it; the values are the 8-byte images the
//! device reads ([`oxidelake_device::ops::load_images`]).

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::error::Result;
use oxidelake_device::ops::load_images;

/// Whether every value of `dt` maps to its own Int64 value (`v as i64` is one-to-one:
/// a widening, or a decimal of at most 18 digits, whose unscaled value fits).
pub(crate) fn widens_exactly(dt: &DataType) -> bool {
    match dt {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(_, _) => true,
        DataType::Decimal128(precision, _) => *precision <= 18,
        _ => false,
    }
}

/// `column` widened to Int64, NULLs kept (the types of [`widens_exactly`]). A decimal
/// holding a valid value past its 18 digits (an invalid array) is the overflow error:
/// a saturated key would not be one-to-one.
pub(crate) fn widened(column: &ArrayRef) -> Result<Int64Array> {
    if let Some(ints) = column.as_primitive_opt::<Int64Type>() {
        return Ok(ints.clone());
    }
    Ok(Int64Array::new(
        load_images(column.as_ref())?.into(),
        column.logical_nulls(),
    ))
}
