//! A failure to talk to the scheduler, said in one line a user can act on.
//!
//! tonic reports these as nested transport errors ("h2 protocol error … FRAME_SIZE_ERROR",
//! "InvalidMessage(InvalidContentType)"): true, but they do not say that one side
//! speaks TLS and the other does not, or whose certificate was refused.

use datafusion::error::DataFusionError;
use oxidelake_core::EngineError;

/// A connection failure to the scheduler at `url` as an I/O error naming the cause;
/// any other error as [`oxidelake_storage::into_engine_error`] converts it (a Parquet
/// file the footer guard refused is a `Format` error naming it).
pub(crate) fn scheduler_error(url: &str, e: DataFusionError) -> EngineError {
    match diagnose(&e.to_string()) {
        Some(cause) => EngineError::io(url, std::io::Error::other(cause)),
        None => oxidelake_storage::into_engine_error(e),
    }
}

/// What went wrong, from the transport error's text; `None` when it is not a
/// connection failure.
fn diagnose(text: &str) -> Option<String> {
    if text.contains("tcp connect error") || text.contains("Connection refused") {
        return Some(
            "cannot reach the scheduler: connection refused (is oxide-scheduler running there?)"
                .into(),
        );
    }
    if text.contains("InvalidContentType") {
        return Some(
            "the scheduler does not speak TLS: connect without --tls-*, or start every \
             member with them"
                .into(),
        );
    }
    if let Some(alert) = after(text, "received fatal alert: ") {
        return Some(format!(
            "the scheduler refused this client's TLS certificate (alert {alert}): it must \
             be signed by the cluster's CA"
        ));
    }
    // A TLS scheduler drops a plaintext client, or one whose certificate it refused,
    // as soon as it reads the first bytes; which of these the client sees depends on
    // how far it got by then.
    let dropped = [
        "FRAME_SIZE_ERROR",
        "broken pipe",
        "connection was not ready",
        "connection closed",
    ];
    if dropped.iter().any(|d| text.contains(d)) {
        return Some(
            "the scheduler closed the connection: a scheduler running with TLS does that \
             to a client without TLS (give --tls-ca, --tls-cert and --tls-key) or one \
             whose certificate its CA did not sign; otherwise it may have stopped"
                .into(),
        );
    }
    if let Some(reason) = after(text, "InvalidCertificate(") {
        return Some(format!(
            "this client does not trust the scheduler's TLS certificate ({reason}): \
             --tls-ca must be the cluster's CA, and the certificate must name the host \
             of the df:// URL"
        ));
    }
    None
}

/// The word after `marker` in `text` (up to a quote, parenthesis or brace).
fn after<'t>(text: &'t str, marker: &str) -> Option<&'t str> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let end = rest.find(['"', ')', '}', ' ']).unwrap_or(rest.len());
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    // What `oxide sql --cluster` printed against real schedulers; tests/cli/cluster_tls.rs
    // checks the diagnoses end to end.
    #[test]
    fn each_tls_mismatch_is_named() {
        let cases = [
            (
                r#"Status { code: Internal, message: "h2 protocol error: http2 error", source: Some(tonic::transport::Error(Transport, hyper::Error(Http2, Error { kind: GoAway(b"", FRAME_SIZE_ERROR, Library) }))) }"#,
                "a client without TLS",
            ),
            (
                r#"Status { code: Unknown, message: "transport error", source: Some(tonic::transport::Error(Transport, hyper::Error(Io, Custom { kind: BrokenPipe, error: "stream closed because of a broken pipe" }))) }"#,
                "the scheduler closed the connection",
            ),
            (
                r#"Status { code: Cancelled, message: "operation was canceled", source: Some(tonic::transport::Error(Transport, hyper::Error(Canceled, "connection was not ready"))) }"#,
                "the scheduler closed the connection",
            ),
            (
                "tonic::transport::Error(Transport, ConnectError(Custom { kind: InvalidData, error: InvalidMessage(InvalidContentType) }))",
                "does not speak TLS",
            ),
            (
                r#"Status { code: Unknown, message: "transport error", source: Some(tonic::transport::Error(Transport, hyper::Error(Io, Custom { kind: InvalidData, error: "received fatal alert: DecryptError" }))) }"#,
                "refused this client's TLS certificate (alert DecryptError)",
            ),
            (
                "tonic::transport::Error(Transport, ConnectError(Custom { kind: InvalidData, error: InvalidCertificate(BadSignature) }))",
                "does not trust the scheduler's TLS certificate (BadSignature)",
            ),
        ];
        for (text, expected) in cases {
            let said = diagnose(text).unwrap_or_default();
            assert!(said.contains(expected), "{text}\n→ {said}");
        }
    }

    #[test]
    fn other_errors_are_left_alone() {
        assert_eq!(diagnose("Schema error: No field named x"), None);
    }
}
