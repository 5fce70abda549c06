//! Numbering string keys by value, cheaply for the short strings keys usually are.
//!
//! Join keys and group keys that are strings become numbers (the join's radix keys, the
//! CPU aggregate's group digits): equal strings must get equal numbers, different strings
//! different ones.
//! Hashing every row's bytes and comparing them on a hit took about a third of a
//! string-keyed aggregate's time (flags, codes, names of a few bytes), so a string of at
//! most 12
//! bytes is first packed into one `u128` laid out as Arrow's inline string view (length
//! in the low 4 bytes, the bytes after it, zeros beyond): one-to-one, so equal packs are
//! equal strings. A `Utf8View` array already stores short strings that way. The packs
//! of the first few distinct strings are compared linearly (no hashing), later ones go
//! through a hash map; longer strings are looked up by their bytes. A string's length
//! decides its path, so a value is always looked up where it was numbered.

use std::borrow::Borrow;
use std::hash::Hash;

use arrow::array::{Array, ArrayRef, AsArray, GenericStringArray, OffsetSizeTrait};
use arrow::datatypes::DataType;
use hashbrown::HashMap;
use oxidelake_core::EngineError;

/// The longest string packed into a `u128` (Arrow's inline view limit).
const SHORT: usize = 12;

/// Distinct short strings compared linearly before a hash map takes over.
const LINEAR: usize = 8;

/// One string as a key: packed when short, its bytes otherwise.
#[derive(Debug, Clone, Copy)]
pub enum StrKey<'a> {
    /// At most [`SHORT`] bytes, packed as an inline string view.
    Short(u128),
    /// Longer: the bytes.
    Long(&'a [u8]),
}

/// The pack of `bytes` (at most [`SHORT`] long).
fn pack(bytes: &[u8]) -> u128 {
    let mut buf = [0u8; 16];
    buf[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
    buf[4..4 + bytes.len()].copy_from_slice(bytes);
    u128::from_le_bytes(buf)
}

/// The masks keeping a pack's length and its first `len` bytes, by `len`.
const PACK_MASKS: [u128; SHORT + 1] = {
    let mut masks = [0u128; SHORT + 1];
    let mut len = 0;
    while len <= SHORT {
        masks[len] = (((1u128 << (8 * len)) - 1) << 32) | 0xffff_ffff;
        len += 1;
    }
    masks
};

/// The mask keeping a pack's length and its `len` (at most [`SHORT`]) bytes.
#[inline]
fn pack_mask(len: usize) -> u128 {
    PACK_MASKS[len]
}

/// The key of the string `values[start..end]`; reads 16 bytes at once where the buffer
/// has them.
#[inline]
fn key_at(values: &[u8], start: usize, end: usize) -> StrKey<'_> {
    let len = end - start;
    if len > SHORT {
        return StrKey::Long(&values[start..end]);
    }
    match values.get(start..start + 16) {
        Some(window) => {
            let mut raw = [0u8; 16];
            raw.copy_from_slice(window);
            let raw = u128::from_le_bytes(raw);
            StrKey::Short(((raw << 32) & pack_mask(len)) | len as u128)
        }
        None => StrKey::Short(pack(&values[start..end])),
    }
}

/// Calls `f(row, key)` for every non-null string of `column` (Utf8, LargeUtf8, Utf8View).
pub fn for_each_string<'a>(
    column: &'a ArrayRef,
    mut f: impl FnMut(usize, StrKey<'a>),
) -> Result<(), EngineError> {
    fn offsets<'a, O: OffsetSizeTrait>(
        array: &'a GenericStringArray<O>,
        f: &mut impl FnMut(usize, StrKey<'a>),
    ) {
        let offsets = array.value_offsets();
        let values = array.values().as_slice();
        let nulls = array.nulls().filter(|n| n.null_count() > 0);
        for row in 0..array.len() {
            if nulls.is_none_or(|n| n.is_valid(row)) {
                let (start, end) = (offsets[row].as_usize(), offsets[row + 1].as_usize());
                f(row, key_at(values, start, end));
            }
        }
    }
    match column.data_type() {
        DataType::Utf8 => offsets(column.as_string::<i32>(), &mut f),
        DataType::LargeUtf8 => offsets(column.as_string::<i64>(), &mut f),
        DataType::Utf8View => {
            let array = column.as_string_view();
            let nulls = array.nulls().filter(|n| n.null_count() > 0);
            for (row, view) in array.views().iter().enumerate() {
                if nulls.is_some_and(|n| n.is_null(row)) {
                    continue;
                }
                let len = *view as u32 as usize;
                let key = if len <= SHORT {
                    // Inline: already a pack; the mask clears any padding bytes.
                    StrKey::Short(view & pack_mask(len))
                } else {
                    StrKey::Long(array.value(row).as_bytes())
                };
                f(row, key);
            }
        }
        other => {
            return Err(EngineError::Internal(format!(
                "key of type {other} is not a string"
            )));
        }
    }
    Ok(())
}

/// Numbers 0, 1, 2, … for distinct strings in order of first appearance. `K` holds the
/// long strings' bytes: borrowed for one batch, owned when the numbers outlive it.
#[derive(Debug)]
pub struct StringNumbers<K> {
    /// The first distinct short strings, compared linearly.
    linear: Vec<(u128, i64)>,
    /// Short strings once `linear` is full (it is then emptied into this map).
    short: HashMap<u128, i64>,
    long: HashMap<K, i64>,
    count: i64,
}

impl<K> Default for StringNumbers<K> {
    fn default() -> Self {
        Self {
            linear: Vec::with_capacity(LINEAR),
            short: HashMap::default(),
            long: HashMap::default(),
            count: 0,
        }
    }
}

impl<K: Borrow<[u8]> + Hash + Eq> StringNumbers<K> {
    /// How many distinct strings are numbered.
    pub fn len(&self) -> i64 {
        self.count
    }

    /// Whether no string is numbered yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The number of `key`, if it has one; the linear part inline, as in [`Self::number`].
    #[inline]
    pub fn get(&self, key: StrKey<'_>) -> Option<i64> {
        if let StrKey::Short(pack) = key {
            for (p, number) in &self.linear {
                if *p == pack {
                    return Some(*number);
                }
            }
        }
        self.get_hashed(key)
    }

    /// [`Self::get`] for a key not among the linear ones.
    #[inline(never)]
    fn get_hashed(&self, key: StrKey<'_>) -> Option<i64> {
        match key {
            StrKey::Short(pack) => self.short.get(&pack).copied(),
            StrKey::Long(bytes) => self.long.get(bytes).copied(),
        }
    }

    /// The number of `key`, giving it the next one if it has none. The common case, a
    /// short string among the first few, is a short loop kept inline in the caller's
    /// per-row loop; the rest is out of line.
    #[inline]
    pub fn number<'a>(&mut self, key: StrKey<'a>) -> i64
    where
        K: From<&'a [u8]>,
    {
        if let StrKey::Short(pack) = key {
            for (p, number) in &self.linear {
                if *p == pack {
                    return *number;
                }
            }
        }
        self.number_new_or_hashed(key)
    }

    /// [`Self::number`] for a key not among the linear ones.
    #[inline(never)]
    fn number_new_or_hashed<'a>(&mut self, key: StrKey<'a>) -> i64
    where
        K: From<&'a [u8]>,
    {
        let next = self.count;
        let number = match key {
            StrKey::Short(pack) => {
                if self.linear.len() < LINEAR && self.short.is_empty() {
                    self.linear.push((pack, next));
                    next
                } else {
                    if !self.linear.is_empty() {
                        self.short.extend(self.linear.drain(..));
                    }
                    *self.short.entry(pack).or_insert(next)
                }
            }
            StrKey::Long(bytes) => match self.long.get(bytes) {
                Some(number) => *number,
                None => {
                    self.long.insert(K::from(bytes), next);
                    next
                }
            },
        };
        if number == next {
            self.count += 1;
        }
        number
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{LargeStringArray, StringArray, StringViewArray};

    use super::*;

    fn numbers_of(column: &ArrayRef) -> Vec<Option<i64>> {
        let mut numbers: StringNumbers<&[u8]> = StringNumbers::default();
        let mut out = vec![None; column.len()];
        for_each_string(column, |row, key| out[row] = Some(numbers.number(key))).unwrap();
        out
    }

    #[test]
    fn equal_strings_share_a_number_across_lengths_nulls_and_all_three_string_types() {
        // Prefixes of each other, the empty string, exactly 12 and 13 bytes, more distinct
        // short strings than the linear part holds, and a value at the buffer's very end.
        let mut texts: Vec<Option<String>> = vec![
            Some("A".into()),
            Some("AB".into()),
            Some(String::new()),
            None,
            Some("twelve_bytes".into()),
            Some("thirteen_byte".into()),
            Some("A".into()),
            Some("thirteen_byte".into()),
        ];
        texts.extend((0..20).map(|i| Some(format!("k{i}"))));
        texts.extend([Some("AB".into()), Some("k19".into()), Some("A".into())]);
        let expected: Vec<Option<i64>> = {
            let mut seen: Vec<&str> = Vec::new();
            texts
                .iter()
                .map(|t| {
                    t.as_deref()
                        .map(|t| match seen.iter().position(|s| *s == t) {
                            Some(at) => at as i64,
                            None => {
                                seen.push(t);
                                seen.len() as i64 - 1
                            }
                        })
                })
                .collect()
        };
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(texts.clone())),
            Arc::new(LargeStringArray::from(texts.clone())),
            Arc::new(StringViewArray::from(texts.clone())),
        ];
        for column in &columns {
            assert_eq!(numbers_of(column), expected, "{}", column.data_type());
        }
    }

    #[test]
    fn a_string_never_numbered_is_not_found_and_numbered_ones_are() {
        let build: ArrayRef = Arc::new(StringArray::from(vec!["x", "a long string value"]));
        let mut numbers: StringNumbers<Box<[u8]>> = StringNumbers::default();
        for_each_string(&build, |_, key| {
            numbers.number(key);
        })
        .unwrap();
        let probe: ArrayRef = Arc::new(StringViewArray::from(vec![
            "a long string value",
            "x",
            "y",
            "a long string valuE",
        ]));
        let mut found = Vec::new();
        for_each_string(&probe, |_, key| found.push(numbers.get(key))).unwrap();
        assert_eq!(found, vec![Some(1), Some(0), None, None]);
        assert_eq!(numbers.len(), 2);
    }
}
