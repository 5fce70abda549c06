//! The `oxidelake.*` session options (settable with `SET` in SQL).

use std::any::Any;

use datafusion::common::config::{ConfigEntry, ConfigExtension, ExtensionOptions};
use datafusion::error::{DataFusionError, Result};

use crate::{CpuOperators, PlacementTarget};

/// OxideLake's session options, registered as a DataFusion config extension so `SET
/// oxidelake.placement.target = 'cuda'` works and the value travels with the session
/// config (to a Ballista scheduler, too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OxideOptions {
    /// `oxidelake.placement.target`: auto | cpu | cuda | metal.
    pub placement_target: PlacementTarget,
    /// `oxidelake.placement.cpu_operators`: which of our operators' CPU paths replace
    /// DataFusion's in a plan placed for the CPU ([`CpuOperators`]); none by default.
    pub cpu_operators: CpuOperators,
    /// `oxidelake.memory.spill_joins`: run partitioned hash joins as
    /// `GraceHashJoinExec`, which spills its inputs to disk when the build side does not
    /// fit the memory pool. Embedded sessions turn it on with a host memory limit.
    pub spill_joins: bool,
    /// `oxidelake.memory.device_limit`: the device bytes the GPU operators' state may
    /// claim together, process-wide (`DeviceBudget`; the operators read it from the
    /// task's configuration). Setting it runs partitioned joins as `GraceHashJoinExec`
    /// even without a host memory limit, so a build side past it is split. `None` (the
    /// default, `none` in SQL): no split, and state on a GPU claims under 80 % of the
    /// device's memory (`oxidelake_compute::default_device_limit`). A size as `512M` or
    /// `2G`.
    pub device_limit: Option<usize>,
    /// `oxidelake.scan.join_filter_rows`: the rows a hash join's build side cannot match
    /// are filtered right above the Parquet scans that read them
    /// ([`crate::JoinFilterRowsRule`]). On by default.
    pub join_filter_rows: bool,
    /// `oxidelake.scan.join_filter_max_kept`: the largest fraction of its first rows a
    /// join filter may keep and go on filtering, in per mille (so the options stay `Eq`);
    /// `None`: the default, [`oxidelake_compute::JOIN_FILTER_MAX_KEPT`].
    pub join_filter_max_kept_per_mille: Option<u16>,
    /// `oxidelake.scan.join_filter_partitioned`: whether the filters of Partitioned-mode
    /// joins are applied too. DataFusion fills those with a `CASE` over the repartitioning
    /// hash that looks each row up in its partition's hash table: a hash and a lookup
    /// per row, about what the repartition and the probe it spares cost. Off by default.
    pub join_filter_partitioned: bool,
    /// `oxidelake.execution.device_resident`: GPU filters, projections, joins and
    /// partial aggregates keep their batches on the device after an explicit
    /// `HostToDeviceExec` ([`crate::DeviceTransitionRule`], ADR-0014). Off by default
    /// until a GPU measures it: on the emulated driver it uploads more than the host
    /// interface for join-heavy plans (docs/benchmarks.md).
    pub device_resident: bool,
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
            device_resident: false,
        }
    }
}

/// The key of the placement target, without the `oxidelake.` prefix.
const PLACEMENT_TARGET: &str = "placement.target";
/// The key of the CPU placement's operator kinds, without the `oxidelake.` prefix.
const CPU_OPERATORS: &str = "placement.cpu_operators";
/// The key of the spilling-join switch, without the `oxidelake.` prefix.
const SPILL_JOINS: &str = "memory.spill_joins";
/// The key of the device limit, without the `oxidelake.` prefix.
const DEVICE_LIMIT: &str = "memory.device_limit";
/// The key of the join-filter switch, without the `oxidelake.` prefix.
const JOIN_FILTER_ROWS: &str = "scan.join_filter_rows";
/// The key of the join filters' selectivity bound, without the `oxidelake.` prefix.
const JOIN_FILTER_MAX_KEPT: &str = "scan.join_filter_max_kept";
/// The key of the partitioned joins' filter switch, without the `oxidelake.` prefix.
const JOIN_FILTER_PARTITIONED: &str = "scan.join_filter_partitioned";
/// The key of the device-resident batches switch, without the `oxidelake.` prefix.
const DEVICE_RESIDENT: &str = "execution.device_resident";

/// `true`/`on` or `false`/`off`, for the boolean option `key`.
fn parse_switch(key: &str, value: &str) -> Result<bool> {
    match value.trim_matches('\'').to_ascii_lowercase().as_str() {
        "true" | "on" => Ok(true),
        "false" | "off" => Ok(false),
        other => Err(DataFusionError::Configuration(format!(
            "oxidelake.{key} is true or false, not {other:?}"
        ))),
    }
}

impl ConfigExtension for OxideOptions {
    const PREFIX: &'static str = "oxidelake";
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

    fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            PLACEMENT_TARGET => {
                self.placement_target = value
                    .trim_matches('\'')
                    .parse()
                    .map_err(DataFusionError::Configuration)?;
                Ok(())
            }
            CPU_OPERATORS => {
                self.cpu_operators = value.parse().map_err(DataFusionError::Configuration)?;
                Ok(())
            }
            SPILL_JOINS => {
                self.spill_joins = parse_switch(SPILL_JOINS, value)?;
                Ok(())
            }
            JOIN_FILTER_ROWS => {
                self.join_filter_rows = parse_switch(JOIN_FILTER_ROWS, value)?;
                Ok(())
            }
            JOIN_FILTER_PARTITIONED => {
                self.join_filter_partitioned = parse_switch(JOIN_FILTER_PARTITIONED, value)?;
                Ok(())
            }
            DEVICE_RESIDENT => {
                self.device_resident = parse_switch(DEVICE_RESIDENT, value)?;
                Ok(())
            }
            JOIN_FILTER_MAX_KEPT => {
                let value = value.trim_matches('\'').trim();
                let fraction = value
                    .parse::<f64>()
                    .ok()
                    .filter(|f| (0.0..=1.0).contains(f));
                let Some(fraction) = fraction else {
                    return Err(DataFusionError::Configuration(format!(
                        "oxidelake.{JOIN_FILTER_MAX_KEPT} is a fraction from 0 to 1, not {value:?}"
                    )));
                };
                self.join_filter_max_kept_per_mille = Some((fraction * 1000.0).round() as u16);
                Ok(())
            }
            DEVICE_LIMIT => {
                let value = value.trim_matches('\'').trim();
                self.device_limit = if value.is_empty() || value.eq_ignore_ascii_case("none") {
                    None
                } else if let Ok(bytes) = value.parse::<usize>() {
                    // A plain number is bytes (what SHOW prints).
                    Some(bytes)
                } else {
                    Some(
                        datafusion::prelude::SessionContext::parse_capacity_limit(
                            "oxidelake.memory.device_limit",
                            value,
                        )
                        .map_err(|_| {
                            DataFusionError::Configuration(format!(
                                "oxidelake.{DEVICE_LIMIT} is a size such as 512M or 2G, a number \
                                 of bytes, or none; not {value:?}"
                            ))
                        })?,
                    )
                };
                Ok(())
            }
            other => Err(DataFusionError::Configuration(format!(
                "unknown option oxidelake.{other} (known: oxidelake.{PLACEMENT_TARGET}, \
                 oxidelake.{CPU_OPERATORS}, oxidelake.{SPILL_JOINS}, oxidelake.{DEVICE_LIMIT}, \
                 oxidelake.{JOIN_FILTER_ROWS}, oxidelake.{JOIN_FILTER_MAX_KEPT}, \
                 oxidelake.{JOIN_FILTER_PARTITIONED}, oxidelake.{DEVICE_RESIDENT})"
            ))),
        }
    }

    fn entries(&self) -> Vec<ConfigEntry> {
        vec![
            ConfigEntry {
                key: format!("{}.{PLACEMENT_TARGET}", Self::PREFIX),
                value: Some(self.placement_target.to_string()),
                description: "Backend plans are placed for: auto (the local hardware), cpu (no \
                          rewrites), cuda or metal (GPU operators; CPU paths where the \
                          machine lacks that GPU)",
            },
            ConfigEntry {
                key: format!("{}.{CPU_OPERATORS}", Self::PREFIX),
                value: Some(self.cpu_operators.to_string()),
                description: "Operator kinds (filter, projection, join, aggregate; all; \
                              none) whose OxideLake CPU paths replace DataFusion's in \
                              plans placed for the CPU",
            },
            ConfigEntry {
                key: format!("{}.{SPILL_JOINS}", Self::PREFIX),
                value: Some(self.spill_joins.to_string()),
                description: "Run partitioned hash joins as GraceHashJoinExec, which spills \
                              both inputs to disk when the build side does not fit the \
                              memory pool (embedded sessions; on with --memory-limit)",
            },
            ConfigEntry {
                key: format!("{}.{DEVICE_LIMIT}", Self::PREFIX),
                value: Some(match self.device_limit {
                    Some(bytes) => bytes.to_string(),
                    None => "none".to_string(),
                }),
                description: "Device bytes the GPU operators' state may claim together, \
                              process-wide; past it a batch runs on the CPU and a join's \
                              build side is split through spill files or built on the CPU \
                              (setting it runs partitioned joins as GraceHashJoinExec; \
                              none: 80 % of the device's memory)",
            },
            ConfigEntry {
                key: format!("{}.{JOIN_FILTER_ROWS}", Self::PREFIX),
                value: Some(self.join_filter_rows.to_string()),
                description: "Filter the rows a hash join's build side cannot match right \
                              above the Parquet scans that read them (JoinFilterExec, \
                              embedded sessions)",
            },
            ConfigEntry {
                key: format!("{}.{JOIN_FILTER_MAX_KEPT}", Self::PREFIX),
                value: Some(self.join_filter_max_kept().to_string()),
                description: "The largest fraction of its first 65,536 rows a join filter \
                              may keep and go on filtering (JoinFilterExec)",
            },
            ConfigEntry {
                key: format!("{}.{JOIN_FILTER_PARTITIONED}", Self::PREFIX),
                value: Some(self.join_filter_partitioned.to_string()),
                description: "Also apply the filters of Partitioned-mode hash joins (a hash \
                              and a hash-table lookup per row) above the scans",
            },
            ConfigEntry {
                key: format!("{}.{DEVICE_RESIDENT}", Self::PREFIX),
                value: Some(self.device_resident.to_string()),
                description: "GPU filters keep their batches on the device between \
                              HostToDeviceExec and DeviceToHostExec transitions (embedded \
                              sessions; off while other GPU operators take host batches)",
            },
        ]
    }
}

impl OxideOptions {
    /// `oxidelake.scan.join_filter_max_kept` as a fraction.
    pub fn join_filter_max_kept(&self) -> f64 {
        self.join_filter_max_kept_per_mille
            .map_or(oxidelake_compute::JOIN_FILTER_MAX_KEPT, |p| {
                f64::from(p) / 1000.0
            })
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
        assert!(config.options_mut().set("oxidelake.nope", "1").is_err());
    }

    #[test]
    fn operators_read_the_device_limit_these_options_set_from_the_task_configuration() {
        // The compute crate reads the limit by its key, without naming this type.
        let mut config = SessionConfig::new().with_option_extension(OxideOptions::default());
        assert_eq!(oxidelake_compute::session_device_limit(&config), None);
        config
            .options_mut()
            .set(oxidelake_compute::DEVICE_LIMIT_KEY, "'64K'")
            .unwrap();
        assert_eq!(
            oxidelake_compute::session_device_limit(&config),
            Some(64 << 10)
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
        assert!(
            config
                .options_mut()
                .set("oxidelake.memory.spill_joins", "maybe")
                .is_err()
        );
    }

    #[test]
    fn join_filters_are_on_by_default_and_their_bound_is_a_fraction() {
        let mut config = SessionConfig::new().with_option_extension(OxideOptions::default());
        let options = OxideOptions::from_config(config.options());
        assert!(options.join_filter_rows);
        assert_eq!(
            options.join_filter_max_kept(),
            oxidelake_compute::JOIN_FILTER_MAX_KEPT
        );
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
}
