//! A join filter on the wire: its expression as DataFusion's protobuf (through the same
//! codec, so UDFs inside it travel as they do elsewhere in the plan), which side each of
//! its columns comes from, and its intermediate schema.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema};
use datafusion::common::JoinSide;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::joins::utils::{ColumnIndex, JoinFilter};
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use datafusion_proto::physical_plan::from_proto::parse_physical_expr;
use datafusion_proto::physical_plan::to_proto::serialize_physical_expr;
use datafusion_proto::protobuf::PhysicalExprNode;
use prost::Message;
use serde::{Deserialize, Serialize};

use super::field_text::{FieldText, data_type, field_text};

/// A [`JoinFilter`]'s parts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct JoinFilterPayload {
    /// The expression, a protobuf `PhysicalExprNode` over `schema`.
    expression: Vec<u8>,
    /// Each intermediate column: (column index, true when from the left input).
    columns: Vec<(usize, bool)>,
    schema: Vec<FieldText>,
}

impl JoinFilterPayload {
    pub(super) fn encode(filter: &JoinFilter, codec: &dyn PhysicalExtensionCodec) -> Result<Self> {
        let expression = serialize_physical_expr(filter.expression(), codec)?.encode_to_vec();
        let columns = filter
            .column_indices()
            .iter()
            .map(|c| (c.index, c.side == JoinSide::Left))
            .collect();
        let schema = filter
            .schema()
            .fields()
            .iter()
            .map(|f| field_text(f))
            .collect();
        Ok(Self {
            expression,
            columns,
            schema,
        })
    }

    pub(super) fn decode(
        self,
        ctx: &TaskContext,
        codec: &dyn PhysicalExtensionCodec,
    ) -> Result<JoinFilter> {
        let fields = self
            .schema
            .iter()
            .map(|(name, dt, nullable)| Ok(Field::new(name, data_type(dt)?, *nullable)))
            .collect::<Result<Vec<_>>>()?;
        let schema = Arc::new(Schema::new(fields));
        let node = PhysicalExprNode::decode(self.expression.as_slice()).map_err(|e| {
            DataFusionError::Internal(format!("join filter expression does not decode: {e}"))
        })?;
        let expression = parse_physical_expr(&node, ctx, &schema, codec)?;
        let columns = self
            .columns
            .into_iter()
            .map(|(index, left)| ColumnIndex {
                index,
                side: if left {
                    JoinSide::Left
                } else {
                    JoinSide::Right
                },
            })
            .collect();
        Ok(JoinFilter::new(expression, columns, schema))
    }
}
