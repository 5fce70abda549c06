//! CPU hash join on one Int64 key: chains of build rows per key, found through a direct
//! index (narrow key ranges) or a hash table, probed in parallel chunks with rayon for
//! large probe batches.

use arrow::array::{Array, Int64Array, UInt32Array};
use oxidelake_core::EngineError;
use rayon::prelude::*;

use crate::ops::JoinMatches;

/// Probe batches at least this long are split across rayon workers.
const PARALLEL_PROBE_ROWS: usize = 1 << 16;

/// Build-side rows by key.
///
/// The rows of one key form a chain: the index gives 1 + the first build row with the
/// key (0: none) and `next[row]` is 1 + the following row with the same key (0 ends the
/// chain), so the rows of one key are visited in ascending order without a `Vec` per key.
/// The index is one of two (see [`Index`]); which one is decided from the keys' range.
#[derive(Debug)]
pub(crate) struct CpuJoinTable {
    index: Index,
    next: Vec<u32>,
    /// No key occurs twice: every chain is one row long, so a probe reads the index
    /// only, not `next` (one random access less per match; primary-key build sides).
    unique: bool,
}

/// Keys spanning at most this many values per build row (and at least this many in all)
/// are indexed directly. Join keys are often dense (surrogate keys, the numbers of
/// numbered keys), and a direct index needs no hashing and no key comparison. At 16
/// values per row the direct index takes at most 64 bytes per build row, the hashed
/// table's size at its largest (two 16-byte slots per row rounded up to a power of two:
/// 32 to 64 bytes per row).
const DIRECT_VALUES_PER_ROW: u64 = 16;
const DIRECT_MIN_SPAN: u64 = 1 << 12;

#[derive(Debug)]
enum Index {
    /// `heads[key - min]`: for keys within a narrow range.
    Direct { min: i64, heads: Vec<u32> },
    /// Open addressing with linear probing, found by Fibonacci hashing of the key. Each
    /// slot holds its key and chain head side by side, so a probe touches one cache
    /// line; the table is at least twice the number of build rows, so probes stay short.
    Hashed {
        shift: u32,
        mask: usize,
        slots: Vec<(i64, u32)>,
    },
}

impl Index {
    /// The index for `keys` (its `rows` rows): direct when their range is narrow.
    fn for_keys(keys: &Int64Array, rows: usize) -> Self {
        let (min, max) = (arrow::compute::min(keys), arrow::compute::max(keys));
        if let (Some(min), Some(max)) = (min, max) {
            let span = max.abs_diff(min).saturating_add(1);
            let limit = (rows as u64)
                .saturating_mul(DIRECT_VALUES_PER_ROW)
                .max(DIRECT_MIN_SPAN);
            if span <= limit {
                return Index::Direct {
                    min,
                    heads: vec![0; span as usize],
                };
            }
        }
        let capacity = (rows.max(1) * 2).next_power_of_two().max(16);
        Index::Hashed {
            shift: 64 - capacity.trailing_zeros(),
            mask: capacity - 1,
            slots: vec![(0, 0); capacity],
        }
    }

    fn slot(shift: u32, key: i64) -> usize {
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
    }

    /// The chain head of `key`, for inserting a row in front of it.
    fn head_mut(&mut self, key: i64) -> &mut u32 {
        match self {
            Index::Direct { min, heads } => &mut heads[key.abs_diff(*min) as usize],
            Index::Hashed { shift, mask, slots } => {
                let mut s = Self::slot(*shift, key);
                loop {
                    let (k, head) = slots[s];
                    if head == 0 || k == key {
                        slots[s].0 = key;
                        return &mut slots[s].1;
                    }
                    s = (s + 1) & *mask;
                }
            }
        }
    }

    fn allocated_bytes(&self) -> usize {
        match self {
            Index::Direct { heads, .. } => heads.capacity() * 4,
            Index::Hashed { slots, .. } => slots.capacity() * std::mem::size_of::<(i64, u32)>(),
        }
    }
}

/// The chain head of `key` in a direct index (0: none); keys below `min` wrap to
/// offsets far past the end.
#[inline]
fn direct_head(min: i64, heads: &[u32], key: i64) -> u32 {
    let offset = key.wrapping_sub(min) as u64;
    if offset < heads.len() as u64 {
        heads[offset as usize]
    } else {
        0
    }
}

/// The chain head of `key` in a hashed index (0: none).
#[inline]
fn hashed_head(shift: u32, mask: usize, slots: &[(i64, u32)], key: i64) -> u32 {
    let mut s = Index::slot(shift, key);
    loop {
        let (k, head) = slots[s];
        if head == 0 || k == key {
            return head;
        }
        s = (s + 1) & mask;
    }
}

impl CpuJoinTable {
    /// Indexes the non-null keys; NULL keys never join.
    pub(crate) fn build(keys: &Int64Array) -> Result<Self, EngineError> {
        let rows = keys.len();
        if rows >= (u32::MAX / 2) as usize {
            return Err(EngineError::unsupported(
                "hash join build side",
                format!("{rows} rows exceed the 32-bit row index of the v1 join"),
            ));
        }
        let mut table = Self {
            index: Index::for_keys(keys, rows),
            next: vec![0; rows],
            unique: true,
        };
        let values = keys.values();
        for row in (0..rows).rev() {
            if keys.is_null(row) {
                continue;
            }
            let head = table.index.head_mut(values[row]);
            table.unique &= *head == 0;
            table.next[row] = *head;
            *head = row as u32 + 1;
        }
        Ok(table)
    }

    fn probe_range(&self, keys: &Int64Array, start: usize, end: usize) -> (Vec<u32>, Vec<u32>) {
        match self.unique {
            true => self.probe_range_with::<true>(keys, start, end),
            false => self.probe_range_with::<false>(keys, start, end),
        }
    }

    fn probe_range_with<const UNIQUE: bool>(
        &self,
        keys: &Int64Array,
        start: usize,
        end: usize,
    ) -> (Vec<u32>, Vec<u32>) {
        // One loop per index kind (and chain kind), so the lookup inlines into it.
        match &self.index {
            Index::Direct { min, heads } => {
                self.probe_with::<UNIQUE>(keys, start, end, |key| direct_head(*min, heads, key))
            }
            Index::Hashed { shift, mask, slots } => {
                self.probe_with::<UNIQUE>(keys, start, end, |key| {
                    hashed_head(*shift, *mask, slots, key)
                })
            }
        }
    }

    /// Whether each probe row's key has a build row (a NULL key never has): what a semi
    /// or anti join needs, one lookup a row and no pairs listed.
    /// Large probe batches are split across rayon workers, as [`Self::probe`] splits them.
    pub(crate) fn matched(&self, keys: &Int64Array) -> Vec<bool> {
        let values = keys.values();
        let found = |row: usize| {
            keys.is_valid(row)
                && match &self.index {
                    Index::Direct { min, heads } => direct_head(*min, heads, values[row]) != 0,
                    Index::Hashed { shift, mask, slots } => {
                        hashed_head(*shift, *mask, slots, values[row]) != 0
                    }
                }
        };
        if keys.len() < PARALLEL_PROBE_ROWS {
            (0..keys.len()).map(found).collect()
        } else {
            (0..keys.len()).into_par_iter().map(found).collect()
        }
    }

    fn probe_with<const UNIQUE: bool>(
        &self,
        keys: &Int64Array,
        start: usize,
        end: usize,
        head: impl Fn(i64) -> u32,
    ) -> (Vec<u32>, Vec<u32>) {
        let mut build = Vec::with_capacity(end - start);
        let mut probe = Vec::with_capacity(end - start);
        let values = keys.values();
        let nulls = keys.nulls().filter(|n| n.null_count() > 0);
        for row in start..end {
            if nulls.is_some_and(|n| n.is_null(row)) {
                continue;
            }
            let mut link = head(values[row]);
            if UNIQUE {
                if link != 0 {
                    build.push(link - 1);
                    probe.push(row as u32);
                }
                continue;
            }
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
        self.index.allocated_bytes() + self.next.capacity() * 4
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
    fn build_sides_without_repeated_keys_are_probed_without_chains_and_give_the_same_pairs() {
        // Narrow (direct index) and wide (hashed) unique keys, NULLs not counting as keys.
        for build in [
            Int64Array::from(vec![Some(5), None, Some(7), Some(6), None]),
            Int64Array::from(vec![Some(5 << 40), None, Some(-7), Some(6), None]),
        ] {
            let table = CpuJoinTable::build(&build).unwrap();
            assert!(table.unique);
            let values = build.values();
            let probe = Int64Array::from(vec![Some(values[3]), Some(1), Some(values[0]), None]);
            let m = table.probe(&probe).unwrap();
            assert_eq!(m.build_indices.values().to_vec(), vec![3, 0]);
            assert_eq!(m.probe_indices.values().to_vec(), vec![0, 2]);
        }
        let repeated = CpuJoinTable::build(&Int64Array::from(vec![4, 9, 4])).unwrap();
        assert!(!repeated.unique);
        let m = repeated.probe(&Int64Array::from(vec![4])).unwrap();
        assert_eq!(m.build_indices.values().to_vec(), vec![0, 2]);
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
    fn narrow_key_ranges_are_indexed_directly_and_wide_ones_hashed_with_the_same_pairs_and_matches()
    {
        // Dense keys with duplicates, NULLs and probe keys outside the range on both ends.
        let build = Int64Array::from(vec![Some(10), Some(12), None, Some(10), Some(11)]);
        let table = CpuJoinTable::build(&build).unwrap();
        assert!(matches!(table.index, Index::Direct { min: 10, .. }));
        let probe = Int64Array::from(vec![
            Some(9),
            Some(10),
            None,
            Some(13),
            Some(i64::MIN),
            Some(11),
        ]);
        let m = table.probe(&probe).unwrap();
        assert_eq!(m.build_indices.values().to_vec(), vec![0, 3, 4]);
        assert_eq!(m.probe_indices.values().to_vec(), vec![1, 1, 5]);
        let flags = [false, true, false, false, false, true];
        assert_eq!(
            table.matched(&probe),
            flags,
            "a key found once, a NULL never"
        );
        // The same keys spread far apart are hashed, and join the same way.
        let spread = |v: Option<i64>| v.map(|k| k << 40);
        let build = Int64Array::from_iter(build.iter().map(spread));
        let table = CpuJoinTable::build(&build).unwrap();
        assert!(matches!(table.index, Index::Hashed { .. }));
        let probe = Int64Array::from_iter(probe.iter().map(|v| v.map(|k| k.wrapping_shl(40))));
        let m = table.probe(&probe).unwrap();
        assert_eq!(m.build_indices.values().to_vec(), vec![0, 3, 4]);
        assert_eq!(m.probe_indices.values().to_vec(), vec![1, 1, 5]);
        let flags = [false, true, false, false, false, true];
        assert_eq!(
            table.matched(&probe),
            flags,
            "a key found once, a NULL never"
        );
    }

    #[test]
    fn large_probes_split_across_threads_give_the_same_pairs_in_order_and_the_same_matches() {
        let build = Int64Array::from_iter_values((0..1000).map(|i| i % 100));
        let table = CpuJoinTable::build(&build).unwrap();
        let probe =
            Int64Array::from_iter_values((0..(PARALLEL_PROBE_ROWS as i64 + 77)).map(|i| i % 150));
        let m = table.probe(&probe).unwrap();
        let serial = table.probe_range(&probe, 0, probe.len());
        assert_eq!(m.build_indices.values().to_vec(), serial.0);
        assert_eq!(m.probe_indices.values().to_vec(), serial.1);
        assert!(table.allocated_bytes() > 0);
        // The matched rows of a large probe, split the same way: those with a pair.
        let mut with_pair = vec![false; probe.len()];
        serial.1.iter().for_each(|p| with_pair[*p as usize] = true);
        assert_eq!(table.matched(&probe), with_pair);
    }
}
