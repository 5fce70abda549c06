//! `DataLocation`: where a managed object's bytes are and what they must hash to, and
//! its Arrow representation as a table column.
//!
//! Column layout (a struct, storable in Parquet and Delta, which have neither unsigned
//! nor fixed-size binary types): `uri` Utf8, `mime` Utf8, `size` Int64 (bytes, never
//! negative), `sha256` Utf8 (64 lower-case hex characters).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, StringArray, StructArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Fields};
use serde::{Deserialize, Serialize};

use crate::{ObjectError, Sha256Digest};

/// An immutable managed object: its URI, MIME type, size and SHA-256 digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataLocation {
    uri: String,
    mime: String,
    size: u64,
    #[serde(with = "digest_hex")]
    sha256: Sha256Digest,
}

mod digest_hex {
    use super::Sha256Digest;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Sha256Digest, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&d.to_string())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Sha256Digest, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl DataLocation {
    /// A location (the store creates these; readers verify them).
    pub fn new(
        uri: impl Into<String>,
        mime: impl Into<String>,
        size: u64,
        sha256: Sha256Digest,
    ) -> Self {
        Self {
            uri: uri.into(),
            mime: mime.into(),
            size,
            sha256,
        }
    }

    /// The object's URI: `objects/sha256/<2>/<62>` relative to the data directory for
    /// the local store (absolute `file://` URIs of earlier versions still resolve).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The MIME type.
    pub fn mime(&self) -> &str {
        &self.mime
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The SHA-256 digest of the bytes.
    pub fn sha256(&self) -> Sha256Digest {
        self.sha256
    }
}

/// The struct fields of a DataLocation column.
pub fn data_location_fields() -> Fields {
    Fields::from(vec![
        Field::new("uri", DataType::Utf8, false),
        Field::new("mime", DataType::Utf8, false),
        Field::new("size", DataType::Int64, false),
        Field::new("sha256", DataType::Utf8, false),
    ])
}

/// The Arrow type of a DataLocation column.
pub fn data_location_type() -> DataType {
    DataType::Struct(data_location_fields())
}

/// A (nullable) DataLocation column named `name`.
pub fn data_location_field(name: &str) -> Field {
    Field::new(name, data_location_type(), true)
}

/// Whether `data_type` is the DataLocation struct (a FILE column).
pub fn is_data_location(data_type: &DataType) -> bool {
    data_type == &data_location_type()
}

/// Builds a DataLocation column (`None` = NULL).
pub fn to_array(locations: &[Option<DataLocation>]) -> Result<StructArray, ObjectError> {
    let mut sizes = Vec::with_capacity(locations.len());
    for loc in locations {
        let size = loc.as_ref().map_or(Ok(0), |l| {
            i64::try_from(l.size)
                .map_err(|_| ObjectError::InvalidLocation(format!("size {} exceeds i64", l.size)))
        })?;
        sizes.push(size);
    }
    let text = |f: fn(&DataLocation) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(
            locations
                .iter()
                .map(|l| l.as_ref().map(f).unwrap_or_default()),
        ))
    };
    let columns: Vec<ArrayRef> = vec![
        text(|l| l.uri.clone()),
        text(|l| l.mime.clone()),
        Arc::new(Int64Array::from(sizes)),
        text(|l| l.sha256.to_string()),
    ];
    let nulls = NullBuffer::from_iter(locations.iter().map(Option::is_some));
    StructArray::try_new(data_location_fields(), columns, Some(nulls))
        .map_err(|e| ObjectError::InvalidLocation(e.to_string()))
}

fn child<'a, T: 'static>(array: &'a StructArray, name: &str) -> Result<&'a T, ObjectError> {
    array
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| {
            ObjectError::InvalidLocation(format!("column has no {name} field of the expected type"))
        })
}

/// Reads a DataLocation column back (`None` for NULL rows).
pub fn from_array(array: &StructArray) -> Result<Vec<Option<DataLocation>>, ObjectError> {
    let uri = child::<StringArray>(array, "uri")?;
    let mime = child::<StringArray>(array, "mime")?;
    let size = child::<Int64Array>(array, "size")?;
    let sha = child::<StringArray>(array, "sha256")?;
    (0..array.len())
        .map(|row| {
            if array.is_null(row) {
                return Ok(None);
            }
            let bytes = u64::try_from(size.value(row)).map_err(|_| {
                ObjectError::InvalidLocation(format!("negative size {}", size.value(row)))
            })?;
            Ok(Some(DataLocation::new(
                uri.value(row),
                mime.value(row),
                bytes,
                sha.value(row).parse()?,
            )))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datalocation_arrow_roundtrip_preserves_identity() {
        let a = DataLocation::new(
            "file:///data/objects/sha256/ab/cdef",
            "application/x-mcap",
            (1u64 << 40) + 7,
            Sha256Digest::of(b"episode 42"),
        );
        let b = DataLocation::new("file:///x", "video/mp4", 0, Sha256Digest::of(b""));
        let column = to_array(&[Some(a.clone()), None, Some(b.clone())]).unwrap();
        assert_eq!(column.data_type(), &data_location_type());
        assert_eq!(from_array(&column).unwrap(), vec![Some(a), None, Some(b)]);
    }

    #[test]
    fn a_size_beyond_i64_or_a_bad_digest_is_rejected() {
        let huge = DataLocation::new("file:///x", "a/b", u64::MAX, Sha256Digest::of(b"x"));
        assert!(to_array(&[Some(huge)]).is_err());
        let column = StructArray::try_new(
            data_location_fields(),
            vec![
                Arc::new(StringArray::from(vec!["file:///x"])) as ArrayRef,
                Arc::new(StringArray::from(vec!["a/b"])),
                Arc::new(Int64Array::from(vec![-1])),
                Arc::new(StringArray::from(vec!["00"])),
            ],
            None,
        )
        .unwrap();
        assert!(from_array(&column).is_err());
    }
}
