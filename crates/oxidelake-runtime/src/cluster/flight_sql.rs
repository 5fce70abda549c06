//! The scheduler's Arrow Flight SQL frontend: Ballista's, behind a check of the SQL
//! text a client sends.
//!
//! Ballista's frontend hands a client's SQL text (a statement, a prepared statement, an
//! update) to DataFusion's parser on the scheduler. A statement nested deeper than the
//! scheduler's stacks hold (`SELECT 1+1+…` with 20,000 terms) would overflow one of its
//! threads and abort the scheduler, ending every client's queries (issue 44).
//! [`CheckedFlightSql`] refuses such text with `crate::check_statement_depth` before
//! Ballista sees it, and forwards every request, that one included when it passes,
//! to Ballista's service unchanged. The depth is estimated in every dialect a session
//! can be set to (`check_statement_depth_in_every_dialect`), since a client can `SET
//! datafusion.sql_parser.dialect` in its own session and the frontend keeps its
//! sessions to itself.
//!
//! The check runs before Ballista authenticates the caller, so any client that reaches
//! the port can make the scheduler tokenize what it sends, once per dialect. Text no
//! longer than `crate::MAX_STATEMENT_DEPTH` bytes is not tokenized at all (it cannot
//! nest that deep), and longer text is tokenized on tokio's blocking pool, not on the
//! threads that serve every other request.
//!
//! ```text
//!  client ── Flight SQL ──▶ CheckedFlightSql ── SQL text checked ──▶ BallistaFlightSqlService
//!                               │ too deep                             (plans, submits)
//!                               ▼
//!                      INVALID_ARGUMENT: invalid statement: it nests about N levels deep…
//! ```

use std::pin::Pin;

use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, Any, CommandGetCatalogs, CommandGetDbSchemas,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandGetXdbcTypeInfo,
    CommandPreparedStatementQuery, CommandStatementQuery, CommandStatementUpdate, SqlInfo,
    TicketStatementQuery,
};
use arrow_flight::{
    Action, FlightData, FlightDescriptor, FlightInfo, HandshakeRequest, HandshakeResponse, Ticket,
};
use ballista_flight_sql::{BallistaFlightSqlService, QueryBackend};
use futures::Stream;
use tonic::{Request, Response, Status, Streaming};

/// The stream of `DoGet` answers, as Ballista's service and this one (both through
/// arrow-flight's `FlightService` for every `FlightSqlService`) define it.
type DoGetStream = Pin<Box<dyn Stream<Item = Result<FlightData, Status>> + Send + 'static>>;

/// The stream of handshake answers.
type HandshakeStream = Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>;

/// Ballista's Flight SQL frontend with each statement's depth checked before Ballista
/// parses it; every other request goes to Ballista's service as it came.
pub struct CheckedFlightSql<B: QueryBackend> {
    inner: BallistaFlightSqlService<B>,
}

impl<B: QueryBackend> CheckedFlightSql<B> {
    /// `inner`, behind the depth check.
    pub fn new(inner: BallistaFlightSqlService<B>) -> Self {
        Self { inner }
    }

    /// Refuses `sql` as a client's invalid argument when it nests too deep to plan.
    #[allow(clippy::result_large_err)] // tonic's `Status`, as every handler returns
    async fn check(sql: &str) -> Result<(), Status> {
        // Each level of the estimate is at least one token, and each token at least one
        // byte, so text no longer than the limit cannot nest deeper than it.
        if sql.len() <= crate::MAX_STATEMENT_DEPTH {
            return Ok(());
        }
        // Tokenizing long text once per dialect takes a while: off the async threads.
        let sql = sql.to_owned();
        tokio::task::spawn_blocking(move || crate::check_statement_depth_in_every_dialect(&sql))
            .await
            .map_err(|e| Status::internal(format!("the statement depth check failed: {e}")))?
            .map_err(|e| Status::invalid_argument(e.to_string()))
    }
}

#[tonic::async_trait]
impl<B: QueryBackend> FlightSqlService for CheckedFlightSql<B> {
    type FlightService = CheckedFlightSql<B>;

    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<HandshakeStream>, Status> {
        self.inner.do_handshake(request).await
    }

    async fn do_get_fallback(
        &self,
        request: Request<Ticket>,
        message: Any,
    ) -> Result<Response<DoGetStream>, Status> {
        self.inner.do_get_fallback(request, message).await
    }

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        Self::check(&query.query).await?;
        self.inner.get_flight_info_statement(query, request).await
    }

    async fn get_flight_info_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        // A prepared statement's text was checked when it was prepared.
        self.inner
            .get_flight_info_prepared_statement(query, request)
            .await
    }

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.inner.get_flight_info_catalogs(query, request).await
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.inner.get_flight_info_schemas(query, request).await
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.inner.get_flight_info_tables(query, request).await
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.inner.get_flight_info_table_types(query, request).await
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.inner.get_flight_info_sql_info(query, request).await
    }

    async fn get_flight_info_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.inner
            .get_flight_info_xdbc_type_info(query, request)
            .await
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.inner.do_get_statement(ticket, request).await
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.inner.do_get_catalogs(query, request).await
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.inner.do_get_schemas(query, request).await
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.inner.do_get_tables(query, request).await
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.inner.do_get_table_types(query, request).await
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.inner.do_get_sql_info(query, request).await
    }

    async fn do_get_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        self.inner.do_get_xdbc_type_info(query, request).await
    }

    async fn do_put_statement_update(
        &self,
        ticket: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        Self::check(&ticket.query).await?;
        self.inner.do_put_statement_update(ticket, request).await
    }

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        Self::check(&query.query).await?;
        self.inner
            .do_action_create_prepared_statement(query, request)
            .await
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<(), Status> {
        self.inner
            .do_action_close_prepared_statement(query, request)
            .await
    }

    async fn register_sql_info(&self, id: i32, result: &SqlInfo) {
        self.inner.register_sql_info(id, result).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ballista_core::error::{BallistaError, Result as BallistaResult};
    use ballista_core::flight_proxy_service::BallistaFlightProxyService;
    use ballista_flight_sql::QueryResult;
    use datafusion::logical_expr::LogicalPlan;
    use datafusion::prelude::SessionContext;

    use super::*;

    /// A backend that opens no session: a statement that reaches Ballista's service
    /// fails there with "failed to open session".
    struct NoSessions;

    #[async_trait::async_trait]
    impl QueryBackend for NoSessions {
        async fn session(&self, _session_id: &str) -> BallistaResult<Arc<SessionContext>> {
            Err(BallistaError::General("no sessions here".into()))
        }

        async fn close_session(&self, _session_id: &str) -> BallistaResult<()> {
            Ok(())
        }

        async fn execute(
            &self,
            _job_name: &str,
            _ctx: Arc<SessionContext>,
            _plan: LogicalPlan,
        ) -> BallistaResult<QueryResult> {
            Err(BallistaError::General("no jobs here".into()))
        }
    }

    fn service() -> CheckedFlightSql<NoSessions> {
        let proxy = BallistaFlightProxyService::new(1 << 20, 1 << 20, false, None);
        CheckedFlightSql::new(BallistaFlightSqlService::new(Arc::new(NoSessions), proxy))
    }

    fn refused_as_too_deep(status: &Status) -> bool {
        status.code() == tonic::Code::InvalidArgument
            && status.message().starts_with("invalid statement:")
            && status.message().contains("at most 10000")
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_long_statement_is_checked_off_the_async_thread_while_other_tasks_run() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

        let ticks = Arc::new(AtomicUsize::new(0));
        let ticker = tokio::spawn({
            let ticks = Arc::clone(&ticks);
            async move {
                loop {
                    ticks.fetch_add(1, SeqCst);
                    tokio::task::yield_now().await;
                }
            }
        });
        // The runtime's one thread polls the ticker only while the check waits.
        let deep = format!("SELECT 1{}", "+1".repeat(20_000));
        let refused = CheckedFlightSql::<NoSessions>::check(&deep)
            .await
            .unwrap_err();
        let ticked = ticks.load(SeqCst);
        ticker.abort();
        assert!(refused_as_too_deep(&refused), "{refused:?}");
        assert!(ticked > 0, "the check held the async thread");
    }

    #[tokio::test]
    async fn a_statement_nested_too_deep_is_refused_before_ballista_parses_it() {
        let service = service();
        let deep = format!("SELECT 1{}", "+1".repeat(20_000));
        let statement = CommandStatementQuery {
            query: deep.clone(),
            ..Default::default()
        };
        let refused = service
            .get_flight_info_statement(statement, Request::new(FlightDescriptor::default()))
            .await
            .unwrap_err();
        assert!(refused_as_too_deep(&refused), "{refused:?}");
        let prepared = ActionCreatePreparedStatementRequest {
            query: deep,
            ..Default::default()
        };
        let refused = service
            .do_action_create_prepared_statement(prepared, Request::new(Action::default()))
            .await
            .unwrap_err();
        assert!(refused_as_too_deep(&refused), "{refused:?}");

        // A statement that passes goes on to Ballista's service.
        let shallow = CommandStatementQuery {
            query: "SELECT 1 + 1".into(),
            ..Default::default()
        };
        let passed = service
            .get_flight_info_statement(shallow, Request::new(FlightDescriptor::default()))
            .await
            .unwrap_err();
        assert!(
            passed.message().contains("failed to open session"),
            "{passed:?}"
        );
    }
}
