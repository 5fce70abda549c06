//! The Parquet compression codecs OxideLake writes with.

use std::str::FromStr;

use parquet::basic::{Compression, ZstdLevel};

use crate::StorageError;

/// Compression for Parquet data pages (`--compression none|lz4|zstd`).
///
/// LZ4 (the raw framing) decodes fastest and is the default for scratch data; zstd
/// trades decode speed for size and suits data that is written once and read remotely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParquetCompression {
    /// No compression.
    None,
    /// LZ4 raw blocks.
    #[default]
    Lz4,
    /// Zstandard at level 3.
    Zstd,
}

impl ParquetCompression {
    /// The parquet crate's codec setting.
    pub fn codec(self) -> Result<Compression, StorageError> {
        Ok(match self {
            ParquetCompression::None => Compression::UNCOMPRESSED,
            ParquetCompression::Lz4 => Compression::LZ4_RAW,
            ParquetCompression::Zstd => Compression::ZSTD(ZstdLevel::try_new(3).map_err(|e| {
                StorageError::InvalidOption {
                    what: "zstd level",
                    detail: e.to_string(),
                }
            })?),
        })
    }
}

impl FromStr for ParquetCompression {
    type Err = StorageError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "uncompressed" => Ok(Self::None),
            "lz4" => Ok(Self::Lz4),
            "zstd" => Ok(Self::Zstd),
            other => Err(StorageError::InvalidOption {
                what: "compression",
                detail: format!("{other:?} is not one of none, lz4, zstd"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_names_map_to_parquet_codecs() {
        assert_eq!(
            "none"
                .parse::<ParquetCompression>()
                .unwrap()
                .codec()
                .unwrap(),
            Compression::UNCOMPRESSED
        );
        assert_eq!(
            "LZ4"
                .parse::<ParquetCompression>()
                .unwrap()
                .codec()
                .unwrap(),
            Compression::LZ4_RAW
        );
        assert!(matches!(
            "zstd"
                .parse::<ParquetCompression>()
                .unwrap()
                .codec()
                .unwrap(),
            Compression::ZSTD(_)
        ));
        assert!("gzip".parse::<ParquetCompression>().is_err());
    }
}
