//! Without the `--tls-*` flags, cluster members talk plaintext gRPC and Flight without
//! authentication: whoever reaches a scheduler can run SQL that reads and writes files
//! on the workers' hosts, and can register an executor. Listening beyond loopback
//! without TLS therefore says so.

use std::net::IpAddr;

/// The warning `binary` prints when it listens on `host`; `None` for a loopback
/// address, which only this machine reaches.
pub fn insecure_bind_warning(binary: &str, host: &str) -> Option<String> {
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!loopback).then(|| {
        format!(
            "{binary} listens on {host} without TLS or authentication: anyone who can \
             reach it can run SQL that reads and writes files on the workers' hosts, and \
             can register executors. Keep it on a network only the cluster's machines \
             reach, or give every member --tls-ca, --tls-cert and --tls-key \
             (docs/cluster.md)."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_need_no_warning() {
        for host in ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"] {
            assert_eq!(
                insecure_bind_warning("oxide-scheduler", host),
                None,
                "{host}"
            );
        }
    }

    #[test]
    fn every_other_address_is_warned_about_by_name() {
        for host in ["0.0.0.0", "::", "10.0.0.5", "node1.example"] {
            let warning = insecure_bind_warning("oxide-worker", host).unwrap();
            assert!(
                warning.starts_with(&format!("oxide-worker listens on {host} without TLS")),
                "{warning}"
            );
        }
    }
}
