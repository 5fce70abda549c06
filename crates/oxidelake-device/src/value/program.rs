//! A computed column compiled to the postfix program the device kernel `eval_values`
//! runs (one thread per row over a small stack of images and validity flags), and the
//! same interpreter on the host, which the unit tests hold the vectorised CPU path and
//! the compilation to.

use arrow::array::Array;
use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

use super::{
    Arith, ArithMode, ValueColumn, ValueExpr, YEAR_DAYS, check_value_column, load_images,
    overflow_error, year_of_days,
};

/// Opcodes of a [`ValueProgram`] (`V_*` in `filter_project.cu`).
pub mod value_opcode {
    /// Push the slot's image and validity.
    pub const LOAD: i32 = 0;
    /// Push the literal (valid).
    pub const CONST: i32 = 1;
    /// Pop two, push their sum (argument: the [`mode`](super::mode_code)).
    pub const ADD: i32 = 2;
    /// Pop two, push their difference.
    pub const SUB: i32 = 3;
    /// Pop two, push their product.
    pub const MUL: i32 = 4;
    /// Multiply the top by the literal (a power of ten), checked.
    pub const SCALE: i32 = 5;
    /// Convert the top from an integer to a float image.
    pub const TO_FLOAT: i32 = 6;
    /// Keep the low `argument` bits of the top, sign-extended.
    pub const WRAP: i32 = 7;
    /// Push the year of the slot's day number (NULL outside `YEAR_DAYS`).
    pub const YEAR: i32 = 8;
    /// Flip the sign bit of the top (a float image).
    pub const FLIP_SIGN: i32 = 9;
}

/// The deepest stack a value program may use (`MAX_VALUE_STACK` in the kernel).
pub const MAX_VALUE_STACK: usize = 16;

/// The argument code of an arithmetic instruction (`M_*` in the kernel).
pub fn mode_code(mode: ArithMode) -> i32 {
    match mode {
        ArithMode::Wrapping => 0,
        ArithMode::Checked => 1,
        ArithMode::Float => 2,
    }
}

/// One computed column in postfix form.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ValueProgram {
    /// The input columns the program reads, one slot each.
    pub slots: Vec<usize>,
    /// Per instruction: the opcode ([`value_opcode`]).
    pub codes: Vec<i32>,
    /// Per instruction: the slot it loads (0 when none).
    pub slot_of: Vec<i32>,
    /// Per instruction: the mode code or the width to wrap to (0 when none).
    pub args: Vec<i32>,
    /// Per instruction: the literal image or the scale factor (0 when none).
    pub literals: Vec<i64>,
    /// The deepest stack the program reaches.
    pub max_depth: usize,
}

impl ValueProgram {
    /// Compiles `column` against `schema`, sharing the slot list `slots` (the columns
    /// every program of one batch reads, so they are staged once).
    pub fn compile(
        schema: &Schema,
        column: &ValueColumn,
        slots: &mut Vec<usize>,
    ) -> Result<Self, EngineError> {
        check_value_column(schema, column)?;
        let mut program = ValueProgram::default();
        let mut depth = 0;
        program.emit(&column.expr, slots, &mut depth)?;
        program.slots = slots.clone();
        if program.max_depth > MAX_VALUE_STACK {
            return Err(EngineError::unsupported(
                "computed column",
                format!(
                    "needs a stack of {} values; the kernel has {MAX_VALUE_STACK}",
                    program.max_depth
                ),
            ));
        }
        Ok(program)
    }

    /// Number of instructions.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Whether the program is empty (never, for a compiled column).
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    fn push(&mut self, code: i32, slot: i32, arg: i32, literal: i64, depth: &mut usize) {
        self.codes.push(code);
        self.slot_of.push(slot);
        self.args.push(arg);
        self.literals.push(literal);
        match code {
            value_opcode::LOAD | value_opcode::CONST | value_opcode::YEAR => *depth += 1,
            value_opcode::ADD | value_opcode::SUB | value_opcode::MUL => *depth -= 1,
            _ => {}
        }
        self.max_depth = self.max_depth.max(*depth);
    }

    fn emit(
        &mut self,
        expr: &ValueExpr,
        slots: &mut Vec<usize>,
        depth: &mut usize,
    ) -> Result<(), EngineError> {
        let slot = |c: usize, slots: &mut Vec<usize>| {
            let at = match slots.iter().position(|s| *s == c) {
                Some(at) => at,
                None => {
                    slots.push(c);
                    slots.len() - 1
                }
            };
            i32::try_from(at)
                .map_err(|_| EngineError::unsupported("computed column", "too many columns"))
        };
        match expr {
            ValueExpr::Column(c) => {
                let at = slot(*c, slots)?;
                self.push(value_opcode::LOAD, at, 0, 0, depth);
            }
            ValueExpr::Year(c) => {
                let at = slot(*c, slots)?;
                self.push(value_opcode::YEAR, at, 0, 0, depth);
            }
            ValueExpr::Int(v) => self.push(value_opcode::CONST, 0, 0, *v, depth),
            ValueExpr::Float(v) => self.push(value_opcode::CONST, 0, 0, v.to_bits() as i64, depth),
            ValueExpr::Arith {
                op,
                mode,
                left,
                right,
            } => {
                self.emit(left, slots, depth)?;
                self.emit(right, slots, depth)?;
                let code = match op {
                    Arith::Add => value_opcode::ADD,
                    Arith::Sub => value_opcode::SUB,
                    Arith::Mul => value_opcode::MUL,
                };
                self.push(code, 0, mode_code(*mode), 0, depth);
            }
            ValueExpr::Scale { input, power } => {
                self.emit(input, slots, depth)?;
                let factor = 10i64.pow(u32::from(*power));
                self.push(value_opcode::SCALE, 0, 0, factor, depth);
            }
            ValueExpr::ToFloat(input) => {
                self.emit(input, slots, depth)?;
                self.push(value_opcode::TO_FLOAT, 0, 0, 0, depth);
            }
            ValueExpr::FloatNeg(input) => {
                self.emit(input, slots, depth)?;
                self.push(value_opcode::FLIP_SIGN, 0, 0, 0, depth);
            }
            ValueExpr::Wrap { input, bits } => {
                self.emit(input, slots, depth)?;
                self.push(value_opcode::WRAP, 0, i32::from(*bits), 0, depth);
            }
        }
        Ok(())
    }
}

/// `a op b` on images in `mode` (a [`mode_code`]): the value and whether a checked
/// operation overflowed. The kernel's `apply_arith` is the same function.
pub(super) fn apply(op: i32, mode: i32, a: i64, b: i64) -> (i64, bool) {
    if mode == 2 {
        let (x, y) = (f64::from_bits(a as u64), f64::from_bits(b as u64));
        let r = match op {
            value_opcode::ADD => x + y,
            value_opcode::SUB => x - y,
            _ => x * y,
        };
        return (r.to_bits() as i64, false);
    }
    let (r, overflow) = match op {
        value_opcode::ADD => a.overflowing_add(b),
        value_opcode::SUB => a.overflowing_sub(b),
        _ => a.overflowing_mul(b),
    };
    (r, overflow && mode == 1)
}

/// The low `bits` of `v`, sign-extended.
pub(super) fn wrap(v: i64, bits: i32) -> i64 {
    let shift = 64 - bits.clamp(1, 64) as u32;
    (v << shift) >> shift
}

/// Runs `program` over `batch` row by row, exactly as the kernel does: each row's image
/// (NULL rows hold 0) and validity. Fails with the overflow error when a checked
/// operation overflows on a valid row.
pub fn run_value_program_on_host(
    program: &ValueProgram,
    batch: &RecordBatch,
) -> Result<(Vec<i64>, Vec<bool>), EngineError> {
    let rows = batch.num_rows();
    let mut images = Vec::with_capacity(program.slots.len());
    for column in &program.slots {
        images.push(load_images(batch.column(*column).as_ref())?);
    }
    let mut values = vec![0i64; rows];
    let mut valid = vec![false; rows];
    for row in 0..rows {
        let mut stack: Vec<(i64, bool)> = Vec::with_capacity(program.max_depth);
        let mut overflow = false;
        for i in 0..program.len() {
            let arg = program.args[i];
            match program.codes[i] {
                value_opcode::LOAD => {
                    let slot = program.slot_of[i] as usize;
                    let ok = batch.column(program.slots[slot]).is_valid(row);
                    stack.push((if ok { images[slot][row] } else { 0 }, ok));
                }
                value_opcode::YEAR => {
                    let slot = program.slot_of[i] as usize;
                    let days = images[slot][row];
                    let ok = batch.column(program.slots[slot]).is_valid(row)
                        && YEAR_DAYS.contains(&days);
                    stack.push((if ok { year_of_days(days) } else { 0 }, ok));
                }
                value_opcode::CONST => stack.push((program.literals[i], true)),
                value_opcode::SCALE => {
                    if let Some((v, ok)) = stack.last_mut() {
                        let (r, o) = v.overflowing_mul(program.literals[i]);
                        overflow |= o && *ok;
                        *v = r;
                    }
                }
                value_opcode::TO_FLOAT => {
                    if let Some((v, _)) = stack.last_mut() {
                        *v = (*v as f64).to_bits() as i64;
                    }
                }
                value_opcode::WRAP => {
                    if let Some((v, _)) = stack.last_mut() {
                        *v = wrap(*v, arg);
                    }
                }
                value_opcode::FLIP_SIGN => {
                    if let Some((v, ok)) = stack.last_mut() {
                        *v = if *ok { *v ^ i64::MIN } else { 0 };
                    }
                }
                code => {
                    let (b, b_ok) = stack.pop().unwrap_or((0, false));
                    let (a, a_ok) = stack.pop().unwrap_or((0, false));
                    let (r, o) = apply(code, arg, a, b);
                    let ok = a_ok && b_ok;
                    overflow |= o && ok;
                    stack.push((if ok { r } else { 0 }, ok));
                }
            }
        }
        if overflow {
            return Err(overflow_error());
        }
        if let [(v, ok)] = stack.as_slice() {
            values[row] = *v;
            valid[row] = *ok;
        }
    }
    Ok((values, valid))
}
