//! `OxidePhysicalCodec`: ships the `Gpu*Exec` nodes between client, scheduler and
//! executors.
//!
//! DataFusion serialises every built-in node itself and hands the codec only the nodes
//! nobody else knows; children are encoded by DataFusion too, so a payload holds just the
//! node's own parameters (postcard, behind a magic prefix). Nodes that are not ours go to
//! the fallback codec (Ballista's, in a cluster), so one codec serves the whole plan.

mod field_text;
mod join_filter;
mod payload;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::{
    DefaultPhysicalExtensionCodec, PhysicalExtensionCodec, PhysicalProtoConverterExtension,
};

use crate::CodecError;
use payload::NodePayload;

/// Prefix of every OxideLake payload. `O` (0x4F) is not a valid first byte of a
/// protobuf message with field numbers below 10, so it cannot collide with the payloads
/// of Ballista's codec.
const MAGIC: &[u8] = b"OXGPU1";

/// The physical extension codec for OxideLake plans.
#[derive(Debug, Clone)]
pub struct OxidePhysicalCodec {
    fallback: Arc<dyn PhysicalExtensionCodec>,
    decoded: Arc<AtomicU64>,
    /// The same count per node name.
    decoded_by_name: Arc<Mutex<BTreeMap<&'static str, u64>>>,
}

impl Default for OxidePhysicalCodec {
    fn default() -> Self {
        Self::new(Arc::new(DefaultPhysicalExtensionCodec {}))
    }
}

impl OxidePhysicalCodec {
    /// A codec that hands nodes it does not own to `fallback` (Ballista's codec in a
    /// cluster, DataFusion's default otherwise).
    pub fn new(fallback: Arc<dyn PhysicalExtensionCodec>) -> Self {
        Self {
            fallback,
            decoded: Arc::new(AtomicU64::new(0)),
            decoded_by_name: Arc::default(),
        }
    }

    /// How many OxideLake nodes this codec (and its clones) has decoded: on an executor,
    /// the GPU nodes that arrived in stage plans.
    pub fn decoded_nodes(&self) -> u64 {
        self.decoded.load(Ordering::Relaxed)
    }

    /// How many nodes named `name` (`GpuFilterExec`, `HostToDeviceExec`, …) this codec
    /// and its clones have decoded.
    pub fn decoded_nodes_named(&self, name: &str) -> u64 {
        let counts = self
            .decoded_by_name
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        counts.get(name).copied().unwrap_or(0)
    }
}

impl PhysicalExtensionCodec for OxidePhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let Some(body) = buf.strip_prefix(MAGIC) else {
            return self.fallback.try_decode(buf, inputs, ctx, converter);
        };
        let payload: NodePayload = postcard::from_bytes(body).map_err(|source| {
            DataFusionError::from(oxidelake_core::EngineError::from(CodecError::Decode {
                node: "OxideLake node",
                source,
            }))
        })?;
        let name = payload.node_name();
        let plan = payload.into_plan(inputs, ctx, self)?;
        self.decoded.fetch_add(1, Ordering::Relaxed);
        *self
            .decoded_by_name
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(name)
            .or_default() += 1;
        Ok(plan)
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        converter: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let Some(payload) = NodePayload::from_plan(&node, self)? else {
            return self.fallback.try_encode(node, buf, converter);
        };
        let body = postcard::to_allocvec(&payload).map_err(|source| {
            DataFusionError::from(oxidelake_core::EngineError::from(CodecError::Encode {
                node: payload.node_name(),
                source,
            }))
        })?;
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&body);
        Ok(())
    }
}
