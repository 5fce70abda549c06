//! Session settings for scanning lake Parquet.
//!
//! DataFusion does the pruning; these settings make sure all of it is on, whatever the
//! defaults of a given DataFusion or Ballista version are (Ballista, for one, changes
//! several scan defaults), and let a test or a user turn it off to compare.

use datafusion::prelude::SessionConfig;

/// Which of DataFusion's Parquet pruning mechanisms a session uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOptions {
    /// Skip row groups whose min/max statistics exclude the predicate.
    pub statistics_pruning: bool,
    /// Skip row groups whose Bloom filter excludes an `=` / `IN` value.
    pub bloom_filter_pruning: bool,
    /// Skip pages by the column/offset index.
    pub page_index_pruning: bool,
    /// Evaluate pushed-down predicates while decoding (late materialisation). Off by
    /// default: measured on the demo table it made an unprunable two-column filter 2.3×
    /// faster but an already-pruned range 1.5× slower (docs/benchmarks.md); it changes
    /// nothing about which row groups are pruned.
    pub filter_pushdown: bool,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self::pruning_on()
    }
}

impl ScanOptions {
    /// Every pruning mechanism on (the engine's default).
    pub fn pruning_on() -> Self {
        Self {
            statistics_pruning: true,
            bloom_filter_pruning: true,
            page_index_pruning: true,
            filter_pushdown: false,
        }
    }

    /// Every pruning mechanism off: the reference a pruned scan must equal.
    pub fn pruning_off() -> Self {
        Self {
            statistics_pruning: false,
            bloom_filter_pruning: false,
            page_index_pruning: false,
            filter_pushdown: false,
        }
    }

    /// Applies the options to `config`.
    pub fn apply(self, mut config: SessionConfig) -> SessionConfig {
        let parquet = &mut config.options_mut().execution.parquet;
        parquet.pruning = self.statistics_pruning;
        parquet.bloom_filter_on_read = self.bloom_filter_pruning;
        parquet.enable_page_index = self.page_index_pruning;
        parquet.pushdown_filters = self.filter_pushdown;
        config
    }
}

/// A session configuration for lake scans: [`ScanOptions::pruning_on`], and file-level
/// statistics collected when a table is registered.
pub fn lake_session_config() -> SessionConfig {
    let mut config = ScanOptions::pruning_on().apply(SessionConfig::new());
    config.options_mut().execution.collect_statistics = true;
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lake_session_turns_every_pruning_mechanism_on() {
        let config = lake_session_config();
        let parquet = &config.options().execution.parquet;
        assert!(parquet.pruning && parquet.bloom_filter_on_read && parquet.enable_page_index);
        let off = ScanOptions::pruning_off().apply(SessionConfig::new());
        let parquet = &off.options().execution.parquet;
        assert!(!parquet.pruning && !parquet.bloom_filter_on_read && !parquet.enable_page_index);
    }
}
