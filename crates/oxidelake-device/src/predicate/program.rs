//! A predicate conjunction compiled to the postfix program the device kernel
//! `eval_predicates` runs, and the same interpreter on the host (the reference unit tests
//! hold the compilation to).

use arrow::array::Array;
use arrow::datatypes::Schema;
use oxidelake_core::EngineError;

use super::images::{float_order_key, string_column, write_images};
use super::{Literal, Predicate, ValueClass, check_predicates, value_class};

/// Opcodes of a [`DeviceProgram`] (`I_*` in `filter_project.cu`).
pub mod opcode {
    /// Push `slot op literal` (NULL when the slot's value is NULL).
    pub const CMP: i32 = 0;
    /// Push `slot IS NULL` (`IS NOT NULL` when the argument is 1).
    pub const IS_NULL: i32 = 1;
    /// Pop two, push their Kleene AND.
    pub const AND: i32 = 2;
    /// Pop two, push their Kleene OR.
    pub const OR: i32 = 3;
    /// Pop one, push its negation (NULL stays NULL).
    pub const NOT: i32 = 4;
    /// Push `slot op other_slot` (the literal field holds the other slot; NULL when
    /// either value is NULL).
    pub const CMP_SLOTS: i32 = 5;
    /// Push `string slot op pool string` (the literal field holds the pool index),
    /// comparing bytes lexicographically as Arrow does.
    pub const CMP_STR: i32 = 6;
    /// Push `string slot LIKE pool pattern` (`NOT LIKE` when the argument is 1); the
    /// pattern holds `%` wildcards only.
    pub const LIKE: i32 = 7;
}

/// The deepest value stack a device program may use (`MAX_STACK` in the kernel).
pub const MAX_PROGRAM_STACK: usize = 32;

/// A predicate conjunction compiled to postfix form for a device kernel: one thread per
/// row runs the instructions over a small stack of three-valued results.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceProgram {
    /// The input columns the program reads, one slot each, and how the slot holds them:
    /// integer or float 8-byte images, or strings (offsets and bytes).
    pub slots: Vec<(usize, ValueClass)>,
    /// Per instruction: the opcode ([`opcode`]).
    pub codes: Vec<i32>,
    /// Per instruction: the slot it reads (0 when it reads none).
    pub slot_of: Vec<i32>,
    /// Per instruction: the comparison code ([`CmpOp::code`]) or the IS NULL negation.
    pub args: Vec<i32>,
    /// Per instruction: the literal's 8-byte image (0 when it has none).
    pub literals: Vec<i64>,
    /// The deepest stack the program reaches.
    pub max_depth: usize,
    /// The string literals and LIKE patterns, back to back.
    pub strings: Vec<u8>,
    /// Where each pool string starts in `strings`, plus its end: string `i` is
    /// `strings[string_offsets[i]..string_offsets[i + 1]]`.
    pub string_offsets: Vec<i32>,
}

impl Default for DeviceProgram {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            codes: Vec::new(),
            slot_of: Vec::new(),
            args: Vec::new(),
            literals: Vec::new(),
            max_depth: 0,
            strings: Vec::new(),
            string_offsets: vec![0],
        }
    }
}

impl DeviceProgram {
    /// Compiles the conjunction `predicates` against `schema`. Fails with `Unsupported`
    /// for string comparisons, types without an 8-byte image and programs deeper than
    /// [`MAX_PROGRAM_STACK`].
    pub fn compile(schema: &Schema, predicates: &[Predicate]) -> Result<Self, EngineError> {
        check_predicates(schema, predicates)?;
        let mut program = DeviceProgram::default();
        let mut depth = 0usize;
        emit_all(&mut program, schema, predicates, opcode::AND, &mut depth)?;
        if program.max_depth > MAX_PROGRAM_STACK {
            return Err(EngineError::unsupported(
                "device predicate",
                format!(
                    "needs a stack of {} values; the kernel has {MAX_PROGRAM_STACK}",
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

    /// Checks that every value of `batch` a column-to-column comparison reads has an
    /// exact image. A decimal wider than 18 digits saturates at the i64 bounds, so two
    /// different values could compare equal; such a batch is `Unsupported` on the device
    /// and runs on the CPU, which compares the arrays themselves. (A comparison with a
    /// literal stays exact under saturation, `literal_array`.)
    pub fn check_column_pairs(
        &self,
        batch: &arrow::record_batch::RecordBatch,
    ) -> Result<(), EngineError> {
        use arrow::array::AsArray;
        use arrow::datatypes::{DataType, Decimal128Type};
        for (i, code) in self.codes.iter().enumerate() {
            if *code != opcode::CMP_SLOTS {
                continue;
            }
            for slot in [self.slot_of[i] as usize, self.literals[i] as usize] {
                let Some((column, _)) = self.slots.get(slot) else {
                    continue;
                };
                let array = batch.column(*column);
                if !matches!(array.data_type(), DataType::Decimal128(p, _) if *p > 18) {
                    continue;
                }
                let values = array.as_primitive::<Decimal128Type>();
                let beyond = values.iter().flatten().any(|v| i64::try_from(v).is_err());
                if beyond {
                    return Err(EngineError::unsupported(
                        "device predicate",
                        "a compared decimal in this batch needs more than 64 bits",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether the program has no instructions (every row passes).
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    fn slot(&mut self, schema: &Schema, column: usize) -> Result<i32, EngineError> {
        let dt = schema.field(column).data_type();
        let class = value_class(dt).ok_or_else(|| {
            EngineError::unsupported(
                "device predicate",
                format!("column {} is {dt}", schema.field(column).name()),
            )
        })?;
        let at = match self.slots.iter().position(|(c, _)| *c == column) {
            Some(at) => at,
            None => {
                self.slots.push((column, class));
                self.slots.len() - 1
            }
        };
        i32::try_from(at)
            .map_err(|_| EngineError::unsupported("device predicate", "too many columns"))
    }

    /// Adds `text` to the string pool; returns its index.
    fn pool(&mut self, text: &str) -> Result<i64, EngineError> {
        self.strings.extend_from_slice(text.as_bytes());
        let end = i32::try_from(self.strings.len()).map_err(|_| {
            EngineError::unsupported("device predicate", "string literals over 2 GiB")
        })?;
        self.string_offsets.push(end);
        Ok(self.string_offsets.len() as i64 - 2)
    }

    fn class(&self, slot: i32) -> ValueClass {
        self.slots
            .get(slot as usize)
            .map_or(ValueClass::Int, |(_, class)| *class)
    }

    fn push(&mut self, code: i32, slot: i32, arg: i32, literal: i64, depth: &mut usize) {
        self.codes.push(code);
        self.slot_of.push(slot);
        self.args.push(arg);
        self.literals.push(literal);
        match code {
            opcode::CMP | opcode::IS_NULL | opcode::CMP_SLOTS | opcode::CMP_STR | opcode::LIKE => {
                *depth += 1
            }
            opcode::AND | opcode::OR => *depth -= 1,
            _ => {}
        }
        self.max_depth = self.max_depth.max(*depth);
    }
}

/// Emits `children` combined with `join` (AND or OR); an empty AND is true, an empty
/// OR false (both written as a comparison-free constant: `x IS NULL OR x IS NOT NULL`
/// would need a column, so they are rejected instead; the planner never emits them).
fn emit_all(
    program: &mut DeviceProgram,
    schema: &Schema,
    children: &[Predicate],
    join: i32,
    depth: &mut usize,
) -> Result<(), EngineError> {
    for (i, child) in children.iter().enumerate() {
        emit(program, schema, child, depth)?;
        if i > 0 {
            program.push(join, 0, 0, 0, depth);
        }
    }
    if children.is_empty() && join == opcode::OR {
        return Err(EngineError::unsupported("device predicate", "an empty OR"));
    }
    Ok(())
}

fn emit(
    program: &mut DeviceProgram,
    schema: &Schema,
    predicate: &Predicate,
    depth: &mut usize,
) -> Result<(), EngineError> {
    match predicate {
        Predicate::Compare(p) => {
            let slot = program.slot(schema, p.column)?;
            let (code, image) = match &p.literal {
                Literal::Int64(v) => (opcode::CMP, *v),
                Literal::Float64(v) => (opcode::CMP, v.to_bits() as i64),
                Literal::Utf8(v) => (opcode::CMP_STR, program.pool(v)?),
            };
            program.push(code, slot, p.op.code(), image, depth);
        }
        Predicate::CompareColumns { left, op, right } => {
            let (l, r) = (program.slot(schema, *left)?, program.slot(schema, *right)?);
            if program.class(l) == ValueClass::Str {
                return Err(EngineError::unsupported(
                    "device predicate",
                    "comparing two string columns runs on the CPU",
                ));
            }
            program.push(opcode::CMP_SLOTS, l, op.code(), i64::from(r), depth);
        }
        Predicate::Like {
            column,
            pattern,
            negated,
        } => {
            if pattern.contains(['_', '\\']) {
                return Err(EngineError::unsupported(
                    "device predicate",
                    "LIKE with _ or escapes runs on the CPU (the device matches % only)",
                ));
            }
            let slot = program.slot(schema, *column)?;
            let at = program.pool(pattern)?;
            program.push(opcode::LIKE, slot, i32::from(*negated), at, depth);
        }
        Predicate::IsNull { column, negated } => {
            let slot = program.slot(schema, *column)?;
            program.push(opcode::IS_NULL, slot, i32::from(*negated), 0, depth);
        }
        Predicate::And(c) => {
            if c.is_empty() {
                return Err(EngineError::unsupported("device predicate", "an empty AND"));
            }
            emit_all(program, schema, c, opcode::AND, depth)?;
        }
        Predicate::Or(c) => emit_all(program, schema, c, opcode::OR, depth)?,
        Predicate::Not(p) => {
            emit(program, schema, p, depth)?;
            program.push(opcode::NOT, 0, 0, 0, depth);
        }
    }
    Ok(())
}

/// Evaluates a compiled program on the host, row by row, exactly as the kernel does:
/// the reference that checks compilation kept the tree's meaning (unit tests compare it
/// with the CPU kernels).
pub fn run_program_on_host(
    program: &DeviceProgram,
    batch: &arrow::record_batch::RecordBatch,
) -> Result<Vec<bool>, EngineError> {
    const NULL: u8 = 2;
    program.check_column_pairs(batch)?;
    let rows = batch.num_rows();
    let mut images = Vec::with_capacity(program.slots.len());
    let mut strings = Vec::with_capacity(program.slots.len());
    let mut valid: Vec<Vec<bool>> = Vec::with_capacity(program.slots.len());
    for (column, class) in &program.slots {
        let array = batch.column(*column);
        let mut out = vec![0i64; rows];
        if *class == ValueClass::Str {
            strings.push(Some(string_column(array.as_ref())?));
        } else {
            write_images(array.as_ref(), 0..rows, &mut out)?;
            strings.push(None);
        }
        images.push(out);
        valid.push((0..rows).map(|i| array.is_valid(i)).collect());
    }
    let pool = |i: i64| {
        let i = i as usize;
        let (a, b) = (
            program.string_offsets[i] as usize,
            program.string_offsets[i + 1] as usize,
        );
        &program.strings[a..b]
    };
    let mut out = Vec::with_capacity(rows);
    for row in 0..rows {
        let mut stack: Vec<u8> = Vec::with_capacity(program.max_depth);
        for i in 0..program.len() {
            let slot = program.slot_of[i] as usize;
            let code = program.codes[i];
            match code {
                opcode::CMP | opcode::CMP_SLOTS => {
                    let other = (code == opcode::CMP_SLOTS).then_some(program.literals[i] as usize);
                    if !valid[slot][row] || other.is_some_and(|o| !valid[o][row]) {
                        stack.push(NULL);
                        continue;
                    }
                    let r = other.map_or(program.literals[i], |o| images[o][row]);
                    let (mut l, mut r) = (images[slot][row], r);
                    if program.slots[slot].1 == ValueClass::Float {
                        l = float_order_key(l);
                        r = float_order_key(r);
                    }
                    stack.push(u8::from(holds(l.cmp(&r), program.args[i])));
                }
                opcode::CMP_STR | opcode::LIKE => {
                    let Some(Some(values)) = strings.get(slot) else {
                        stack.push(NULL);
                        continue;
                    };
                    if !valid[slot][row] {
                        stack.push(NULL);
                        continue;
                    }
                    let value = values.value(row).as_bytes();
                    let literal = pool(program.literals[i]);
                    let t = if code == opcode::CMP_STR {
                        holds(value.cmp(literal), program.args[i])
                    } else {
                        like_percent(value, literal) != (program.args[i] != 0)
                    };
                    stack.push(u8::from(t));
                }
                opcode::IS_NULL => {
                    let null = !valid[slot][row];
                    stack.push(u8::from(null != (program.args[i] != 0)));
                }
                opcode::NOT => {
                    if let Some(v) = stack.last_mut() {
                        *v = if *v == NULL { NULL } else { 1 - *v };
                    }
                }
                code => {
                    let b = stack.pop().unwrap_or(NULL);
                    let a = stack.pop().unwrap_or(NULL);
                    stack.push(kleene(code == opcode::AND, a, b));
                }
            }
        }
        out.push(stack.len() == 1 && stack[0] == 1);
    }
    Ok(out)
}

/// Whether an ordering satisfies the comparison with code `op` ([`CmpOp::code`]).
fn holds(order: std::cmp::Ordering, op: i32) -> bool {
    use std::cmp::Ordering::*;
    match op {
        0 => order == Equal,
        1 => order == Less,
        2 => order != Greater,
        3 => order == Greater,
        4 => order != Less,
        _ => order != Equal,
    }
}

/// `value LIKE pattern` for a pattern whose only wildcard is `%` (no `_`, no escapes),
/// on bytes: the algorithm the device kernel runs. The first segment is a prefix, the
/// last a suffix, and the ones between are found leftmost-first in order, which is
/// exact for `%`-only patterns (and byte matching is exact on UTF-8 for them).
pub fn like_percent(value: &[u8], pattern: &[u8]) -> bool {
    let Some(first) = pattern.iter().position(|b| *b == b'%') else {
        return value == pattern;
    };
    let last = pattern.iter().rposition(|b| *b == b'%').unwrap_or(first);
    let (prefix, suffix) = (&pattern[..first], &pattern[last + 1..]);
    if prefix.len() + suffix.len() > value.len()
        || !value.starts_with(prefix)
        || !value.ends_with(suffix)
    {
        return false;
    }
    let (mut pos, end) = (prefix.len(), value.len() - suffix.len());
    for segment in pattern[first + 1..last.max(first + 1)].split(|b| *b == b'%') {
        if segment.is_empty() {
            continue;
        }
        match value[pos..end]
            .windows(segment.len())
            .position(|w| w == segment)
        {
            Some(at) => pos += at + segment.len(),
            None => return false,
        }
    }
    true
}

fn kleene(and: bool, a: u8, b: u8) -> u8 {
    let (dominant, other) = if and { (0, 1) } else { (1, 0) };
    if a == dominant || b == dominant {
        dominant
    } else if a == other && b == other {
        other
    } else {
        2
    }
}
