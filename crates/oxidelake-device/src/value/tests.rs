use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Float64Array, Int32Array, Int64Array,
};
use arrow::datatypes::{DataType, Decimal128Type, Field, Float64Type, Int32Type, Schema};
use arrow::record_batch::RecordBatch;

use super::*;

/// A small deterministic generator (the tests need no crate for it).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

fn batch(rows: usize, seed: u64) -> RecordBatch {
    let mut rng = Rng(seed);
    let price: Decimal128Array = (0..rows)
        .map(|_| (rng.below(10) != 0).then(|| i128::from(rng.below(10_000_000))))
        .collect::<Decimal128Array>()
        .with_precision_and_scale(15, 2)
        .unwrap();
    let discount: Decimal128Array = (0..rows)
        .map(|_| (rng.below(10) != 0).then(|| i128::from(rng.below(11))))
        .collect::<Decimal128Array>()
        .with_precision_and_scale(15, 2)
        .unwrap();
    let small: Int32Array = (0..rows)
        .map(|_| (rng.below(8) != 0).then(|| rng.next() as i32))
        .collect();
    let wide: Int64Array = (0..rows).map(|_| Some(rng.next() as i64)).collect();
    let float: Float64Array = (0..rows)
        .map(|_| (rng.below(8) != 0).then(|| rng.below(1000) as f64 / 7.0))
        .collect();
    let schema = Schema::new(vec![
        Field::new("price", DataType::Decimal128(15, 2), true),
        Field::new("discount", DataType::Decimal128(15, 2), true),
        Field::new("small", DataType::Int32, true),
        Field::new("wide", DataType::Int64, true),
        Field::new("float", DataType::Float64, true),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(price),
        Arc::new(discount),
        Arc::new(small),
        Arc::new(wide),
        Arc::new(float),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).unwrap()
}

fn col(i: usize) -> ValueExpr {
    ValueExpr::Column(i)
}

/// `price * (1 - discount)` as DataFusion types it: Decimal(15,2) * Decimal(16,2) →
/// Decimal(32,4), the literal 1 rescaled to scale 2.
fn revenue() -> ValueColumn {
    let one_minus = ValueExpr::arith(Arith::Sub, ArithMode::Checked, ValueExpr::Int(100), col(1));
    ValueColumn {
        expr: ValueExpr::arith(Arith::Mul, ArithMode::Checked, col(0), one_minus),
        data_type: DataType::Decimal128(32, 4),
    }
}

fn int32_sum() -> ValueColumn {
    ValueColumn {
        expr: ValueExpr::Wrap {
            input: Box::new(ValueExpr::arith(
                Arith::Mul,
                ArithMode::Wrapping,
                col(2),
                col(2),
            )),
            bits: 32,
        },
        data_type: DataType::Int32,
    }
}

fn float_expr() -> ValueColumn {
    let scaled = ValueExpr::arith(Arith::Mul, ArithMode::Float, col(4), ValueExpr::Float(0.1));
    ValueColumn {
        expr: ValueExpr::arith(
            Arith::Add,
            ArithMode::Float,
            scaled,
            ValueExpr::ToFloat(Box::new(col(3))),
        ),
        data_type: DataType::Float64,
    }
}

fn rescaled_wide() -> ValueColumn {
    // CAST(small AS Decimal(20, 3)) - price rescaled to scale 3.
    let small = ValueExpr::Scale {
        input: Box::new(col(2)),
        power: 3,
    };
    let price = ValueExpr::Scale {
        input: Box::new(col(0)),
        power: 1,
    };
    ValueColumn {
        expr: ValueExpr::arith(Arith::Sub, ArithMode::Checked, small, price),
        data_type: DataType::Decimal128(20, 3),
    }
}

#[test]
fn decimal_revenue_equals_the_exact_128_bit_product_and_nulls_propagate() {
    let batch = batch(1000, 1);
    let out = evaluate_on_host(&batch, &[revenue()]).unwrap();
    let out = out[0].as_primitive::<Decimal128Type>();
    assert_eq!(out.data_type(), &DataType::Decimal128(32, 4));
    let price = batch.column(0).as_primitive::<Decimal128Type>();
    let discount = batch.column(1).as_primitive::<Decimal128Type>();
    for row in 0..batch.num_rows() {
        let expected = (price.is_valid(row) && discount.is_valid(row))
            .then(|| price.value(row) * (100 - discount.value(row)));
        let got = out.is_valid(row).then(|| out.value(row));
        assert_eq!(got, expected, "row {row}");
    }
}

#[test]
fn int32_arithmetic_wraps_as_32_bit_arithmetic_does() {
    let batch = batch(500, 2);
    let out = evaluate_on_host(&batch, &[int32_sum()]).unwrap();
    let out = out[0].as_primitive::<Int32Type>();
    let small = batch.column(2).as_primitive::<Int32Type>();
    for row in 0..batch.num_rows() {
        let expected = small
            .is_valid(row)
            .then(|| small.value(row).wrapping_mul(small.value(row)));
        assert_eq!(out.is_valid(row).then(|| out.value(row)), expected);
    }
}

#[test]
fn float_arithmetic_rounds_each_operation_like_rust_f64() {
    let batch = batch(300, 3);
    let out = evaluate_on_host(&batch, &[float_expr()]).unwrap();
    let out = out[0].as_primitive::<Float64Type>();
    let float = batch.column(4).as_primitive::<Float64Type>();
    let wide = batch
        .column(3)
        .as_primitive::<arrow::datatypes::Int64Type>();
    for row in 0..batch.num_rows() {
        let expected = float
            .is_valid(row)
            .then(|| (float.value(row) * 0.1 + wide.value(row) as f64).to_bits());
        assert_eq!(
            out.is_valid(row).then(|| out.value(row).to_bits()),
            expected
        );
    }
}

#[test]
fn the_postfix_program_computes_what_the_vectorised_cpu_path_computes() {
    for seed in 0..8 {
        let batch = batch(257, 100 + seed);
        let columns = [revenue(), int32_sum(), float_expr(), rescaled_wide()];
        let vectorised = evaluate_on_host(&batch, &columns).unwrap();
        let mut slots = Vec::new();
        for (column, expected) in columns.iter().zip(&vectorised) {
            let program = ValueProgram::compile(&batch.schema(), column, &mut slots).unwrap();
            let (values, valid) = run_value_program_on_host(&program, &batch).unwrap();
            let nulls = arrow::buffer::NullBuffer::from(valid);
            let got = output_array(values, Some(nulls), &column.data_type).unwrap();
            assert_eq!(got.as_ref(), expected.as_ref(), "{column:?} seed {seed}");
        }
    }
}

fn overflowing() -> (RecordBatch, ValueColumn) {
    let big = Decimal128Array::from(vec![Some(999_999_999_999_999_999i128), None])
        .with_precision_and_scale(18, 0)
        .unwrap();
    let garbage_under_null = Decimal128Array::new(
        vec![1i128, 999_999_999_999_999_999].into(),
        Some(vec![true, false].into()),
    )
    .with_precision_and_scale(18, 0)
    .unwrap();
    let schema = Schema::new(vec![
        Field::new("a", DataType::Decimal128(18, 0), true),
        Field::new("b", DataType::Decimal128(18, 0), true),
    ]);
    let batch = RecordBatch::try_new(
        Arc::new(schema),
        vec![Arc::new(big) as ArrayRef, Arc::new(garbage_under_null)],
    )
    .unwrap();
    let column = ValueColumn {
        expr: ValueExpr::arith(Arith::Mul, ArithMode::Checked, col(0), col(0)),
        data_type: DataType::Decimal128(37, 0),
    };
    (batch, column)
}

#[test]
fn a_decimal_product_beyond_64_bits_is_reported_not_wrapped() {
    let (batch, column) = overflowing();
    let err = evaluate_on_host(&batch, std::slice::from_ref(&column)).unwrap_err();
    assert!(is_overflow(&err), "{err}");
    let program = ValueProgram::compile(&batch.schema(), &column, &mut Vec::new()).unwrap();
    assert!(run_value_program_on_host(&program, &batch).is_err());
}

#[test]
fn a_value_hidden_under_a_null_slot_never_reports_an_overflow() {
    let (batch, _) = overflowing();
    // b * b: row 0 is 1, row 1 is NULL over a value whose square overflows.
    let column = ValueColumn {
        expr: ValueExpr::arith(Arith::Mul, ArithMode::Checked, col(1), col(1)),
        data_type: DataType::Decimal128(37, 0),
    };
    let out = evaluate_on_host(&batch, std::slice::from_ref(&column)).unwrap();
    assert_eq!(out[0].null_count(), 1);
    assert_eq!(out[0].as_primitive::<Decimal128Type>().value(0), 1);
    let program = ValueProgram::compile(&batch.schema(), &column, &mut Vec::new()).unwrap();
    let (values, valid) = run_value_program_on_host(&program, &batch).unwrap();
    assert_eq!((values, valid), (vec![1, 0], vec![true, false]));
}

#[test]
fn mixed_float_and_integer_images_are_refused() {
    let batch = batch(4, 4);
    let schema = batch.schema();
    let mixed = ValueColumn {
        expr: ValueExpr::arith(Arith::Add, ArithMode::Float, col(4), col(3)),
        data_type: DataType::Float64,
    };
    assert!(check_value_column(&schema, &mixed).is_err());
    let wrong_output = ValueColumn {
        expr: col(3),
        data_type: DataType::Float64,
    };
    assert!(check_value_column(&schema, &wrong_output).is_err());
}

#[test]
fn a_wide_decimal_column_is_read_while_its_values_fit_64_bits() {
    let wide = |values: Vec<Option<i128>>| {
        let array = Decimal128Array::from(values)
            .with_precision_and_scale(38, 4)
            .unwrap();
        let schema = Schema::new(vec![Field::new("w", DataType::Decimal128(38, 4), true)]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(array) as ArrayRef]).unwrap()
    };
    let doubled = ValueColumn {
        expr: ValueExpr::arith(Arith::Add, ArithMode::Checked, col(0), col(0)),
        data_type: DataType::Decimal128(38, 4),
    };
    let fits = wide(vec![Some(12_345), None, Some(-7)]);
    let out = evaluate_on_host(&fits, std::slice::from_ref(&doubled)).unwrap();
    let out = out[0].as_primitive::<Decimal128Type>();
    assert_eq!(
        out.iter().collect::<Vec<_>>(),
        vec![Some(24_690), None, Some(-14)]
    );
    let beyond = wide(vec![Some(1), Some(i128::from(i64::MAX) + 1)]);
    let err = evaluate_on_host(&beyond, std::slice::from_ref(&doubled)).unwrap_err();
    assert!(is_overflow(&err), "{err}");
    let program = ValueProgram::compile(&beyond.schema(), &doubled, &mut Vec::new()).unwrap();
    assert!(run_value_program_on_host(&program, &beyond).is_err());
}

#[test]
fn a_program_deeper_than_the_kernel_stack_is_refused() {
    let batch = batch(4, 5);
    let mut expr = col(3);
    for _ in 0..MAX_VALUE_STACK {
        expr = ValueExpr::arith(Arith::Add, ArithMode::Wrapping, col(3), expr);
    }
    let column = ValueColumn {
        expr,
        data_type: DataType::Int64,
    };
    let err = ValueProgram::compile(&batch.schema(), &column, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("stack"), "{err}");
}

#[test]
fn the_year_of_a_date_is_arrows_date_part_including_the_calendar_ends() {
    use arrow::array::Date32Array;
    use arrow::compute::kernels::temporal::{DatePart, date_part};
    let (lo, hi) = (*YEAR_DAYS.start() as i32, *YEAR_DAYS.end() as i32);
    let mut days: Vec<Option<i32>> = vec![
        Some(lo - 1),
        Some(lo),
        Some(hi),
        Some(hi + 1),
        Some(i32::MIN),
        Some(i32::MAX),
        None,
        Some(0),
        Some(-1),
        Some(11_016),
        Some(11_017),
        Some(-719_468),
        Some(-719_469),
    ];
    let mut rng = Rng(9);
    days.extend((0..2000).map(|_| Some(rng.below(2_000_000) as i32 - 1_000_000)));
    let dates = Date32Array::from(days);
    let expected = date_part(&dates, DatePart::Year).unwrap();
    let schema = Schema::new(vec![Field::new("d", DataType::Date32, true)]);
    let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(dates) as ArrayRef]).unwrap();
    let year = ValueColumn {
        expr: ValueExpr::Year(0),
        data_type: DataType::Int32,
    };
    let got = evaluate_on_host(&batch, std::slice::from_ref(&year)).unwrap();
    assert_eq!(got[0].as_ref(), expected.as_ref());
    assert_eq!(
        got[0].null_count(),
        5,
        "the four days beyond the calendar and the NULL"
    );
    let program = ValueProgram::compile(&batch.schema(), &year, &mut Vec::new()).unwrap();
    let (values, valid) = run_value_program_on_host(&program, &batch).unwrap();
    let from_program = output_array(values, Some(valid.into()), &DataType::Int32).unwrap();
    assert_eq!(from_program.as_ref(), expected.as_ref());
}
