//! The `oxidelake.*` session options (settable with `SET` in SQL), as one typed
//! DataFusion `ConfigExtension`.
//!
//! They live in this crate, below the planner, because both sides read them: the
//! planner's rules decide placement from them, and the operators read theirs (the device
//! limit) from the task's configuration when they execute. Both read the same typed
//! [`OxideOptions`] (`config.options().extensions.get::<OxideOptions>()`), never a
//! key's text, and whoever sets an option names it by a constant of [`keys`] (exported
//! as `option_keys`).
//!
//! ```text
//! SET oxidelake.memory.device_limit = '2G'
//!   └─ ConfigOptions::set ──▶ OxideOptions::set("memory.device_limit", "2G")
//!                                  │  (parsed once, per statement)
//!        SessionConfig ──────────▶ OxideOptions { device_limit: Some(2 << 30), .. }
//!          ├─ planner rules: OxideOptions::from_config
//!          └─ operators, per task: session_device_limit (a downcast, no parsing)
//! ```

mod cpu_operators;
pub mod keys;
mod target;

use std::any::Any;

use datafusion::common::config::{ConfigEntry, ConfigExtension, ExtensionOptions};
use datafusion::error::{DataFusionError, Result};

pub use cpu_operators::CpuOperators;
pub use target::PlacementTarget;

/// OxideLake's session options, registered as a DataFusion config extension so `SET
/// oxidelake.placement.target = 'cuda'` works and the value travels with the session
/// config (to a Ballista scheduler and its executors, too: they receive `entries()` and
/// set them back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OxideOptions {
    /// `oxidelake.placement.target`: auto | cpu | cuda.
    pub placement_target: PlacementTarget,
    /// `oxidelake.placement.cpu_operators`: which of our operators' CPU paths replace
    /// DataFusion's in a plan placed for the CPU ([`CpuOperators`]); none by default.
    pub cpu_operators: CpuOperators,
    /// `oxidelake.memory.spill_joins`: run partitioned hash joins as
    /// [`GraceHashJoinExec`](crate::GraceHashJoinExec), which spills its inputs to disk
    /// when the build side does not fit the memory pool. Embedded sessions turn it on
    /// with a host memory limit.
    pub spill_joins: bool,
    /// `oxidelake.memory.device_limit`: the device bytes the GPU operators' state may
    /// claim together, process-wide ([`DeviceBudget`](crate::DeviceBudget); the
    /// operators read it from the task's configuration with
    /// [`session_device_limit`](crate::session_device_limit)). Setting it runs
    /// partitioned joins as `GraceHashJoinExec` even without a host memory limit, so a
    /// build side past it is split. `None` (the default, `none` in SQL): no split, and
    /// state on a GPU claims under 80 % of the device's memory
    /// ([`default_device_limit`](crate::default_device_limit)). A size as `512M` or `2G`.
    pub device_limit: Option<usize>,
    /// `oxidelake.scan.join_filter_rows`: the rows a hash join's build side cannot match
    /// are filtered right above the Parquet scans that read them (the planner's
    /// `JoinFilterRowsRule` places [`JoinFilterExec`](crate::JoinFilterExec)). On by
    /// default.
    pub join_filter_rows: bool,
    /// `oxidelake.scan.join_filter_max_kept`: the largest fraction of its first rows a
    /// join filter may keep and go on filtering, in per mille (so the options stay `Eq`);
    /// `None`: the default, [`JOIN_FILTER_MAX_KEPT`](crate::JOIN_FILTER_MAX_KEPT).
    pub join_filter_max_kept_per_mille: Option<u16>,
    /// `oxidelake.scan.join_filter_partitioned`: whether the filters of Partitioned-mode
    /// joins are applied too. DataFusion fills those with a `CASE` over the repartitioning
    /// hash that looks each row up in its partition's hash table: a hash and a lookup
    /// per row, about what the repartition and the probe it spares cost. Off by default.
    pub join_filter_partitioned: bool,
}

impl Default for OxideOptions {
    fn default() -> Self {
        Self {
            placement_target: PlacementTarget::default(),
            cpu_operators: CpuOperators::NONE,
            spill_joins: false,
            device_limit: None,
            join_filter_rows: true,
            join_filter_max_kept_per_mille: None,
            join_filter_partitioned: false,
        }
    }
}

/// The switch that chose between the host interface and device-resident batches before
/// issue #45 made the latter the only device path; setting it says so.
const REMOVED_DEVICE_RESIDENT: &str = "oxidelake.execution.device_resident";

/// `true`/`on` or `false`/`off`, for the boolean option `key` (a whole key).
fn parse_switch(key: &str, value: &str) -> Result<bool> {
    match value.trim_matches('\'').to_ascii_lowercase().as_str() {
        "true" | "on" => Ok(true),
        "false" | "off" => Ok(false),
        other => Err(DataFusionError::Configuration(format!(
            "{key} is true or false, not {other:?}"
        ))),
    }
}

/// A size such as `512M` or `2G`, a plain number of bytes (what `SHOW` prints), or
/// `none`/empty for no limit: the value of [`keys::DEVICE_LIMIT`].
fn parse_device_limit(value: &str) -> Result<Option<usize>> {
    let value = value.trim_matches('\'').trim();
    if value.is_empty() || value.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    if let Ok(bytes) = value.parse::<usize>() {
        return Ok(Some(bytes));
    }
    datafusion::prelude::SessionContext::parse_capacity_limit(keys::DEVICE_LIMIT, value)
        .map(Some)
        .map_err(|_| {
            DataFusionError::Configuration(format!(
                "{} is a size such as 512M or 2G, a number of bytes, or none; not {value:?}",
                keys::DEVICE_LIMIT
            ))
        })
}

/// A fraction from 0 to 1 in per mille: the value of [`keys::JOIN_FILTER_MAX_KEPT`].
fn parse_max_kept_per_mille(value: &str) -> Result<u16> {
    let value = value.trim_matches('\'').trim();
    let fraction = value
        .parse::<f64>()
        .ok()
        .filter(|f| (0.0..=1.0).contains(f));
    let Some(fraction) = fraction else {
        return Err(DataFusionError::Configuration(format!(
            "{} is a fraction from 0 to 1, not {value:?}",
            keys::JOIN_FILTER_MAX_KEPT
        )));
    };
    Ok((fraction * 1000.0).round() as u16)
}

impl ConfigExtension for OxideOptions {
    const PREFIX: &'static str = keys::PREFIX;
}

impl ExtensionOptions for OxideOptions {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn cloned(&self) -> Box<dyn ExtensionOptions> {
        Box::new(self.clone())
    }

    /// DataFusion hands over `key` without the `oxidelake.` prefix; it is put back so
    /// that the match below names the same whole keys as everyone else ([`keys`]).
    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let key = format!("{}.{key}", Self::PREFIX);
        match key.as_str() {
            keys::PLACEMENT_TARGET => {
                self.placement_target = value
                    .trim_matches('\'')
                    .parse()
                    .map_err(DataFusionError::Configuration)?;
            }
            keys::CPU_OPERATORS => {
                self.cpu_operators = value.parse().map_err(DataFusionError::Configuration)?;
            }
            keys::SPILL_JOINS => self.spill_joins = parse_switch(keys::SPILL_JOINS, value)?,
            keys::DEVICE_LIMIT => self.device_limit = parse_device_limit(value)?,
            keys::JOIN_FILTER_ROWS => {
                self.join_filter_rows = parse_switch(keys::JOIN_FILTER_ROWS, value)?;
            }
            keys::JOIN_FILTER_MAX_KEPT => {
                self.join_filter_max_kept_per_mille = Some(parse_max_kept_per_mille(value)?);
            }
            keys::JOIN_FILTER_PARTITIONED => {
                self.join_filter_partitioned = parse_switch(keys::JOIN_FILTER_PARTITIONED, value)?;
            }
            REMOVED_DEVICE_RESIDENT => {
                return Err(DataFusionError::Configuration(format!(
                    "{REMOVED_DEVICE_RESIDENT} was removed: GPU operators always keep their \
                     batches on the device between transitions, and a device failure \
                     replays the batch on the CPU (docs/adr/0015-one-device-path.md)"
                )));
            }
            other => {
                return Err(DataFusionError::Configuration(format!(
                    "unknown option {other} (known: {})",
                    keys::ALL.join(", ")
                )));
            }
        }
        Ok(())
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        let entry = |key: &str, value: String, description: &'static str| ConfigEntry {
            key: key.to_string(),
            value: Some(value),
            description,
        };
        vec![
            entry(
                keys::PLACEMENT_TARGET,
                self.placement_target.to_string(),
                "Backend plans are placed for: auto (the local hardware), cpu (no \
                 rewrites), cuda (GPU operators; CPU paths where the machine \
                 lacks that GPU)",
            ),
            entry(
                keys::CPU_OPERATORS,
                self.cpu_operators.to_string(),
                "Operator kinds (filter, projection, join, aggregate; all; \
                 none) whose OxideLake CPU paths replace DataFusion's in \
                 plans placed for the CPU",
            ),
            entry(
                keys::SPILL_JOINS,
                self.spill_joins.to_string(),
                "Run partitioned hash joins as GraceHashJoinExec, which spills \
                 both inputs to disk when the build side does not fit the \
                 memory pool (embedded sessions; on with --memory-limit)",
            ),
            entry(
                keys::DEVICE_LIMIT,
                match self.device_limit {
                    Some(bytes) => bytes.to_string(),
                    None => "none".to_string(),
                },
                "Device bytes the GPU operators' state may claim together, \
                 process-wide; past it a batch runs on the CPU and a join's \
                 build side is split through spill files or built on the CPU \
                 (setting it runs partitioned joins as GraceHashJoinExec; \
                 none: 80 % of the device's memory)",
            ),
            entry(
                keys::JOIN_FILTER_ROWS,
                self.join_filter_rows.to_string(),
                "Filter the rows a hash join's build side cannot match right \
                 above the Parquet scans that read them (JoinFilterExec, \
                 embedded sessions)",
            ),
            entry(
                keys::JOIN_FILTER_MAX_KEPT,
                self.join_filter_max_kept().to_string(),
                "The largest fraction of its first 65,536 rows a join filter \
                 may keep and go on filtering (JoinFilterExec)",
            ),
            entry(
                keys::JOIN_FILTER_PARTITIONED,
                self.join_filter_partitioned.to_string(),
                "Also apply the filters of Partitioned-mode hash joins (a hash \
                 and a hash-table lookup per row) above the scans",
            ),
        ]
    }
}

impl OxideOptions {
    /// `oxidelake.scan.join_filter_max_kept` as a fraction.
    pub fn join_filter_max_kept(&self) -> f64 {
        self.join_filter_max_kept_per_mille
            .map_or(crate::JOIN_FILTER_MAX_KEPT, |p| f64::from(p) / 1000.0)
    }

    /// The options of a session config (defaults when the extension is not registered).
    pub fn from_config(config: &datafusion::config::ConfigOptions) -> Self {
        config
            .extensions
            .get::<OxideOptions>()
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionConfig;

    #[test]
    fn the_placement_target_is_settable_by_key_and_rejects_unknown_values() {
        let mut config = SessionConfig::new().with_option_extension(OxideOptions::default());
        config
            .options_mut()
            .set("oxidelake.placement.target", "cuda")
            .unwrap();
        assert_eq!(
            OxideOptions::from_config(config.options()).placement_target,
            PlacementTarget::Cuda
        );
        assert!(
            config
                .options_mut()
                .set("oxidelake.placement.target", "tpu")
                .is_err()
        );
        let err = config
            .options_mut()
            .set("oxidelake.nope", "1")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown option oxidelake.nope (known: oxidelake.placement.target, "),
            "{err}"
        );
    }

    #[test]
    fn the_device_limit_is_a_size_or_none() {
        let mut config = SessionConfig::new().with_option_extension(OxideOptions::default());
        assert_eq!(
            OxideOptions::from_config(config.options()).device_limit,
            None
        );
        let options = config.options_mut();
        options
            .set("oxidelake.memory.device_limit", "'256K'")
            .unwrap();
        assert_eq!(
            OxideOptions::from_config(options).device_limit,
            Some(256 << 10)
        );
        options.set("oxidelake.memory.device_limit", "2G").unwrap();
        assert_eq!(
            OxideOptions::from_config(options).device_limit,
            Some(2 << 30)
        );
        options
            .set("oxidelake.memory.device_limit", "1048576")
            .unwrap();
        assert_eq!(
            OxideOptions::from_config(options).device_limit,
            Some(1 << 20)
        );
        options
            .set("oxidelake.memory.device_limit", "none")
            .unwrap();
        assert_eq!(OxideOptions::from_config(options).device_limit, None);
        assert!(
            options
                .set("oxidelake.memory.device_limit", "lots")
                .is_err()
        );
    }

    #[test]
    fn spill_joins_is_a_boolean_that_is_off_by_default() {
        let mut config = SessionConfig::new().with_option_extension(OxideOptions::default());
        assert!(!OxideOptions::from_config(config.options()).spill_joins);
        config
            .options_mut()
            .set("oxidelake.memory.spill_joins", "true")
            .unwrap();
        assert!(OxideOptions::from_config(config.options()).spill_joins);
        let err = config
            .options_mut()
            .set("oxidelake.memory.spill_joins", "maybe")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("oxidelake.memory.spill_joins is true or false"),
            "{err}"
        );
    }

    #[test]
    fn join_filters_are_on_by_default_and_their_bound_is_a_fraction() {
        let mut config = SessionConfig::new().with_option_extension(OxideOptions::default());
        let options = OxideOptions::from_config(config.options());
        assert!(options.join_filter_rows);
        assert_eq!(options.join_filter_max_kept(), crate::JOIN_FILTER_MAX_KEPT);
        let options = config.options_mut();
        options
            .set("oxidelake.scan.join_filter_max_kept", "0.25")
            .unwrap();
        options
            .set("oxidelake.scan.join_filter_rows", "off")
            .unwrap();
        let parsed = OxideOptions::from_config(options);
        assert_eq!(parsed.join_filter_max_kept(), 0.25);
        assert!(!parsed.join_filter_rows);
        for bad in ["1.5", "-0.1", "half"] {
            assert!(
                options
                    .set("oxidelake.scan.join_filter_max_kept", bad)
                    .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_key_is_listed_by_entries_and_its_shown_value_sets_back() {
        // A Ballista client ships `entries()` to the scheduler, which sets each back: a
        // key `set` does not know, or a value it cannot parse, would fail every query.
        let mut options = OxideOptions {
            placement_target: PlacementTarget::Cuda,
            cpu_operators: CpuOperators::ALL,
            spill_joins: true,
            device_limit: Some(3 << 20),
            join_filter_rows: false,
            join_filter_max_kept_per_mille: Some(125),
            join_filter_partitioned: true,
        };
        let entries = options.entries();
        let listed: Vec<&str> = entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(listed, keys::ALL);
        let mut copy = SessionConfig::new().with_option_extension(OxideOptions::default());
        for entry in &entries {
            assert!(entry.key.starts_with("oxidelake."), "{}", entry.key);
            copy.options_mut()
                .set(&entry.key, entry.value.as_deref().unwrap())
                .unwrap();
        }
        assert_eq!(OxideOptions::from_config(copy.options()), options);
        // And the defaults (the limit shows as `none`, the bound as its default value).
        let shown = |options: &OxideOptions| -> Vec<(String, Option<String>)> {
            let entries = options.entries().into_iter();
            entries.map(|e| (e.key, e.value)).collect()
        };
        options = OxideOptions::default();
        for (key, value) in shown(&options) {
            copy.options_mut().set(&key, &value.unwrap()).unwrap();
        }
        assert_eq!(
            shown(&OxideOptions::from_config(copy.options())),
            shown(&options)
        );
    }
}
