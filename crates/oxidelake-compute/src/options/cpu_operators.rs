//! `oxidelake.placement.cpu_operators`: which of OxideLake's own operators replace
//! DataFusion's in a plan placed for the CPU.
//!
//! Every GPU operator has a CPU path (the `CpuBackend`), written for the same batches as
//! its device kernels: a filter evaluating its predicate program, a projection computing
//! decimal arithmetic exactly in 64 bits while the values fit, a join probing a dense
//! index, a partial aggregate numbering its keys. Some of them beat DataFusion's own
//! operators on some queries and lose on others (docs/benchmarks.md measures each kind on
//! TPC-H). This option lets a plan placed for the CPU (`oxidelake.placement.target =
//! 'cpu'`, or `auto` on a machine without a GPU) use the kinds that win: the operators
//! are the same nodes as a GPU placement's, labelled `[cpu]` in EXPLAIN, and they run
//! on the CPU backend even on a machine that has a GPU.

use std::fmt;
use std::str::FromStr;

/// The operator kinds whose CPU paths replace DataFusion's under a CPU placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuOperators {
    /// `GpuFilterExec` for `FilterExec`.
    pub filter: bool,
    /// `GpuProjectionExec` for a `ProjectionExec` computing arithmetic.
    pub projection: bool,
    /// `GpuHashJoinExec` for `HashJoinExec` (not for the spilling grace join's pairs).
    pub join: bool,
    /// `GpuPartialAggregateExec` for a partial `AggregateExec`.
    pub aggregate: bool,
}

/// The kinds by name, in the order `Display` writes them.
const KINDS: [&str; 4] = ["filter", "projection", "join", "aggregate"];

impl CpuOperators {
    /// No kind: DataFusion's operators throughout (the default).
    pub const NONE: Self = Self {
        filter: false,
        projection: false,
        join: false,
        aggregate: false,
    };

    /// Every kind.
    pub const ALL: Self = Self {
        filter: true,
        projection: true,
        join: true,
        aggregate: true,
    };

    /// Whether no kind is chosen.
    pub fn is_empty(self) -> bool {
        self == Self::NONE
    }

    fn flags(self) -> [bool; 4] {
        [self.filter, self.projection, self.join, self.aggregate]
    }

    fn flag_mut(&mut self, kind: &str) -> Option<&mut bool> {
        Some(match kind {
            "filter" => &mut self.filter,
            "projection" => &mut self.projection,
            "join" => &mut self.join,
            "aggregate" => &mut self.aggregate,
            _ => return None,
        })
    }
}

/// `none`, `all`, or kinds separated by commas (`filter,projection`).
impl FromStr for CpuOperators {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim().trim_matches('\'').trim().to_ascii_lowercase();
        match value.as_str() {
            "" | "none" => return Ok(Self::NONE),
            "all" => return Ok(Self::ALL),
            _ => {}
        }
        let mut out = Self::NONE;
        for kind in value.split(',').map(str::trim) {
            match out.flag_mut(kind) {
                Some(flag) => *flag = true,
                None => {
                    return Err(format!(
                        "{} is none, all or a list of {}; not {kind:?}",
                        super::keys::CPU_OPERATORS,
                        KINDS.join(", ")
                    ));
                }
            }
        }
        Ok(out)
    }
}

impl fmt::Display for CpuOperators {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = KINDS
            .iter()
            .zip(self.flags())
            .filter(|(_, on)| *on)
            .map(|(name, _)| *name)
            .collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_from_a_list_and_print_back_the_same_way() {
        assert_eq!("none".parse::<CpuOperators>(), Ok(CpuOperators::NONE));
        assert_eq!("'all'".parse::<CpuOperators>(), Ok(CpuOperators::ALL));
        let two: CpuOperators = "Projection, filter".parse().unwrap();
        assert!(two.filter && two.projection && !two.join && !two.aggregate);
        assert_eq!(two.to_string(), "filter,projection");
        assert_eq!(
            CpuOperators::ALL.to_string().parse::<CpuOperators>(),
            Ok(CpuOperators::ALL)
        );
        assert_eq!(CpuOperators::NONE.to_string(), "none");
        let err = "filter,sort".parse::<CpuOperators>().unwrap_err();
        assert!(err.contains("\"sort\""), "{err}");
    }
}
