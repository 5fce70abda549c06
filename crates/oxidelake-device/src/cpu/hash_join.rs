//! CPU hash join on one Int64 key: a chained hash table over the build keys, probed
//! in parallel chunks with rayon for large probe batches.

use arrow::array::{Array, Int64Array, UInt32Array};
use oxidelake_core::EngineError;
use rayon::prelude::*;

use crate::ops::JoinMatches;

/// Probe batches at least this long are split across rayon workers.
const PARALLEL_PROBE_ROWS: usize = 1 << 16;

/// Build-side rows by key, in an open-addressing table with linear probing.
///
/// Slot `s` holds a key and the head of its chain: `heads[s]` is 1 + the first build row
/// with that key (0 marks an empty slot) and `next[row]` is 1 + the following row with the
/// same key (0 ends the chain), so the rows of one key are visited in ascending order
/// without a `Vec` per key. Slots are found by Fibonacci hashing of the key; the table is
/// at least twice the number of build rows, so probes stay short.
#[derive(Debug)]
pub(crate) struct CpuJoinTable {
    shift: u32,
    mask: usize,
    keys: Vec<i64>,
    heads: Vec<u32>,
    next: Vec<u32>,
}

impl CpuJoinTable {
    fn slot(&self, key: i64) -> usize {
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Indexes the non-null keys; NULL keys never join.
    pub(crate) fn build(keys: &Int64Array) -> Result<Self, EngineError> {
        let rows = keys.len();
        if rows >= (u32::MAX / 2) as usize {
            return Err(EngineError::unsupported(
                "hash join build side",
                format!("{rows} rows exceed the 32-bit row index of the v1 join"),
            ));
        }
        let capacity = (rows.max(1) * 2).next_power_of_two().max(16);
        let mut table = Self {
            shift: 64 - capacity.trailing_zeros(),
            mask: capacity - 1,
            keys: vec![0; capacity],
            heads: vec![0; capacity],
            next: vec![0; rows],
        };
        let values = keys.values();
        for row in (0..rows).rev() {
            if keys.is_null(row) {
                continue;
            }
            let key = values[row];
            let mut s = table.slot(key);
            loop {
                if table.heads[s] == 0 {
                    table.keys[s] = key;
                    table.heads[s] = row as u32 + 1;
                    break;
                }
                if table.keys[s] == key {
                    table.next[row] = table.heads[s];
                    table.heads[s] = row as u32 + 1;
                    break;
                }
                s = (s + 1) & table.mask;
            }
        }
        Ok(table)
    }

    /// 1 + the first build row with `key`, or 0.
    fn head(&self, key: i64) -> u32 {
        let mut s = self.slot(key);
        loop {
            let head = self.heads[s];
            if head == 0 || self.keys[s] == key {
                return head;
            }
            s = (s + 1) & self.mask;
        }
    }

    fn probe_range(&self, keys: &Int64Array, start: usize, end: usize) -> (Vec<u32>, Vec<u32>) {
        let mut build = Vec::with_capacity(end - start);
        let mut probe = Vec::with_capacity(end - start);
        let values = keys.values();
        let nulls = keys.nulls().filter(|n| n.null_count() > 0);
        for row in start..end {
            if nulls.is_some_and(|n| n.is_null(row)) {
                continue;
            }
            let mut link = self.head(values[row]);
            while link != 0 {
                let b = link - 1;
                build.push(b);
                probe.push(row as u32);
                link = self.next[b as usize];
            }
        }
        (build, probe)
    }

    /// All (build row, probe row) pairs with equal, non-null keys, in probe order.
    pub(crate) fn probe(&self, keys: &Int64Array) -> Result<JoinMatches, EngineError> {
        let rows = keys.len();
        if rows >= u32::MAX as usize {
            return Err(EngineError::unsupported(
                "hash join probe batch",
                format!("{rows} rows"),
            ));
        }
        let (build, probe) = if rows < PARALLEL_PROBE_ROWS {
            self.probe_range(keys, 0, rows)
        } else {
            let chunk = rows.div_ceil(rayon::current_num_threads().max(1) * 4);
            let parts: Vec<(Vec<u32>, Vec<u32>)> = (0..rows)
                .step_by(chunk)
                .collect::<Vec<_>>()
                .into_par_iter()
                .map(|start| self.probe_range(keys, start, (start + chunk).min(rows)))
                .collect();
            let total: usize = parts.iter().map(|(b, _)| b.len()).sum();
            let (mut build, mut probe) = (Vec::with_capacity(total), Vec::with_capacity(total));
            for (b, p) in parts {
                build.extend_from_slice(&b);
                probe.extend_from_slice(&p);
            }
            (build, probe)
        };
        Ok(JoinMatches {
            build_indices: UInt32Array::from(build),
            probe_indices: UInt32Array::from(probe),
        })
    }

    /// Bytes held by the table (for telemetry).
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.keys.capacity() * 8 + (self.heads.capacity() + self.next.capacity()) * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_join_every_pair_and_null_keys_join_nothing() {
        let build = Int64Array::from(vec![Some(1), Some(2), Some(1), None]);
        let table = CpuJoinTable::build(&build).unwrap();
        let probe = Int64Array::from(vec![Some(1), None, Some(3), Some(2)]);
        let m = table.probe(&probe).unwrap();
        assert_eq!(m.build_indices.values().to_vec(), vec![0, 2, 1]);
        assert_eq!(m.probe_indices.values().to_vec(), vec![0, 0, 3]);
    }

    #[test]
    fn colliding_and_extreme_keys_are_kept_apart() {
        // Keys that differ only in high bits, plus the extremes, in one small table.
        let build = Int64Array::from(vec![i64::MIN, i64::MAX, 0, 1 << 40, 2 << 40, 0, -1]);
        let table = CpuJoinTable::build(&build).unwrap();
        let probe = Int64Array::from(vec![0, 1 << 40, 3 << 40, i64::MIN, -1, i64::MAX]);
        let m = table.probe(&probe).unwrap();
        assert_eq!(m.build_indices.values().to_vec(), vec![2, 5, 3, 0, 6, 1]);
        assert_eq!(m.probe_indices.values().to_vec(), vec![0, 0, 1, 3, 4, 5]);
    }

    #[test]
    fn large_probes_split_across_threads_give_the_same_pairs_in_order() {
        let build = Int64Array::from_iter_values((0..1000).map(|i| i % 100));
        let table = CpuJoinTable::build(&build).unwrap();
        let probe =
            Int64Array::from_iter_values((0..(PARALLEL_PROBE_ROWS as i64 + 77)).map(|i| i % 150));
        let m = table.probe(&probe).unwrap();
        let serial = table.probe_range(&probe, 0, probe.len());
        assert_eq!(m.build_indices.values().to_vec(), serial.0);
        assert_eq!(m.probe_indices.values().to_vec(), serial.1);
        assert!(table.allocated_bytes() > 0);
    }
}
