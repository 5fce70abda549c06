//! `oxide`: the OxideLake command line.
//!
//! ```text
//! oxide demo                                  generate a small dataset, run placed queries
//! oxide sql [-q SQL] [--data DIR] [--format table|csv|json] [--cluster df://h:p]
//!           [--memory-limit SIZE] [--mem-pool-type fair|greedy] [--disk-limit SIZE]
//! oxide explain -q SQL [--data DIR] [--placement auto|cpu|cuda|metal]
//! oxide gen-data --rows N --out DIR | --tpch --scale-factor SF --out DIR
//! oxide tui -q SQL --table NAME=PATH
//! ```
//! Errors print one line on stderr and exit with status 1. Warnings go to stderr too
//! (`RUST_LOG` sets the level, default `warn`), except under `oxide tui`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use oxidelake_core::EngineError;
use oxidelake_runtime::cli::output::Format;
use oxidelake_runtime::cli::{demo, error_line, gen_data, logging, repl, run, tables};
use oxidelake_runtime::memory::{HostBudget, parse_size};
use oxidelake_runtime::{DetectorProbe, OxideSession, PlacementTarget, run_dashboard};
use oxidelake_storage::{LakeWriterOptions, ParquetCompression};

/// OxideLake: GPU-accelerated analytical SQL over Parquet lakes.
#[derive(Debug, Parser)]
#[command(name = "oxide", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a small dataset if there is none, then run placed, timed queries.
    Demo {
        /// Where the demo data lives. It is generated into a temporary sibling directory
        /// and renamed into place when complete; a directory here that is not a complete
        /// demo dataset (from an interrupted older run, or damaged) is an error: delete it
        /// and run the demo again.
        #[arg(long, default_value = "oxide-demo-data")]
        dir: PathBuf,
        /// Rows to generate when the data does not exist yet.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
    },
    /// Run SQL: one statement with -q, else an interactive prompt (or stdin's statements).
    Sql(SqlArgs),
    /// Show the physical plan with placement tags and why nodes stayed on the CPU.
    Explain(SqlArgs),
    /// Write the synthetic dataset or TPC-H as lake Parquet.
    GenData(GenDataArgs),
    /// Run a query under the terminal dashboard (↑/↓ select, Tab panel, q quit).
    Tui(TuiArgs),
    /// `oxide <name> …` runs `oxide-<name> …` installed next to `oxide` (`insert`,
    /// `table` and `objects` come with the SDK).
    #[command(external_subcommand)]
    External(Vec<String>),
}

#[derive(Debug, Args)]
struct SessionArgs {
    /// Register every Parquet dataset in DIR as a table (subdirectory or file name).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// A Parquet file or directory as NAME=PATH (repeatable).
    #[arg(short = 't', long = "table", value_name = "NAME=PATH")]
    tables: Vec<String>,
    /// Run on the Ballista cluster behind this scheduler (df://host:port).
    #[arg(long, value_name = "URL")]
    cluster: Option<String>,
    /// Backend to place operators for: auto (this machine), cpu, cuda or metal. A GPU
    /// this machine lacks runs the GPU operators' CPU paths.
    #[arg(long, default_value = "auto")]
    placement: String,
    /// Host memory the query's operators may hold together (e.g. 2G, 512M); beyond it
    /// sorts and aggregates spill to disk and joins fail with "Resources exhausted".
    /// Embedded sessions only. Default: no limit.
    #[arg(long, value_name = "SIZE")]
    memory_limit: Option<String>,
    /// How operators share --memory-limit: fair (each spilling operator an equal share)
    /// or greedy (first come, first served).
    #[arg(long, value_name = "fair|greedy", default_value = "fair")]
    mem_pool_type: String,
    /// Disk the spill files may take (e.g. 20G). Default: DataFusion's, 100G.
    #[arg(long, value_name = "SIZE")]
    disk_limit: Option<String>,
    /// Keep an Arrow IPC copy of table NAME that queries read instead of its Parquet
    /// (repeatable; rebuilt when the Parquet files change). Also `CACHE TABLE name`.
    #[arg(long = "cache", value_name = "NAME")]
    cache: Vec<String>,
    /// Where the IPC copies live. Default: ~/.cache/oxidelake/hot-cache.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

impl SessionArgs {
    /// The host budget the flags ask for, if any flag asked.
    fn host_budget(&self) -> Result<Option<HostBudget>, EngineError> {
        if self.memory_limit.is_none() && self.disk_limit.is_none() {
            return Ok(None);
        }
        let pool =
            self.mem_pool_type
                .parse()
                .map_err(|detail: String| EngineError::InvalidArgument {
                    what: "--mem-pool-type",
                    detail,
                })?;
        Ok(Some(HostBudget {
            memory_limit: self
                .memory_limit
                .as_deref()
                .map(|s| parse_size("--memory-limit", s))
                .transpose()?,
            pool,
            disk_limit: self
                .disk_limit
                .as_deref()
                .map(|s| parse_size("--disk-limit", s).map(|n| n as u64))
                .transpose()?,
        }))
    }
}

#[derive(Debug, Args)]
struct SqlArgs {
    /// The statement (without it, `oxide sql` reads statements interactively).
    #[arg(short = 'q', long)]
    query: Option<String>,
    /// Output format.
    #[arg(long, default_value = "table")]
    format: String,
    #[command(flatten)]
    session: SessionArgs,
}

#[derive(Debug, Args)]
struct GenDataArgs {
    /// Output directory (one subdirectory per table).
    #[arg(long)]
    out: PathBuf,
    /// Rows of the synthetic table `t`.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Write the eight TPC-H tables instead.
    #[arg(long)]
    tpch: bool,
    /// TPC-H scale factor (1 = 6 million lineitem rows).
    #[arg(long, default_value_t = 0.1)]
    scale_factor: f64,
    /// Page compression: none, lz4 or zstd.
    #[arg(long, default_value = "lz4")]
    compression: String,
}

#[derive(Debug, Args)]
struct TuiArgs {
    /// The SQL query to run.
    #[arg(short = 'q', long)]
    query: String,
    #[command(flatten)]
    session: SessionArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The dashboard owns the terminal: log lines would tear its screen.
    if !matches!(cli.command, Command::Tui(_)) {
        logging::init(logging::filter(None, "warn"));
    }
    match run_command(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_line::one_line(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, EngineError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| EngineError::Internal(format!("tokio runtime: {e}")))
}

async fn open_session(args: &SessionArgs) -> Result<OxideSession, EngineError> {
    let target: PlacementTarget =
        args.placement
            .parse()
            .map_err(|detail: String| EngineError::InvalidArgument {
                what: "placement",
                detail,
            })?;
    let session = match &args.cluster {
        Some(url) => {
            let session = OxideSession::connect(url).await?;
            if target != PlacementTarget::Auto {
                session
                    .sql(&format!("SET oxidelake.placement.target = '{target}'"))
                    .await?;
            }
            session
        }
        None => OxideSession::local_with(target, Arc::new(DetectorProbe)),
    };
    if let Some(budget) = args.host_budget()? {
        session.set_host_budget(&budget)?;
    }
    if let Some(dir) = &args.data {
        tables::register_data_dir(&session, dir).await?;
    }
    for table in &args.tables {
        let (name, path) = table
            .split_once('=')
            .ok_or_else(|| EngineError::InvalidArgument {
                what: "--table",
                detail: format!("expected NAME=PATH, got {table:?}"),
            })?;
        session.register_parquet(name, path).await?;
    }
    if let Some(dir) = &args.cache_dir {
        session.set_hot_cache_dir(dir);
    }
    for name in &args.cache {
        let started = std::time::Instant::now();
        let info = session.cache_table(name).await?;
        eprintln!(
            "cached {}: {} rows, {:.1} MiB of Arrow IPC in {:.2} s",
            info.table,
            info.rows,
            info.bytes as f64 / (1024.0 * 1024.0),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(session)
}

fn run_command(command: Command) -> Result<(), EngineError> {
    match command {
        Command::Demo { dir, rows } => {
            runtime()?.block_on(demo::demo(&dir, rows, &mut std::io::stdout().lock()))
        }
        Command::Sql(args) => {
            let format: Format =
                args.format
                    .parse()
                    .map_err(|detail: String| EngineError::InvalidArgument {
                        what: "--format",
                        detail,
                    })?;
            runtime()?.block_on(async {
                let session = open_session(&args.session).await?;
                match &args.query {
                    Some(sql) => {
                        run::run_statement(&session, sql, format, &mut std::io::stdout().lock())
                            .await
                    }
                    None => repl::repl(&session, format).await,
                }
            })
        }
        Command::Explain(args) => runtime()?.block_on(async {
            let sql = args
                .query
                .as_deref()
                .ok_or_else(|| EngineError::InvalidArgument {
                    what: "-q",
                    detail: "oxide explain needs a query".into(),
                })?;
            let session = open_session(&args.session).await?;
            println!("{}", session.explain(sql).await?.trim_end());
            Ok(())
        }),
        Command::GenData(args) => {
            let compression: ParquetCompression = args.compression.parse()?;
            let options = LakeWriterOptions::default().with_compression(compression);
            if args.tpch {
                for (table, file) in
                    gen_data::generate_tpch(&args.out, args.scale_factor, &options)?
                {
                    eprintln!("{table}: {} rows, {} bytes", file.rows, file.bytes);
                }
            } else {
                let file = gen_data::generate_synthetic(&args.out, args.rows, &options)?;
                eprintln!("t: {} rows, {} bytes", file.rows, file.bytes);
            }
            Ok(())
        }
        Command::Tui(args) => {
            let session = runtime()?.block_on(open_session(&args.session))?;
            run_dashboard(session, &args.query)
        }
        Command::External(args) => external(&args),
    }
}

/// Runs `oxide-<name>` from the directory of this executable, passing the rest of the
/// arguments, and exits with its status.
fn external(args: &[String]) -> Result<(), EngineError> {
    let Some((name, rest)) = args.split_first() else {
        return Err(EngineError::InvalidArgument {
            what: "command",
            detail: "missing".into(),
        });
    };
    let unknown = || EngineError::InvalidArgument {
        what: "command",
        detail: format!("unknown command {name:?} (see oxide --help)"),
    };
    let exe = std::env::current_exe().map_err(|e| EngineError::io("current executable", e))?;
    let candidate = exe.with_file_name(format!("oxide-{name}"));
    if !candidate.is_file() {
        return Err(unknown());
    }
    let status = std::process::Command::new(&candidate)
        .args(rest)
        .status()
        .map_err(|e| EngineError::io(candidate.display().to_string(), e))?;
    std::process::exit(status.code().unwrap_or(1));
}
