//! How an operator shows where it runs.

use oxidelake_core::BackendKind;

/// The name an operator displays in EXPLAIN, with its placement in brackets, e.g.
/// `GpuFilterExec[cuda]`. Users read placement from EXPLAIN, so the format is stable.
pub fn placement_label(operator: &str, backend: BackendKind) -> String {
    format!("{operator}[{}]", backend.tag())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_is_shown_in_brackets_after_the_operator_name() {
        assert_eq!(
            placement_label("GpuFilterExec", BackendKind::Cuda),
            "GpuFilterExec[cuda]"
        );
        assert_eq!(
            placement_label("GpuHashJoinExec", BackendKind::CpuSimd),
            "GpuHashJoinExec[cpu]"
        );
    }
}
