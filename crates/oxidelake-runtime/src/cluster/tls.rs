//! Mutual TLS between every member of a cluster: clients, the scheduler and workers.
//!
//! One private certificate authority (CA) signs a certificate for each member. Every
//! connection is TLS, and every listening member asks the other side for a certificate
//! signed by that CA, so a client or executor without one is refused during the
//! handshake, before it can send a query, register or fetch shuffle data. The
//! certificate therefore serves as both encryption and authentication; there is no
//! second secret to distribute. `scripts/make-cluster-certs.sh` makes a CA and member
//! certificates for a test cluster (docs/cluster.md).
//!
//! Ballista 55 dials every peer through an endpoint hook
//! ([`EndpointOverrideFn`]) but builds its URLs as `http://`; tonic only starts TLS for
//! `https://`, so the hook rebuilds each endpoint as `https://` with the same
//! authority, Ballista's default client timeouts and this TLS configuration.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ballista_core::extension::EndpointOverrideFn;
use ballista_core::utils::{GrpcClientConfig, create_grpc_client_endpoint};
use oxidelake_core::EngineError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

use super::config::SchedulingPolicy;
use super::exposure::insecure_bind_warning;

/// How long a peer may take to finish the TLS handshake: a LAN peer takes
/// milliseconds; tonic's default is to wait forever.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The three PEM files of one member, as given on the command line.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// The cluster's CA certificate (PEM). With --tls-cert and --tls-key, every
    /// connection is TLS and peers must present a certificate this CA signed.
    #[arg(long, value_name = "FILE", requires_all = ["tls_cert", "tls_key"])]
    pub tls_ca: Option<PathBuf>,
    /// This member's certificate (PEM), signed by the --tls-ca CA.
    #[arg(long, value_name = "FILE", requires_all = ["tls_ca", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// This member's private key (PEM) matching --tls-cert.
    #[arg(long, value_name = "FILE", requires_all = ["tls_ca", "tls_cert"])]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The loaded files when the three flags are given, `None` when none is.
    pub fn load(&self) -> Result<Option<ClusterTls>, EngineError> {
        match (&self.tls_ca, &self.tls_cert, &self.tls_key) {
            (None, None, None) => Ok(None),
            (Some(ca), Some(cert), Some(key)) => ClusterTls::load(ca, cert, key).map(Some),
            _ => Err(EngineError::InvalidArgument {
                what: "TLS flags",
                detail: "--tls-ca, --tls-cert and --tls-key go together".into(),
            }),
        }
    }

    /// [`TlsArgs::load`] for `binary` (a scheduler or worker) listening on `bind_host`
    /// under `policy`: TLS with push-staged scheduling is refused, and listening beyond
    /// loopback without TLS logs [`insecure_bind_warning`].
    pub fn load_for_member(
        &self,
        binary: &str,
        bind_host: &str,
        policy: SchedulingPolicy,
    ) -> Result<Option<ClusterTls>, EngineError> {
        let tls = self.load()?;
        if tls.is_some() && policy == SchedulingPolicy::PushStaged {
            return Err(EngineError::InvalidArgument {
                what: "--tls-*",
                detail: "TLS needs pull-staged scheduling: a push-staged worker's task \
                         server cannot be served over TLS"
                    .into(),
            });
        }
        if tls.is_none()
            && let Some(warning) = insecure_bind_warning(binary, bind_host)
        {
            tracing::warn!("{warning}");
        }
        Ok(tls)
    }
}

/// A member's CA, certificate and key, checked when loaded.
#[derive(Clone)]
pub struct ClusterTls {
    ca: Certificate,
    identity: Identity,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterTls { .. }")
    }
}

impl ClusterTls {
    /// Reads and checks the PEM files: the CA file holds a certificate, the
    /// certificate file a chain, the key file a private key that belongs to the chain's
    /// first certificate. Mistakes are reported here, naming the file, rather than as a
    /// failed handshake later.
    pub fn load(ca: &Path, cert: &Path, key: &Path) -> Result<Self, EngineError> {
        install_crypto_provider();
        let (ca_pem, cert_pem, key_pem) = (read(ca)?, read(cert)?, read(key)?);
        let roots = certificates(ca, &ca_pem)?;
        let mut store = rustls::RootCertStore::empty();
        for root in roots {
            store
                .add(root)
                .map_err(|e| invalid(ca, format!("not a usable CA certificate: {e}")))?;
        }
        let chain = certificates(cert, &cert_pem)?;
        let private = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| invalid(key, format!("no private key in PEM form: {e}")))?;
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, private))
        .map_err(|e| {
            invalid(
                key,
                format!("does not fit the certificate {}: {e}", cert.display()),
            )
        })?;
        Ok(Self {
            ca: Certificate::from_pem(ca_pem),
            identity: Identity::from_pem(cert_pem, key_pem),
        })
    }

    /// The hook every outgoing connection goes through: `https://` to the same
    /// host and port, verifying the peer against the CA and presenting this member's
    /// certificate.
    pub fn endpoint_override(&self) -> EndpointOverrideFn {
        let config = ClientTlsConfig::new()
            .ca_certificate(self.ca.clone())
            .identity(self.identity.clone());
        Arc::new(move |endpoint| {
            let authority = endpoint
                .uri()
                .authority()
                .ok_or_else(|| format!("no host:port in {}", endpoint.uri()))?
                .clone();
            let https = create_grpc_client_endpoint(
                format!("https://{authority}"),
                Some(&GrpcClientConfig::default()),
            )?;
            Ok(https.tls_config(config.clone())?)
        })
    }

    /// The listening side: this member's certificate, and a certificate signed by the
    /// CA required of every peer. A handshake not finished within
    /// [`HANDSHAKE_TIMEOUT`] is dropped, so peers that open connections and never
    /// complete them cannot pile up.
    pub fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .client_ca_root(self.ca.clone())
            .timeout(HANDSHAKE_TIMEOUT)
    }
}

/// rustls is built with two cryptography providers in this workspace (ring for
/// tonic, aws-lc for the object stores), so it cannot pick a process default itself;
/// tonic's server asks for that default. Installs ring once; later calls do nothing.
pub fn install_crypto_provider() {
    // An error means a provider is installed already, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn read(path: &Path) -> Result<Vec<u8>, EngineError> {
    std::fs::read(path).map_err(|e| EngineError::io(path.display().to_string(), e))
}

fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, EngineError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(path, format!("unreadable PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(path, "holds no certificate".into()));
    }
    Ok(certs)
}

fn invalid(path: &Path, detail: String) -> EngineError {
    EngineError::InvalidArgument {
        what: "TLS file",
        detail: format!("{}: {detail}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_a_certificate_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = ClusterTls::load(&empty, &empty, &empty).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("ca.pem") && text.contains("holds no certificate"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_file_is_an_io_error_naming_it() {
        let missing = Path::new("/nonexistent/oxide-ca.pem");
        let err = ClusterTls::load(missing, missing, missing).unwrap_err();
        assert!(
            matches!(&err, EngineError::Io { path, .. } if path.contains("oxide-ca.pem")),
            "{err:?}"
        );
    }

    #[test]
    fn the_flags_go_together() {
        let args = TlsArgs {
            tls_ca: Some("ca.pem".into()),
            ..TlsArgs::default()
        };
        let err = args.load().unwrap_err().to_string();
        assert!(err.contains("go together"), "{err}");
        assert!(TlsArgs::default().load().unwrap().is_none());
    }
}
