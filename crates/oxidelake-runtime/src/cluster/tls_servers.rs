//! The scheduler's listening services served over mutual TLS (a worker's Arrow Flight
//! server is `super::FlightListener`'s, with or without TLS).
//!
//! Ballista 55 lets a worker replace its Arrow Flight server (shuffle data) but serves
//! the scheduler's gRPC through a plain `axum::serve` with no TLS hook. With TLS the
//! scheduler's services are therefore mounted here on tonic's server: the scheduler's
//! gRPC service, and either the Arrow Flight SQL frontend (`--flight-sql`) or the
//! Flight proxy, as Ballista mounts them (both are Flight services, so only one can be
//! mounted; the frontend also forwards the proxy's partition tickets). The REST API and the
//! HTTP health routes are not served at all while TLS is on (docs/cluster.md).
//!
//! A push-staged worker also listens for the scheduler's task launches on a gRPC
//! server Ballista offers no hook for, so TLS clusters run pull-staged; the binaries
//! refuse the other combination.

use std::net::SocketAddr;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightServiceServer;
use ballista_core::error::BallistaError;
use ballista_core::extension::BallistaConfigGrpcEndpoint;
use ballista_core::flight_proxy_service::BallistaFlightProxyService;
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
use ballista_flight_sql::BallistaFlightSqlService;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::create_scheduler;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use oxidelake_core::EngineError;
use tonic::service::interceptor::InterceptedService;

use super::tls::ClusterTls;

/// Runs the scheduler's gRPC service (and its Flight SQL frontend or Flight proxy, as
/// the config says) on `address` over mutual TLS until the process ends.
pub async fn serve_scheduler_tls(
    cluster: BallistaCluster,
    address: SocketAddr,
    config: Arc<SchedulerConfig>,
    tls: &ClusterTls,
) -> Result<(), EngineError> {
    config.validate().map_err(ballista)?;
    let scheduler = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, config.clone())
        .await
        .map_err(ballista)?;
    let max_decoding = config.grpc_server_max_decoding_message_size as usize;
    let max_encoding = config.grpc_server_max_encoding_message_size as usize;
    // The Flight SQL frontend submits jobs to the same scheduler.
    let backend = Arc::new(scheduler.clone());
    let grpc = InterceptedService::new(
        SchedulerGrpcServer::new(scheduler)
            .max_decoding_message_size(max_decoding)
            .max_encoding_message_size(max_encoding),
        record_peer_address,
    );
    let customize = config
        .override_create_grpc_client_endpoint
        .clone()
        .map(|f| Arc::new(BallistaConfigGrpcEndpoint::new(f)));
    let proxy =
        BallistaFlightProxyService::new(max_decoding, max_encoding, config.use_tls, customize);
    let flight_sql = config.flight_sql_enabled().then(|| {
        let mut service = BallistaFlightSqlService::new(backend, proxy.clone());
        if let Some(authenticator) = config.override_flight_sql_authenticator.clone() {
            service = service.with_authenticator(authenticator);
        }
        FlightServiceServer::new(service)
            .max_decoding_message_size(max_decoding)
            .max_encoding_message_size(max_encoding)
    });
    let flight = (!config.flight_sql_enabled() && config.enable_embedded_flight_proxy).then(|| {
        FlightServiceServer::new(proxy)
            .max_decoding_message_size(max_decoding)
            .max_encoding_message_size(max_encoding)
    });
    tonic::transport::Server::builder()
        .tls_config(tls.server_config())
        .map_err(|e| EngineError::InvalidArgument {
            what: "TLS certificate",
            detail: e.to_string(),
        })?
        .add_service(grpc)
        .add_optional_service(flight_sql)
        .add_optional_service(flight)
        .serve(address)
        .await
        .map_err(|e| EngineError::io(format!("scheduler address {address}"), e))
}

/// Ballista's scheduler reads an executor's address from axum's `ConnectInfo` when the
/// executor does not name its host; tonic's server records it differently, so it is
/// copied over.
#[allow(clippy::result_large_err)] // tonic's interceptor signature
fn record_peer_address(
    mut request: tonic::Request<()>,
) -> Result<tonic::Request<()>, tonic::Status> {
    if let Some(peer) = request.remote_addr() {
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
    }
    Ok(request)
}

fn ballista(e: BallistaError) -> EngineError {
    EngineError::DataFusion(datafusion::error::DataFusionError::External(Box::new(e)))
}
