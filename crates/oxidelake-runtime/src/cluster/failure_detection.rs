//! How fast a cluster notices a lost executor, and how often it retries.
//!
//! Ballista 55's defaults wait 180 s for a missing heartbeat before they reset a lost
//! executor's tasks, so one killed worker cost a query three minutes. OxideLake's
//! defaults are sized for a LAN:
//!
//! - Under pull scheduling (the default) `poll_work` is the heartbeat: an idle executor
//!   polls every 50 ms, a fully busy one every 5 s (Ballista's fixed
//!   `HEARTBEAT_POLL_INTERVAL`). Under push scheduling the worker's
//!   `--heartbeat-interval` (default 3 s) sets it.
//! - The executor timeout, 10 s, is two busy heartbeats: one lost or late heartbeat
//!   never kills a healthy executor, two do.
//! - The scheduler looks for expired executors every timeout/5 (2 s), so a lost
//!   executor's tasks are reset at most 12 s after its last heartbeat and then run on
//!   the executors that remain.
//! - When the last executor is gone, running queries fail after a grace period
//!   (default: the executor timeout) that lets a restarting worker rejoin first.

use ballista_scheduler::config::SchedulerConfig;
use oxidelake_core::EngineError;

/// The default executor timeout and no-executors grace, in seconds.
pub const DEFAULT_EXECUTOR_TIMEOUT_SECS: u64 = 10;
/// Ballista's default attempts per task and per stage.
pub const DEFAULT_MAX_FAILURES: usize = 4;
/// The worker's heartbeat under push scheduling.
pub const DEFAULT_HEARTBEAT_INTERVAL_SECS: u64 = 3;
/// A fully busy pull-mode executor's heartbeat (Ballista 55, not configurable).
pub const BUSY_PULL_HEARTBEAT_SECS: u64 = 5;

/// The scheduler's failure detection and retry settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureDetection {
    /// Seconds without a heartbeat after which an executor is dead.
    pub executor_timeout_secs: u64,
    /// Seconds to wait for an executor to (re)join after the last one was lost before
    /// the running queries fail.
    pub no_executors_grace_secs: u64,
    /// Attempts of one task before its query fails.
    pub task_max_failures: usize,
    /// Attempts of one stage (re-run when shuffle output it read was lost) before the
    /// query fails.
    pub stage_max_failures: usize,
}

impl Default for FailureDetection {
    fn default() -> Self {
        Self {
            executor_timeout_secs: DEFAULT_EXECUTOR_TIMEOUT_SECS,
            no_executors_grace_secs: DEFAULT_EXECUTOR_TIMEOUT_SECS,
            task_max_failures: DEFAULT_MAX_FAILURES,
            stage_max_failures: DEFAULT_MAX_FAILURES,
        }
    }
}

impl FailureDetection {
    /// How often the scheduler looks for expired executors: a fifth of the timeout,
    /// between 1 and 15 s (Ballista's default interval).
    pub fn expiry_check_secs(&self) -> u64 {
        (self.executor_timeout_secs / 5).clamp(1, 15)
    }

    /// The longest a lost executor's tasks wait before they are reset.
    pub fn worst_detection_secs(&self) -> u64 {
        self.executor_timeout_secs + self.expiry_check_secs()
    }

    /// Refuses settings that would declare healthy executors dead or fail healthy
    /// queries.
    pub fn validate(&self) -> Result<(), EngineError> {
        if self.executor_timeout_secs <= BUSY_PULL_HEARTBEAT_SECS {
            return Err(EngineError::InvalidArgument {
                what: "--executor-timeout",
                detail: format!(
                    "{} s is not longer than a busy executor's heartbeat \
                     ({BUSY_PULL_HEARTBEAT_SECS} s): healthy executors would be declared dead",
                    self.executor_timeout_secs
                ),
            });
        }
        // Ballista's own warning: a grace shorter than a heartbeat can fail a query
        // whose executor was only briefly removed; 0 is the deliberate fail-fast.
        let grace = self.no_executors_grace_secs;
        if grace != 0 && grace < BUSY_PULL_HEARTBEAT_SECS {
            return Err(EngineError::InvalidArgument {
                what: "--no-executors-grace",
                detail: format!(
                    "{grace} s is shorter than a busy executor's heartbeat \
                     ({BUSY_PULL_HEARTBEAT_SECS} s); use 0 to fail at once or at least \
                     {BUSY_PULL_HEARTBEAT_SECS}"
                ),
            });
        }
        if self.task_max_failures == 0 || self.stage_max_failures == 0 {
            return Err(EngineError::InvalidArgument {
                what: "--task-max-failures/--stage-max-failures",
                detail: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    /// Writes the settings into Ballista's scheduler configuration.
    pub fn apply(&self, config: &mut SchedulerConfig) {
        config.executor_timeout_seconds = self.executor_timeout_secs;
        config.expire_dead_executor_interval_seconds = self.expiry_check_secs();
        config.no_executors_grace_period_seconds = self.no_executors_grace_secs;
        config.task_max_failures = self.task_max_failures;
        config.stage_max_failures = self.stage_max_failures;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_reset_a_lost_executors_tasks_within_12_seconds() {
        let detection = FailureDetection::default();
        assert_eq!(detection.expiry_check_secs(), 2);
        assert_eq!(detection.worst_detection_secs(), 12);
        assert!(detection.validate().is_ok());
        let mut config = SchedulerConfig::default();
        detection.apply(&mut config);
        assert_eq!(config.executor_timeout_seconds, 10);
        assert_eq!(config.expire_dead_executor_interval_seconds, 2);
        assert_eq!(config.no_executors_grace_period_seconds, 10);
    }

    #[test]
    fn a_timeout_a_busy_executor_cannot_meet_is_refused() {
        let detection = FailureDetection {
            executor_timeout_secs: 5,
            ..FailureDetection::default()
        };
        let error = detection.validate().unwrap_err().to_string();
        assert!(
            error.contains("--executor-timeout") && error.contains("5 s"),
            "{error}"
        );
    }

    #[test]
    fn a_grace_shorter_than_a_heartbeat_is_refused_but_zero_fails_fast() {
        let with = |secs| FailureDetection {
            no_executors_grace_secs: secs,
            ..FailureDetection::default()
        };
        let error = with(3).validate().unwrap_err().to_string();
        assert!(error.contains("--no-executors-grace"), "{error}");
        assert!(with(0).validate().is_ok());
        assert!(with(5).validate().is_ok());
    }

    #[test]
    fn the_expiry_check_stays_between_one_and_fifteen_seconds() {
        let with = |secs| FailureDetection {
            executor_timeout_secs: secs,
            ..FailureDetection::default()
        };
        assert_eq!(with(6).expiry_check_secs(), 1);
        assert_eq!(with(180).expiry_check_secs(), 15);
    }
}
