//! A failure to talk to the cluster (its scheduler, or a worker serving results), said
//! in one line a user can act on.
//!
//! tonic reports these as nested transport errors ("h2 protocol error … FRAME_SIZE_ERROR",
//! "InvalidMessage(InvalidContentType)"): true, but they do not say that one side
//! speaks TLS and the other does not, or whose certificate was refused.

use datafusion::error::DataFusionError;
use oxidelake_core::EngineError;

/// A connection failure to the cluster at `url` as an I/O error naming the likely
/// cause, followed by what the transport said (the same texts can come from a worker
/// the client fetches results from, or from a member that stopped); any other error as
/// [`oxidelake_storage::into_engine_error`] converts it (a Parquet file the footer
/// guard refused is a `Format` error naming it).
pub(crate) fn scheduler_error(url: &str, e: DataFusionError) -> EngineError {
    let text = e.to_string();
    match diagnose(&text) {
        Some(Diagnosis::Unreachable(cause)) => EngineError::io(url, std::io::Error::other(cause)),
        Some(Diagnosis::Likely(cause)) => EngineError::io(
            url,
            std::io::Error::other(format!("{cause} (the transport said: {text})")),
        ),
        None => oxidelake_storage::into_engine_error(e),
    }
}

/// What a transport error's text says.
#[derive(Debug, PartialEq)]
enum Diagnosis {
    /// Nothing listens there: said alone.
    Unreachable(String),
    /// The likely cause, said before the transport's own text.
    Likely(String),
}

impl Diagnosis {
    #[cfg(test)]
    fn text(&self) -> &str {
        match self {
            Diagnosis::Unreachable(s) | Diagnosis::Likely(s) => s,
        }
    }
}

/// What went wrong, from the transport error's text; `None` when it is not a
/// connection failure.
fn diagnose(text: &str) -> Option<Diagnosis> {
    if text.contains("tcp connect error") || text.contains("Connection refused") {
        return Some(Diagnosis::Unreachable(
            "cannot reach the scheduler: connection refused (is oxide-scheduler running there?)"
                .into(),
        ));
    }
    let likely = |cause: String| Some(Diagnosis::Likely(cause));
    if text.contains("InvalidContentType") {
        return likely(
            "a cluster member does not speak TLS: connect without --tls-*, or run every \
             member with them"
                .into(),
        );
    }
    if let Some(alert) = after(text, "received fatal alert: ") {
        return likely(format!(
            "a cluster member (the scheduler, or a worker serving results) refused this \
             client's TLS certificate (alert {alert}): it must be signed by the cluster's CA"
        ));
    }
    if let Some(reason) = after(text, "InvalidCertificate(") {
        return likely(format!(
            "this client does not trust a cluster member's TLS certificate ({reason}): \
             --tls-ca must be the cluster's CA, and the certificate must name the host \
             the client dials (the df:// host for the scheduler, a worker's \
             --external-host for results)"
        ));
    }
    if stopped_answering(text) {
        return likely(
            "the cluster stopped answering: the scheduler (or a worker serving results) \
             let a request run past its deadline or a liveness ping go unanswered; it \
             may be stopped, hung or cut off"
                .into(),
        );
    }
    // A TLS member drops a plaintext client, or one whose certificate it refused, as
    // soon as it reads the first bytes; which of these the client sees depends on how
    // far it got by then. A member that stopped looks the same.
    let dropped = [
        "FRAME_SIZE_ERROR",
        "broken pipe",
        "connection was not ready",
        "connection closed",
    ];
    if dropped.iter().any(|d| text.contains(d)) {
        return likely(
            "the connection was closed: a cluster running with TLS does that to a client \
             without TLS (give --tls-ca, --tls-cert and --tls-key) or one whose \
             certificate its CA did not sign; otherwise a member may have stopped"
                .into(),
        );
    }
    None
}

/// Whether `text` is a request that ran past its deadline or a connection whose
/// liveness ping went unanswered (`super::Liveness`), as tonic and hyper word them.
fn stopped_answering(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "timeout expired",
        "keep-alive timed out",
        "keepalivetimedout",
    ]
    .iter()
    .any(|said| lower.contains(said))
        || (lower.contains("unavailable") && lower.contains("http2 error"))
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
                "the connection was closed",
            ),
            (
                r#"Status { code: Cancelled, message: "operation was canceled", source: Some(tonic::transport::Error(Transport, hyper::Error(Canceled, "connection was not ready"))) }"#,
                "the connection was closed",
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
                "does not trust a cluster member's TLS certificate (BadSignature)",
            ),
        ];
        for (text, expected) in cases {
            let said = diagnose(text)
                .map(|d| d.text().to_string())
                .unwrap_or_default();
            assert!(said.contains(expected), "{text}\n→ {said}");
        }
    }

    #[test]
    fn a_member_that_stopped_answering_is_named_as_such() {
        for text in [
            // A request past its deadline.
            r#"Status { code: Cancelled, message: "Timeout expired", source: Some(TimeoutExpired(())) }"#,
            // The job-status stream, after a ping went unanswered.
            r#"code: 'The service is currently unavailable', message: "http2 error""#,
            r#"hyper::Error(Http2, KeepAliveTimedOut)"#,
        ] {
            let said = diagnose(text)
                .map(|d| d.text().to_string())
                .unwrap_or_default();
            assert!(
                said.contains("the cluster stopped answering"),
                "{text}\n→ {said}"
            );
        }
    }

    #[test]
    fn other_errors_are_left_alone() {
        assert_eq!(diagnose("Schema error: No field named x"), None);
    }

    #[test]
    fn a_diagnosis_keeps_what_the_transport_said() {
        let text = "tonic::transport::Error(Transport, ConnectError(Custom { kind: InvalidData, error: InvalidMessage(InvalidContentType) }))";
        let err = scheduler_error(
            "df://127.0.0.1:1",
            DataFusionError::Execution(text.to_string()),
        )
        .to_string();
        assert!(
            err.contains("does not speak TLS")
                && err.contains("InvalidMessage(InvalidContentType)"),
            "{err}"
        );
    }
}
