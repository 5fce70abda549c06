//! The keys of the `oxidelake.*` session options, whole (`oxidelake.memory.device_limit`),
//! as `SET`, `SHOW` and `ConfigOptions::set` spell them.
//!
//! Code that sets an option names it by one of these constants rather than a string of
//! its own, so a renamed option cannot leave a caller setting a key nobody reads. Code
//! that reads an option reads the typed [`OxideOptions`](super::OxideOptions) instead.

/// The prefix of every key: the options' `ConfigExtension::PREFIX`.
pub const PREFIX: &str = "oxidelake";

/// The backend plans are placed for (`auto`, `cpu`, `cuda`).
pub const PLACEMENT_TARGET: &str = "oxidelake.placement.target";
/// The operator kinds whose CPU paths replace DataFusion's under a CPU placement.
pub const CPU_OPERATORS: &str = "oxidelake.placement.cpu_operators";
/// Whether partitioned hash joins run as the spilling `GraceHashJoinExec`.
pub const SPILL_JOINS: &str = "oxidelake.memory.spill_joins";
/// The device bytes the GPU operators' state may claim together (a size, or `none`).
pub const DEVICE_LIMIT: &str = "oxidelake.memory.device_limit";
/// Whether hash joins' build sides filter the probe rows above the Parquet scans.
pub const JOIN_FILTER_ROWS: &str = "oxidelake.scan.join_filter_rows";
/// The largest fraction of its first rows a join filter may keep and go on filtering.
pub const JOIN_FILTER_MAX_KEPT: &str = "oxidelake.scan.join_filter_max_kept";
/// Whether the filters of Partitioned-mode hash joins are applied too.
pub const JOIN_FILTER_PARTITIONED: &str = "oxidelake.scan.join_filter_partitioned";

/// Every key, in the order `SHOW ALL` lists them and errors name them.
pub const ALL: [&str; 7] = [
    PLACEMENT_TARGET,
    CPU_OPERATORS,
    SPILL_JOINS,
    DEVICE_LIMIT,
    JOIN_FILTER_ROWS,
    JOIN_FILTER_MAX_KEPT,
    JOIN_FILTER_PARTITIONED,
];
