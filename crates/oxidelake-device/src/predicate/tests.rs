use std::sync::Arc;

use arrow::array::{
    Array, BooleanArray, Date32Array, Decimal128Array, Float32Array, Int32Array, StringViewArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;

use super::*;
use crate::cpu::filter_mask;

fn batch() -> RecordBatch {
    let n = 200usize;
    let nth = |i: usize, k: usize| !i.is_multiple_of(k);
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int32, true),
        Field::new("d", DataType::Date32, true),
        Field::new("m", DataType::Decimal128(15, 2), true),
        Field::new("f", DataType::Float32, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("s", DataType::Utf8View, true),
        Field::new("j", DataType::Int32, true),
    ]));
    let floats = [1.5f32, -0.0, 0.0, f32::NAN, -2.25, f32::INFINITY, 7.0];
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int32Array::from_iter(
                (0..n).map(|i| nth(i, 7).then_some((i as i32 * 37) % 50 - 25)),
            )),
            Arc::new(Date32Array::from_iter(
                (0..n).map(|i| nth(i, 11).then_some(9000 + (i as i32 * 13) % 400)),
            )),
            Arc::new(
                Decimal128Array::from_iter(
                    (0..n).map(|i| nth(i, 5).then_some((i as i128 * 7) % 11 - 2)),
                )
                .with_precision_and_scale(15, 2)
                .unwrap(),
            ),
            Arc::new(Float32Array::from_iter(
                (0..n).map(|i| nth(i, 9).then_some(floats[i % floats.len()])),
            )),
            Arc::new(BooleanArray::from_iter(
                (0..n).map(|i| nth(i, 4).then_some(i % 3 == 0)),
            )),
            Arc::new(TimestampMicrosecondArray::from_iter(
                (0..n).map(|i| nth(i, 6).then_some(i as i64 * 1_000_003)),
            )),
            Arc::new(StringViewArray::from_iter(
                (0..n).map(|i| nth(i, 8).then(|| format!("v{}", i % 5))),
            )),
            Arc::new(Int32Array::from_iter(
                (0..n).map(|i| nth(i, 10).then_some((i as i32 * 11) % 40 - 20)),
            )),
        ],
    )
    .unwrap()
}

fn cmp(column: usize, op: CmpOp, literal: Literal) -> Predicate {
    Predicate::Compare(ColumnPredicate {
        column,
        op,
        literal,
    })
}

/// Rows the CPU keeps (true, not NULL).
fn cpu_keeps(batch: &RecordBatch, predicates: &[Predicate]) -> Vec<bool> {
    let mask = filter_mask(batch, predicates).unwrap().unwrap();
    (0..mask.len())
        .map(|i| mask.is_valid(i) && mask.value(i))
        .collect()
}

/// Rows the compiled program keeps, run on the host over the columns' device layout.
fn program_keeps(batch: &RecordBatch, predicates: &[Predicate]) -> Vec<bool> {
    let program = DeviceProgram::compile(&batch.schema(), predicates).unwrap();
    run_program_on_host(&program, batch).unwrap()
}

fn like(column: usize, pattern: &str, negated: bool) -> Predicate {
    Predicate::Like {
        column,
        pattern: pattern.into(),
        negated,
    }
}

#[test]
fn a_compiled_program_keeps_exactly_the_rows_the_cpu_kernels_keep() {
    let b = batch();
    let cases: Vec<Vec<Predicate>> = vec![
        vec![cmp(0, CmpOp::Gt, Literal::Int64(3))],
        vec![cmp(0, CmpOp::NotEq, Literal::Int64(-25))],
        vec![
            cmp(1, CmpOp::GtEq, Literal::Int64(9100)),
            cmp(1, CmpOp::Lt, Literal::Int64(9300)),
        ],
        vec![cmp(2, CmpOp::LtEq, Literal::Int64(3))],
        vec![Predicate::Or(vec![
            cmp(2, CmpOp::Eq, Literal::Int64(-2)),
            cmp(2, CmpOp::Eq, Literal::Int64(8)),
        ])],
        vec![cmp(3, CmpOp::Gt, Literal::Float64(0.0))],
        vec![cmp(3, CmpOp::Eq, Literal::Float64(f64::NAN))],
        vec![cmp(3, CmpOp::Lt, Literal::Float64(-0.0))],
        vec![cmp(4, CmpOp::Eq, Literal::Int64(1))],
        vec![Predicate::Not(Box::new(cmp(
            4,
            CmpOp::Eq,
            Literal::Int64(1),
        )))],
        vec![cmp(5, CmpOp::Gt, Literal::Int64(50_000_000))],
        vec![Predicate::CompareColumns {
            left: 0,
            op: CmpOp::Lt,
            right: 7,
        }],
        vec![Predicate::Or(vec![
            Predicate::And(vec![
                Predicate::CompareColumns {
                    left: 7,
                    op: CmpOp::GtEq,
                    right: 0,
                },
                cmp(0, CmpOp::GtEq, Literal::Int64(10)),
            ]),
            Predicate::Not(Box::new(Predicate::CompareColumns {
                left: 3,
                op: CmpOp::GtEq,
                right: 3,
            })),
        ])],
        vec![Predicate::Or(vec![
            Predicate::IsNull {
                column: 0,
                negated: false,
            },
            Predicate::And(vec![
                cmp(1, CmpOp::Lt, Literal::Int64(9200)),
                Predicate::Not(Box::new(Predicate::Or(vec![
                    cmp(3, CmpOp::GtEq, Literal::Float64(1.5)),
                    Predicate::IsNull {
                        column: 2,
                        negated: true,
                    },
                ]))),
            ]),
        ])],
        vec![
            Predicate::IsNull {
                column: 5,
                negated: true,
            },
            Predicate::Not(Box::new(Predicate::Or(vec![
                cmp(0, CmpOp::Lt, Literal::Int64(0)),
                cmp(4, CmpOp::Eq, Literal::Int64(0)),
            ]))),
        ],
    ];
    for predicates in cases {
        let (cpu, device) = (cpu_keeps(&b, &predicates), program_keeps(&b, &predicates));
        assert!(
            cpu.iter().any(|k| *k) && cpu.iter().any(|k| !*k),
            "{predicates:?} should keep some rows and drop others"
        );
        assert_eq!(cpu, device, "{predicates:?}");
    }
}

#[test]
fn a_compiled_program_holds_signed_zeros_equal_as_the_cpu_path_does() {
    let b = batch();
    let f = b.column(3).as_any().downcast_ref::<Float32Array>().unwrap();
    let zeros: Vec<bool> = (0..b.num_rows())
        .map(|i| f.is_valid(i) && f.value(i) == 0.0)
        .collect();
    assert!(zeros.iter().filter(|z| **z).count() > 2, "both zeros occur");
    for literal in [0.0, -0.0] {
        let equal = [cmp(3, CmpOp::Eq, Literal::Float64(literal))];
        assert_eq!(program_keeps(&b, &equal), zeros, "f = {literal:?}");
        assert_eq!(cpu_keeps(&b, &equal), zeros, "f = {literal:?}");
        let between = [
            cmp(3, CmpOp::GtEq, Literal::Float64(literal)),
            cmp(3, CmpOp::LtEq, Literal::Float64(-literal)),
        ];
        assert_eq!(program_keeps(&b, &between), zeros, "f between ±0");
        assert_eq!(cpu_keeps(&b, &between), zeros, "f between ±0");
        let below = [cmp(3, CmpOp::Lt, Literal::Float64(literal))];
        assert_eq!(program_keeps(&b, &below), cpu_keeps(&b, &below));
        assert!(
            program_keeps(&b, &below)
                .iter()
                .zip(&zeros)
                .all(|(kept, zero)| !(*kept && *zero)),
            "no zero is below {literal:?}"
        );
    }
}

#[test]
fn literals_that_do_not_fit_the_column_type_are_unsupported() {
    let b = batch();
    for predicate in [
        cmp(0, CmpOp::Eq, Literal::Int64(i64::from(i32::MAX) + 1)),
        cmp(2, CmpOp::Eq, Literal::Int64(1_000_000_000_000_000)),
        cmp(3, CmpOp::Eq, Literal::Float64(0.1)),
        cmp(4, CmpOp::Eq, Literal::Int64(2)),
        cmp(0, CmpOp::Eq, Literal::Float64(1.0)),
        cmp(6, CmpOp::Eq, Literal::Int64(1)),
        Predicate::CompareColumns {
            left: 0,
            op: CmpOp::Eq,
            right: 1,
        },
    ] {
        let err = check_predicates(&b.schema(), std::slice::from_ref(&predicate)).unwrap_err();
        assert!(
            matches!(err, EngineError::Unsupported { .. }),
            "{predicate:?}: {err}"
        );
    }
}

#[test]
fn string_comparisons_and_percent_likes_compile_and_keep_what_the_cpu_keeps() {
    let b = batch();
    let cases: Vec<Vec<Predicate>> = vec![
        vec![Predicate::Or(vec![
            cmp(6, CmpOp::Eq, Literal::Utf8("v1".into())),
            cmp(6, CmpOp::Eq, Literal::Utf8("v3".into())),
        ])],
        vec![cmp(6, CmpOp::NotEq, Literal::Utf8("v2".into()))],
        vec![cmp(6, CmpOp::Lt, Literal::Utf8("v2".into()))],
        vec![cmp(6, CmpOp::GtEq, Literal::Utf8("v".into()))],
        vec![like(6, "v%", false), cmp(0, CmpOp::Gt, Literal::Int64(0))],
        vec![like(6, "%3", false)],
        vec![like(6, "%4%", true)],
        vec![like(6, "v%2", false)],
    ];
    for predicates in cases {
        let (cpu, device) = (cpu_keeps(&b, &predicates), program_keeps(&b, &predicates));
        assert!(
            cpu.iter().any(|k| *k) && cpu.iter().any(|k| !*k),
            "{predicates:?} should keep some rows and drop others"
        );
        assert_eq!(cpu, device, "{predicates:?}");
    }
    let err = DeviceProgram::compile(&b.schema(), &[like(6, "v_", false)]).unwrap_err();
    assert!(matches!(err, EngineError::Unsupported { .. }), "{err}");
}

#[test]
fn percent_patterns_match_like_arrow_like_does() {
    let values = [
        "",
        "a",
        "abc",
        "abcabc",
        "forest green",
        "special requests",
        "aXbXc",
        "héllo wörld",
        "%",
        "ab%",
    ];
    let patterns = [
        "",
        "%",
        "%%",
        "a%",
        "%c",
        "%b%",
        "a%c",
        "%special%requests%",
        "forest%",
        "%green",
        "%X%X%",
        "h%ö%",
        "abc",
        "%abcabc%",
        "a%b%c%",
        "%c%a",
    ];
    let array = StringViewArray::from_iter_values(values);
    for pattern in patterns {
        let want = arrow::compute::kernels::comparison::like(
            &array,
            &arrow::array::Scalar::new(StringViewArray::from_iter_values([pattern])),
        )
        .unwrap();
        for (i, value) in values.iter().enumerate() {
            assert_eq!(
                like_percent(value.as_bytes(), pattern.as_bytes()),
                want.value(i),
                "{value:?} LIKE {pattern:?}"
            );
        }
    }
}

#[test]
fn a_program_deeper_than_the_kernel_stack_is_refused() {
    let b = batch();
    let mut p = cmp(0, CmpOp::Gt, Literal::Int64(0));
    for _ in 0..MAX_PROGRAM_STACK + 4 {
        p = Predicate::Or(vec![
            cmp(0, CmpOp::Lt, Literal::Int64(-10)),
            Predicate::Not(Box::new(p)),
        ]);
    }
    let err = DeviceProgram::compile(&b.schema(), &[p.clone()]).unwrap_err();
    assert!(err.to_string().contains("stack"), "{err}");
    // The CPU evaluates it anyway.
    assert_eq!(cpu_keeps(&b, &[p]).len(), b.num_rows());
}

#[test]
fn wide_decimals_compare_with_literals_exactly_and_columns_only_while_their_values_fit_64_bits() {
    // Decimal128(25, 2): values past both i64 bounds, near them, small ones and NULLs.
    let big = 10i128.pow(22);
    let values = [
        Some(big),
        Some(-big),
        Some(i128::from(i64::MAX) + 1),
        Some(i128::from(i64::MIN) - 1),
        Some(i128::from(i64::MAX) - 1),
        Some(30_000),
        Some(29_999),
        Some(-5),
        None,
    ];
    let dt = DataType::Decimal128(25, 2);
    let schema = Arc::new(Schema::new(vec![
        Field::new("w", dt.clone(), true),
        Field::new("v", dt.clone(), true),
    ]));
    let column = || {
        Arc::new(
            Decimal128Array::from_iter(values)
                .with_precision_and_scale(25, 2)
                .unwrap(),
        ) as ArrayRef
    };
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![column(), column()]).unwrap();
    let literals = [30_000, 0, -5, i64::MAX - 1, i64::MIN + 1];
    for literal in literals {
        for op in [
            CmpOp::Eq,
            CmpOp::NotEq,
            CmpOp::Lt,
            CmpOp::LtEq,
            CmpOp::Gt,
            CmpOp::GtEq,
        ] {
            let predicates = [cmp(0, op, Literal::Int64(literal))];
            check_predicates(&schema, &predicates).unwrap();
            assert_eq!(
                program_keeps(&batch, &predicates),
                cpu_keeps(&batch, &predicates),
                "w {} {literal}",
                op.symbol()
            );
        }
    }
    // On a bound, a saturated image could equal the literal: refused.
    for bound in [i64::MAX, i64::MIN] {
        assert!(check_predicates(&schema, &[cmp(0, CmpOp::Eq, Literal::Int64(bound))]).is_err());
    }
    // Two wide columns: the CPU compares the arrays; a device program refuses a batch
    // whose compared values lost bits to their images, and runs one whose values fit.
    let columns = Predicate::CompareColumns {
        left: 0,
        op: CmpOp::Eq,
        right: 1,
    };
    check_predicates(&schema, std::slice::from_ref(&columns)).unwrap();
    let kept = cpu_keeps(&batch, std::slice::from_ref(&columns));
    assert_eq!(
        kept.iter().filter(|k| **k).count(),
        8,
        "every non-NULL row equals itself"
    );
    let program = DeviceProgram::compile(&schema, std::slice::from_ref(&columns)).unwrap();
    assert!(program.check_column_pairs(&batch).is_err());
    let fitting = batch.slice(4, 5);
    program.check_column_pairs(&fitting).unwrap();
    assert_eq!(
        program_keeps(&fitting, std::slice::from_ref(&columns)),
        cpu_keeps(&fitting, std::slice::from_ref(&columns))
    );
}
