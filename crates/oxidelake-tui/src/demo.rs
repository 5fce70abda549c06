//! The fixed synthetic snapshot `oxidelake-tui-demo` shows (and the render tests use).

use oxidelake_core::{
    BackendKind, MemoryGauges, SpillSnapshot, TelemetrySnapshot, TransferSnapshot,
};

use crate::model::{Capacities, ColumnStats, NodeStats, PlanNode, QueryStatus};
use crate::state::AppState;

fn node(
    depth: usize,
    name: &str,
    detail: &str,
    backend: BackendKind,
    stats: NodeStats,
) -> PlanNode {
    PlanNode {
        depth,
        name: name.into(),
        detail: detail.into(),
        backend,
        stats,
    }
}

fn stats(
    rows_in: Option<u64>,
    rows_out: u64,
    batches: u64,
    busy_ms: u64,
    mem: u64,
    moved: u64,
) -> NodeStats {
    NodeStats {
        rows_in,
        rows_out,
        batches,
        busy_ns: busy_ms * 1_000_000,
        allocated_bytes: mem,
        bytes_moved: moved,
        ..NodeStats::default()
    }
}

/// A finished TPC-H-like query over a GPU-placed plan: deterministic, no clock.
pub fn demo_state() -> AppState {
    let mut state = AppState::new(
        "SELECT l_returnflag, SUM(l_quantity), COUNT(l_quantity), MIN(l_extendedprice), \
         MAX(l_extendedprice) FROM lineitem JOIN orders ON l_orderkey = o_orderkey \
         WHERE l_quantity < 24 GROUP BY l_returnflag",
    );
    state.status = QueryStatus::Finished {
        elapsed_ms: 1_284,
        rows: 3,
    };
    state.plan = vec![
        node(
            0,
            "SortPreservingMergeExec",
            "[l_returnflag ASC]",
            BackendKind::CpuSimd,
            stats(None, 3, 1, 0, 0, 0),
        ),
        node(
            1,
            "GpuAggregateExec",
            "gby=[l_returnflag], aggr=[sum, count, min, max]",
            BackendKind::Cuda,
            stats(Some(3_212_018), 3, 393, 41, 262_144, 77_088_432),
        ),
        node(
            2,
            "GpuHashJoinExec",
            "join_type=Inner, on=[(o_orderkey, l_orderkey)]",
            BackendKind::Cuda,
            stats(
                Some(6_001_215),
                3_212_018,
                733,
                388,
                100_663_296,
                144_029_160,
            ),
        ),
        node(
            3,
            "DataSourceExec",
            "orders.parquet, projection=[o_orderkey]",
            BackendKind::CpuSimd,
            stats(None, 1_500_000, 184, 96, 0, 0),
        ),
        node(
            3,
            "GpuFilterExec",
            "predicate=l_quantity < 24",
            BackendKind::Cuda,
            stats(Some(6_001_215), 3_212_018, 733, 52, 4_194_304, 96_019_440),
        ),
        node(
            4,
            "DataSourceExec",
            "lineitem.parquet, projection=[l_orderkey, l_quantity, l_extendedprice, l_returnflag]",
            BackendKind::CpuSimd,
            stats(None, 6_001_215, 733, 612, 0, 0),
        ),
    ];
    state.telemetry = Some(TelemetrySnapshot {
        operators: Vec::new(),
        memory: MemoryGauges {
            device_bytes: 6_442_450_944,
            host_bytes: 2_147_483_648,
            pinned_bytes: 536_870_912,
            disk_bytes: 268_435_456,
            host_peak_bytes: 3_221_225_472,
        },
        transfers: TransferSnapshot {
            h2d_bytes: 240_048_600,
            d2h_bytes: 77_088_432,
            transfer_ns: 25_000_000,
        },
        spill: SpillSnapshot {
            demotions: 12,
            promotions: 4,
            written_bytes: 268_435_456,
            read_bytes: 67_108_864,
            write_ns: 180_000_000,
            read_ns: 30_000_000,
        },
        plan_summary: String::new(),
        consistent: true,
    });
    state.capacities = Capacities {
        vram_bytes: 150_323_855_360,
        host_bytes: 17_179_869_184,
        pinned_bytes: 4_294_967_296,
        disk_bytes: 107_374_182_400,
    };
    state.columns = vec![
        ColumnStats {
            name: "l_returnflag".into(),
            min: "A".into(),
            max: "R".into(),
            null_count: 0,
            p25: "-".into(),
            p50: "-".into(),
            p99: "-".into(),
        },
        ColumnStats {
            name: "sum(l_quantity)".into(),
            min: "18876043".into(),
            max: "37719753".into(),
            null_count: 0,
            p25: "18876043".into(),
            p50: "18884104".into(),
            p99: "37719753".into(),
        },
        ColumnStats {
            name: "count(l_quantity)".into(),
            min: "739506".into(),
            max: "1478493".into(),
            null_count: 0,
            p25: "739506".into(),
            p50: "740013".into(),
            p99: "1478493".into(),
        },
        ColumnStats {
            name: "min(l_extendedprice)".into(),
            min: "904.00".into(),
            max: "904.00".into(),
            null_count: 0,
            p25: "904.00".into(),
            p50: "904.00".into(),
            p99: "904.00".into(),
        },
        ColumnStats {
            name: "max(l_extendedprice)".into(),
            min: "104949.50".into(),
            max: "104949.50".into(),
            null_count: 0,
            p25: "104949.50".into(),
            p50: "104949.50".into(),
            p99: "104949.50".into(),
        },
    ];
    state
}
