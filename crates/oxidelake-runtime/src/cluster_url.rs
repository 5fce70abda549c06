//! `df://host:port`, the address of a Ballista scheduler.

use std::fmt;
use std::str::FromStr;

use crate::RuntimeError;

/// The address of a Ballista scheduler, written `df://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterUrl {
    host: String,
    port: u16,
}

impl ClusterUrl {
    /// The scheduler's host name or IP address.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The scheduler's gRPC port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl fmt::Display for ClusterUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "df://{}:{}", self.host, self.port)
    }
}

impl FromStr for ClusterUrl {
    type Err = RuntimeError;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &str| RuntimeError::InvalidClusterUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let rest = url
            .strip_prefix("df://")
            .ok_or_else(|| invalid("expected the scheme df://"))?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| invalid("expected host:port after df://"))?;
        if host.is_empty() || host.contains('/') {
            return Err(invalid("the host is empty or contains '/'"));
        }
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| invalid("the port must be a number from 1 to 65535"))?;
        Ok(Self {
            host: host.to_string(),
            port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_parse_host_and_port_and_print_back_unchanged() {
        let url: ClusterUrl = "df://127.0.0.1:50050".parse().unwrap();
        assert_eq!((url.host(), url.port()), ("127.0.0.1", 50050));
        assert_eq!(url.to_string(), "df://127.0.0.1:50050");
    }

    #[test]
    fn malformed_cluster_urls_say_what_is_wrong() {
        for (bad, why) in [
            ("http://h:1", "scheme"),
            ("df://h", "host:port"),
            ("df://:1", "host"),
            ("df://h:0", "port"),
            ("df://h:99999", "port"),
        ] {
            let err = bad.parse::<ClusterUrl>().unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
