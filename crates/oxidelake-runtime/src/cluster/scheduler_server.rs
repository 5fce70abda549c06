//! The scheduler's listening services, on one port: Ballista's scheduler gRPC service,
//! and either OxideLake's checked Arrow Flight SQL frontend (`--flight-sql`,
//! `super::flight_sql`) or Ballista's Flight proxy. Both are Flight services, so only
//! one can be mounted; the frontend also forwards the proxy's partition tickets.
//!
//! Ballista's `start_server` mounts Ballista's own Flight SQL frontend, which hands a
//! client's SQL text straight to DataFusion's parser, so a statement nested too deep
//! could end the scheduler (issue 44). OxideLake therefore mounts the services itself,
//! after Ballista 55's `scheduler_process::start_grpc_service_with_listener` but not
//! all of it. Served: the scheduler's gRPC service, the Flight SQL frontend or the
//! Flight proxy, `GET /healthz` and `GET /readyz`, and 404 for every other path.
//! Not served: Ballista's REST API (`/api/...`), the `Server` and `X-Powered-By`
//! version headers it adds to every answer, and the executor counts in its `/readyz`
//! text.
//!
//! ```text
//!  without TLS:  axum on the port ── tonic's routes: gRPC, Flight SQL or the proxy
//!                                 ├─ GET /healthz, /readyz (liveness, readiness)
//!                                 └─ any other path: 404
//!  with TLS:     tonic's server, mutual TLS ── the same tonic routes, no HTTP routes
//! ```
//!
//! Ballista serves the scheduler's gRPC through a plain `axum::serve` with no TLS hook,
//! so with TLS the routes are served by tonic's server instead. The REST API (not built
//! into OxideLake's scheduler) and the HTTP health routes are then not served at all
//! (docs/cluster.md).
//!
//! A push-staged worker also listens for the scheduler's task launches on a gRPC
//! server Ballista offers no hook for, so TLS clusters run pull-staged; the binaries
//! refuse the other combination.

use std::net::SocketAddr;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightServiceServer;
use axum::http::StatusCode;
use ballista_core::error::BallistaError;
use ballista_core::extension::BallistaConfigGrpcEndpoint;
use ballista_core::flight_proxy_service::BallistaFlightProxyService;
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpcServer;
use ballista_flight_sql::BallistaFlightSqlService;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::create_scheduler;
use ballista_scheduler::scheduler_server::SchedulerServer;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use oxidelake_core::EngineError;
use tonic::service::interceptor::InterceptedService;
use tonic::service::{Routes, RoutesBuilder};

use super::flight_sql::CheckedFlightSql;
use super::tls::ClusterTls;

/// The scheduler as OxideLake's plans and codecs make it.
type Scheduler = SchedulerServer<LogicalPlanNode, PhysicalPlanNode>;

/// Runs the scheduler's services (its gRPC service, and its Flight SQL frontend or
/// Flight proxy, as the config says) on `address` until the process ends: over mutual
/// TLS with `tls`, else in plain text beside the HTTP health routes.
pub async fn serve_scheduler(
    cluster: BallistaCluster,
    address: SocketAddr,
    config: Arc<SchedulerConfig>,
    tls: Option<&ClusterTls>,
) -> Result<(), EngineError> {
    config.validate().map_err(ballista)?;
    let scheduler = create_scheduler::<LogicalPlanNode, PhysicalPlanNode>(cluster, config.clone())
        .await
        .map_err(ballista)?;
    let routes = services(&scheduler, &config);
    let listening = format!("scheduler address {address}");
    match tls {
        Some(tls) => tonic::transport::Server::builder()
            .tls_config(tls.server_config())
            .map_err(|e| EngineError::InvalidArgument {
                what: "TLS certificate",
                detail: e.to_string(),
            })?
            .add_routes(routes)
            .serve(address)
            .await
            .map_err(|e| EngineError::io(listening, e)),
        None => {
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .map_err(|e| EngineError::io(listening.clone(), e))?;
            // tonic's own fallback answers an unknown path with HTTP 200 and gRPC status
            // UNIMPLEMENTED; a plain 404, as Ballista answers, tells an HTTP client more.
            let app = routes
                .into_axum_router()
                .merge(health_routes(Arc::new(scheduler)))
                .fallback(|| async { (StatusCode::NOT_FOUND, "no such route\n") });
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
            .map_err(|e| EngineError::io(listening, e))
        }
    }
}

/// The scheduler's gRPC service and its Flight SQL frontend (checked) or Flight proxy,
/// as Ballista mounts them.
fn services(scheduler: &Scheduler, config: &SchedulerConfig) -> Routes {
    let max_decoding = config.grpc_server_max_decoding_message_size as usize;
    let max_encoding = config.grpc_server_max_encoding_message_size as usize;
    let grpc = InterceptedService::new(
        SchedulerGrpcServer::new(scheduler.clone())
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
    let mut routes = RoutesBuilder::default();
    routes.add_service(grpc);
    if config.flight_sql_enabled() {
        // The frontend submits jobs to the same scheduler.
        let mut frontend = BallistaFlightSqlService::new(Arc::new(scheduler.clone()), proxy);
        if let Some(authenticator) = config.override_flight_sql_authenticator.clone() {
            frontend = frontend.with_authenticator(authenticator);
        }
        if frontend.allows_anonymous() {
            tracing::warn!(
                "Arrow Flight SQL is served with no authenticator: any client that reaches \
                 the scheduler's port can run queries, and such clients share one session"
            );
        }
        routes.add_service(
            FlightServiceServer::new(CheckedFlightSql::new(frontend))
                .max_decoding_message_size(max_decoding)
                .max_encoding_message_size(max_encoding),
        );
    } else if config.enable_embedded_flight_proxy {
        routes.add_service(
            FlightServiceServer::new(proxy)
                .max_decoding_message_size(max_decoding)
                .max_encoding_message_size(max_encoding),
        );
    }
    routes.routes()
}

/// `GET /healthz` (the process answers) and `GET /readyz` (enough executors are
/// registered: `SchedulerConfig::min_ready_executors`) for liveness and readiness
/// probes, with Ballista's status codes; the `/readyz` text does not count the
/// executors, as Ballista's does.
fn health_routes(scheduler: Arc<Scheduler>) -> axum::Router {
    let ready = move || {
        let ready = scheduler.is_ready();
        async move {
            if ready {
                (StatusCode::OK, "ready\n")
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "not ready: too few executors registered\n",
                )
            }
        }
    };
    axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route("/readyz", axum::routing::get(ready))
}

/// Ballista's scheduler reads an executor's address from axum's `ConnectInfo` when the
/// executor does not name its host; tonic's server records it differently, so it is
/// copied over (axum records it itself).
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
