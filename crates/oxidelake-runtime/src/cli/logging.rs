//! Where the binaries' `tracing` events go: stderr, filtered by `RUST_LOG` as
//! datafusion-cli and the Rust ecosystem read it. Without a subscriber the engine's
//! warnings (a GPU batch falling back to the CPU after a device error, io_uring refused
//! by the kernel, a requested backend missing on an executor) were dropped unseen.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// `oxide`'s default filter: warnings, except those of Ballista's client query node
/// (`distributed_query`). Its ERROR for a failed job repeats the error `oxide` prints as
/// its one line; its WARN events (a client/scheduler version mismatch, a failed job
/// cancellation) are hidden with it, and `RUST_LOG=warn` shows them.
pub const CLIENT_DEFAULT: &str = "warn,ballista_core::execution_plans::distributed_query=off";

/// The filter: `explicit` (a `--log` flag) if given, else `RUST_LOG` if set and valid,
/// else `default`.
pub fn filter(explicit: Option<&str>, default: &str) -> EnvFilter {
    if let Some(spec) = explicit {
        return EnvFilter::new(spec);
    }
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
}

/// Sends events at or above `filter` to stderr (colours only on a terminal). A second
/// call in one process does nothing.
pub fn init(filter: EnvFilter) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_filter_wins_over_the_default() {
        assert_eq!(filter(Some("debug"), "warn").to_string(), "debug");
        // RUST_LOG is not set by the test runner; the default applies.
        if std::env::var_os("RUST_LOG").is_none() {
            assert_eq!(filter(None, "warn").to_string(), "warn");
        }
    }
}
