//! Host↔device copies as the telemetry hub counts them: every copy the CUDA backend
//! issues adds its bytes to the hub's H2D or D2H total (`oxide tui`'s transfer line).
//!
//! Only bytes are recorded. Most copies are enqueued on a stream and finish later, so
//! the time the host spends issuing them is not the transfer time; timing them needs
//! CUDA events around each copy, which the device data path (issue #15) is to add.

use std::time::Duration;

use oxidelake_core::TelemetryHub;

/// Counts `bytes` copied from host to device.
pub(super) fn host_to_device(bytes: usize) {
    TelemetryHub::global().record_h2d(bytes as u64, Duration::ZERO);
}

/// Counts `bytes` copied from device to host.
pub(super) fn device_to_host(bytes: usize) {
    TelemetryHub::global().record_d2h(bytes as u64, Duration::ZERO);
}
