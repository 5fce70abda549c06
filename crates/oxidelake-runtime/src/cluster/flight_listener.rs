//! A worker's Arrow Flight port (shuffle data and results), bound before the executor
//! starts.
//!
//! Ballista 55 binds that port inside a task it spawns; when the bind fails ("Address
//! already in use") it logs the error, stops the executor and returns `Ok(())`, so
//! `oxide-worker` exited with status 0 and a supervisor saw a clean exit (issue 44).
//! The worker therefore binds the port itself, first, failing with the address in the
//! error, and gives Ballista a server (plaintext, or mutual TLS) for that socket. The
//! socket starts listening when Ballista starts that server, as Ballista's own did: in
//! the step that also installs the executor's SIGTERM handler, so a peer that sees the
//! port open can stop the worker cleanly. A server that fails later is recorded, and
//! the worker exits non-zero for that too.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;
use ballista_core::error::BallistaError;
use ballista_core::utils::{GrpcServerConfig, create_grpc_server};
use ballista_executor::ArrowFlightServerProvider;
use ballista_executor::flight_service::BallistaFlightService;
use ballista_executor::shutdown::Shutdown;
use oxidelake_core::EngineError;
use tokio::net::TcpSocket;
use tonic::transport::ServerTlsConfig;
use tonic::transport::server::TcpIncoming;

use super::tls::ClusterTls;

/// The worker's bound Flight port, and what became of the server on it.
pub struct FlightListener {
    address: SocketAddr,
    /// The bound socket, until the server takes it to listen on.
    socket: Arc<Mutex<Option<TcpSocket>>>,
    /// Why the server stopped, if it failed.
    failure: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for FlightListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightListener")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// Connections the port queues before the server accepts them (tokio's default).
const BACKLOG_CONNECTIONS: u32 = 1024;

impl FlightListener {
    /// Binds `address` now; a port another socket listens on is refused here.
    pub fn bind(address: SocketAddr) -> Result<Self, EngineError> {
        let port = || format!("Arrow Flight port {address} (--bind-host, --bind-port)");
        let socket = if address.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }
        .map_err(|e| EngineError::io(port(), e))?;
        // As std's and tokio's listeners do: a restarted worker may take its port back
        // while connections of its predecessor linger in TIME_WAIT.
        socket
            .set_reuseaddr(true)
            .map_err(|e| EngineError::io(port(), e))?;
        socket
            .bind(address)
            .map_err(|e| EngineError::io(port(), e))?;
        // Port 0 binds an ephemeral port: the address is the one bound.
        let address = socket
            .local_addr()
            .map_err(|e| EngineError::io(port(), e))?;
        Ok(Self {
            address,
            socket: Arc::new(Mutex::new(Some(socket))),
            failure: Arc::new(Mutex::new(None)),
        })
    }

    /// The address the port is bound to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The executor's Arrow Flight server on this listener, over mutual TLS with `tls`
    /// when given, with the executor's message limits (bytes).
    pub fn server(
        &self,
        tls: Option<&ClusterTls>,
        max_decoding_bytes: usize,
        max_encoding_bytes: usize,
    ) -> Arc<ArrowFlightServerProvider> {
        let socket = Arc::clone(&self.socket);
        let failure = Arc::clone(&self.failure);
        let server_tls = tls.map(ClusterTls::server_config);
        let address = self.address;
        Arc::new(
            move |work_dir: String,
                  _address: SocketAddr,
                  shutdown: Shutdown,
                  grpc_config: GrpcServerConfig| {
                let socket = lock(&socket).take();
                let server_tls = server_tls.clone();
                let failure = Arc::clone(&failure);
                let limits = (max_decoding_bytes, max_encoding_bytes);
                tokio::spawn(async move {
                    let served =
                        serve(socket, server_tls, work_dir, shutdown, &grpc_config, limits).await;
                    if let Err(e) = &served {
                        *lock(&failure) = Some(format!("Arrow Flight server on {address}: {e}"));
                    }
                    served
                })
            },
        )
    }

    /// Why the server on this listener failed, if it did.
    pub fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }
}

async fn serve(
    socket: Option<TcpSocket>,
    tls: Option<ServerTlsConfig>,
    work_dir: String,
    mut shutdown: Shutdown,
    grpc_config: &GrpcServerConfig,
    (max_decoding_bytes, max_encoding_bytes): (usize, usize),
) -> Result<(), BallistaError> {
    let socket = socket.ok_or_else(|| {
        BallistaError::Internal("the Arrow Flight port was taken by an earlier server".into())
    })?;
    let listener = socket.listen(BACKLOG_CONNECTIONS)?;
    tracing::info!(
        address = ?listener.local_addr().ok(),
        tls = tls.is_some(),
        "Arrow Flight server listening"
    );
    // The TCP settings Ballista's own server gives the connections it accepts.
    let incoming = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .with_keepalive(Some(Duration::from_secs(grpc_config.tcp_keepalive_seconds)));
    let mut server = create_grpc_server(grpc_config);
    if let Some(tls) = tls {
        server = server.tls_config(tls).map_err(BallistaError::TonicError)?;
    }
    server
        .add_service(
            FlightServiceServer::new(BallistaFlightService::new(work_dir))
                .max_decoding_message_size(max_decoding_bytes)
                .max_encoding_message_size(max_encoding_bytes),
        )
        .serve_with_incoming_shutdown(incoming, shutdown.recv())
        .await
        .map_err(BallistaError::TonicError)
}

fn lock<T>(slot: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_port_in_use_is_refused_when_bound_naming_the_address() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = taken.local_addr().unwrap();
        let err = FlightListener::bind(address).unwrap_err().to_string();
        assert!(
            err.contains(&address.to_string()) && err.contains("Arrow Flight port"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn the_server_answers_on_the_port_bound_before_it_started() {
        use arrow_flight::Criteria;
        use arrow_flight::flight_service_client::FlightServiceClient;

        let listener = FlightListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = listener.address();
        assert_ne!(address.port(), 0);
        let dir = tempfile::tempdir().unwrap();
        let notifier = ballista_executor::shutdown::ShutdownNotifier::new();
        let provider = listener.server(None, 1 << 20, 1 << 20);
        let server = provider(
            dir.path().display().to_string(),
            address,
            notifier.subscribe_for_shutdown(),
            GrpcServerConfig::default(),
        );
        let answer = tokio::time::timeout(Duration::from_secs(30), async {
            // The server starts listening in the task the provider spawned.
            let endpoint =
                tonic::transport::Endpoint::from_shared(format!("http://{address}")).unwrap();
            let channel = loop {
                match endpoint.connect().await {
                    Ok(channel) => break channel,
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            };
            FlightServiceClient::new(channel)
                .list_flights(Criteria::default())
                .await
        })
        .await
        .expect("the server answered");
        // Ballista's Flight service answers this request, with "unimplemented".
        let status = answer.err().map(|s| s.code());
        assert_eq!(status, Some(tonic::Code::Unimplemented));
        server.abort();
        assert_eq!(listener.failure(), None);
    }
}
