//! The `oxidelake.*` session options (settable with `SET` in SQL).

use std::any::Any;

use datafusion::common::config::{ConfigEntry, ConfigExtension, ExtensionOptions};
use datafusion::error::{DataFusionError, Result};

use crate::PlacementTarget;

/// OxideLake's session options, registered as a DataFusion config extension so `SET
/// oxidelake.placement.target = 'cuda'` works and the value travels with the session
/// config (to a Ballista scheduler, too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OxideOptions {
    /// `oxidelake.placement.target`: auto | cpu | cuda | metal.
    pub placement_target: PlacementTarget,
    /// `oxidelake.memory.spill_joins`: run partitioned hash joins as
    /// `GraceHashJoinExec`, which spills its inputs to disk when the build side does not
    /// fit the memory pool. Embedded sessions turn it on with a host memory limit.
    pub spill_joins: bool,
}

/// The key of the placement target, without the `oxidelake.` prefix.
const PLACEMENT_TARGET: &str = "placement.target";
/// The key of the spilling-join switch, without the `oxidelake.` prefix.
const SPILL_JOINS: &str = "memory.spill_joins";

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
            SPILL_JOINS => {
                self.spill_joins = match value.trim_matches('\'').to_ascii_lowercase().as_str() {
                    "true" | "on" => true,
                    "false" | "off" => false,
                    other => {
                        return Err(DataFusionError::Configuration(format!(
                            "oxidelake.{SPILL_JOINS} is true or false, not {other:?}"
                        )));
                    }
                };
                Ok(())
            }
            other => Err(DataFusionError::Configuration(format!(
                "unknown option oxidelake.{other} (known: oxidelake.{PLACEMENT_TARGET}, \
                 oxidelake.{SPILL_JOINS})"
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
                key: format!("{}.{SPILL_JOINS}", Self::PREFIX),
                value: Some(self.spill_joins.to_string()),
                description: "Run partitioned hash joins as GraceHashJoinExec, which spills \
                              both inputs to disk when the build side does not fit the \
                              memory pool (embedded sessions; on with --memory-limit)",
            },
        ]
    }
}

impl OxideOptions {
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
}
