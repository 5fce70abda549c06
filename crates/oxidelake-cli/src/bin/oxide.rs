//! `oxide`: the OxideLake command line.
//!
//! ```text
//! oxide demo                                  generate a small dataset, run placed queries
//! oxide sql [-c SQL]... [-f FILE]... [-q] [--maxrows N|inf] [--continue-on-error]
//!           [--format table|csv|tsv|json|ndjson|markdown|automatic] [--rc FILE]
//!           [--data DIR] [--cluster df://h:p]
//!           [--memory-limit SIZE] [--mem-pool-type fair|greedy] [--disk-limit SIZE]
//! oxide explain -c SQL [--data DIR] [--placement auto|cpu|cuda]
//! oxide gen-data --rows N --out DIR | --tpch --scale-factor SF --out DIR
//! oxide tui -c SQL --table NAME=PATH
//! oxide table --data-dir D create|list …      versioned tables
//! oxide insert --data-dir D "INSERT …" VALUES…  one row, files uploaded as managed objects
//! oxide objects --data-dir D cat|verify|gc …  managed objects
//! ```
//! Errors, usage errors included, print one line on stderr and exit with status 1; a
//! statement cancelled with Ctrl-C outside the prompt exits with 130 (on a cluster its
//! job is cancelled on the scheduler first). Warnings go to stderr too (`RUST_LOG` sets
//! the level, default `warn`), except under `oxide tui`.
//!
//! Commands run on a thread with a large stack (`oxidelake_runtime::run_with_planning_stack`),
//! and statements estimated deeper than `MAX_STATEMENT_DEPTH` are refused
//! (`oxidelake_runtime::check_statement_depth`), so a long chain of operators or UNIONs
//! is an answer or an error line, not a stack overflow.
//! File names may be any bytes; an argument that must be text and is not is named in
//! the error line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use oxidelake_core::EngineError;
use oxidelake_runtime::cli::driver::{Driver, Flow};
use oxidelake_runtime::cli::output::Format;
use oxidelake_runtime::cli::run::RunOptions;
use oxidelake_runtime::cli::{arguments, demo, error_line, gen_data, logging, repl, tables, tpch};
use oxidelake_runtime::cluster::TlsArgs;
use oxidelake_runtime::memory::{HostBudget, parse_size};
use oxidelake_runtime::{
    DetectorProbe, OxideSession, PlacementTarget, option_keys, query_runtime, run_dashboard,
    run_with_planning_stack,
};
use oxidelake_sdk::commands::{
    CommandError, InsertArgs, ObjectsArgs, TableArgs, insert, objects, table,
};
use oxidelake_storage::{LakeWriterOptions, ParquetCompression};

/// `oxide --version`: the version and how the binary was built, since a dev build is
/// several times slower than a release build and speed reports should say which ran.
const VERSION: &str = if cfg!(debug_assertions) {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (dev build: mostly unoptimized, for trying things out; `cargo install --locked \
         --profile fast --path crates/oxidelake-cli` gives an optimised build)"
    )
} else {
    concat!(env!("CARGO_PKG_VERSION"), " (optimised build)")
};

/// OxideLake: GPU-accelerated analytical SQL over Parquet lakes.
#[derive(Debug, Parser)]
#[command(name = "oxide", version = VERSION, about, long_about = None)]
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
    /// Run SQL: the statements of -c and -f, else an interactive prompt (or stdin's).
    Sql(SqlArgs),
    /// Show the physical plan with placement tags and why nodes stayed on the CPU.
    Explain(QueryArgs),
    /// Write the synthetic dataset or TPC-H as lake Parquet.
    GenData(GenDataArgs),
    /// Run a query under the terminal dashboard (↑/↓ select, Tab panel, q quit).
    Tui(QueryArgs),
    /// Create and list versioned tables (`create ns.table "id:int64!, episode:file"`).
    Table(TableArgs),
    /// Insert one row into a versioned table, uploading its file parameters as managed
    /// objects; the row and its objects appear when the table's commit lands.
    Insert(InsertArgs),
    /// Read (verified), verify and garbage-collect managed objects.
    Objects(ObjectsArgs),
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
    /// With --cluster: mutual TLS, presenting a certificate the cluster's CA signed.
    #[command(flatten)]
    tls: TlsArgs,
    /// Backend to place operators for: auto (this machine), cpu or cuda. A GPU
    /// this machine lacks runs the GPU operators' CPU paths.
    #[arg(long, default_value = "auto")]
    placement: String,
    /// Host memory the query's operators may hold together (e.g. 2G, 512M); beyond it
    /// sorts, aggregates and hash joins spill to disk (hash joins run as
    /// GraceHashJoinExec, their parts on the GPU when placed for one). Embedded sessions
    /// only. Default: no limit.
    #[arg(long, value_name = "SIZE")]
    memory_limit: Option<String>,
    /// How operators share --memory-limit: fair (each spilling operator an equal share)
    /// or greedy (first come, first served).
    #[arg(long, value_name = "fair|greedy", default_value = "fair")]
    mem_pool_type: String,
    /// Disk the spill files may take (e.g. 20G). Default: DataFusion's, 100G.
    #[arg(long, value_name = "SIZE")]
    disk_limit: Option<String>,
    /// Device memory the build sides of hash joins placed on a GPU may claim together
    /// (e.g. 8G); a larger build side is split through spill files and joined in parts.
    /// Also `SET oxidelake.memory.device_limit`. Embedded sessions only. Default: no limit.
    #[arg(long, value_name = "SIZE")]
    device_limit: Option<String>,
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
    /// Run these statements and exit (repeatable; each may hold several, ended by `;`,
    /// and the prompt's commands such as `\d`).
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    commands: Vec<String>,
    /// Run the statements in FILE and exit (repeatable; after the -c ones).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print results only: no banner, no row count or time.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Rows the table format shows; the rest are counted, not printed (inf: all).
    #[arg(long, value_name = "N|inf", default_value = "40")]
    maxrows: String,
    /// Output format: table (the default), csv, tsv, json, ndjson, markdown, or
    /// automatic (a table on a terminal, CSV into a pipe or file). Wins over a `.mode`
    /// in ~/.oxiderc.
    #[arg(long, value_name = "FORMAT")]
    format: Option<String>,
    /// Go on after a failing statement of -c, -f or piped input (the exit status is
    /// still 1 if any failed). Without it the first error stops the run.
    #[arg(long)]
    continue_on_error: bool,
    /// Statements run before the prompt opens. Default: ~/.oxiderc, when it exists.
    /// Not read with -c or -f.
    #[arg(long, value_name = "FILE")]
    rc: Option<PathBuf>,
    #[command(flatten)]
    session: SessionArgs,
}

impl SqlArgs {
    fn run_options(&self) -> Result<RunOptions, EngineError> {
        let invalid = |what| move |detail: String| EngineError::InvalidArgument { what, detail };
        Ok(RunOptions {
            format: match &self.format {
                Some(format) => format.parse().map_err(invalid("--format"))?,
                None => Format::Table,
            },
            max_rows: self.maxrows.parse().map_err(invalid("--maxrows"))?,
            quiet: self.quiet,
            timing: true,
        })
    }
}

#[derive(Debug, Args)]
struct QueryArgs {
    /// The statement.
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    query: String,
    #[command(flatten)]
    session: SessionArgs,
}

#[derive(Debug, Args)]
struct GenDataArgs {
    /// Output directory (one subdirectory per table). May be left out with --queries,
    /// to write only the queries.
    #[arg(long, required_unless_present = "queries")]
    out: Option<PathBuf>,
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
    /// With --tpch: also write the 22 queries, with the specification's validation
    /// parameters for this scale factor, as DIR/q01.sql … q22.sql (for `oxide sql -f`
    /// and for other engines; scripts/bench_tpch.py uses them).
    #[arg(long, value_name = "DIR", requires = "tpch")]
    queries: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `oxide` alone: the help is the answer, on stderr, as a failure.
            let _ = e.print();
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("error: {} (see oxide --help)", usage_error_line(&e));
            return ExitCode::FAILURE;
        }
    };
    // The dashboard owns the terminal: log lines would tear its screen.
    if !matches!(cli.command, Command::Tui(_)) {
        logging::init(logging::filter(None, logging::CLIENT_DEFAULT));
    }
    let command = cli.command;
    match run_with_planning_stack(move || run_command(command)).and_then(|ran| ran) {
        Ok(code) => code,
        Err(e) => report_error(&e),
    }
}

/// clap's message on one line: its first paragraph (a missing argument's name is on the
/// lines after the first), and a pointer to -c for the old `oxide sql -q SQL`.
fn usage_error_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let paragraph: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let message = paragraph.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    if let Some(which) = arguments::non_text_error(e) {
        return which;
    }
    // Arguments as the OS gave them: one that is not UTF-8 must not end the process.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `-q` took the statement before it meant --quiet, as in datafusion-cli.
    let old_query_flag =
        args.get(1).is_some_and(|a| a == "sql") && args.iter().any(|a| a == "-q" || a == "--query");
    if old_query_flag && e.kind() == clap::error::ErrorKind::UnknownArgument {
        format!("{message}; -q is --quiet, the statement goes in -c")
    } else {
        message.to_string()
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, EngineError> {
    // Operators evaluate deep expression trees recursively on these threads.
    query_runtime("oxide")
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
            let session = OxideSession::connect_with_tls(url, args.tls.load()?).await?;
            if target != PlacementTarget::Auto {
                let key = option_keys::PLACEMENT_TARGET;
                session.sql(&format!("SET {key} = '{target}'")).await?;
            }
            session
        }
        None if args.tls.tls_ca.is_some() => {
            return Err(EngineError::InvalidArgument {
                what: "--tls-ca",
                detail: "the --tls-* flags apply to --cluster sessions".into(),
            });
        }
        None => {
            oxidelake_runtime::check_forced_backend()?;
            OxideSession::local_with(target, Arc::new(DetectorProbe))
        }
    };
    if let Some(budget) = args.host_budget()? {
        session.set_host_budget(&budget)?;
    }
    if let Some(limit) = &args.device_limit {
        let bytes = parse_size("--device-limit", limit)?;
        session.set_device_limit(Some(bytes))?;
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

fn exit_code(flow: Flow, failures: usize) -> ExitCode {
    match flow {
        Flow::Interrupted => ExitCode::from(130),
        _ if failures > 0 => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    }
}

/// The statements of `--rc`, or of `~/.oxiderc` when it exists, run before the prompt;
/// a failing one is reported and the prompt opens all the same. Returns the printing
/// options the file's commands (`.mode`, `\timing`) leave for the prompt.
async fn run_rc(
    session: &OxideSession,
    rc: Option<&Path>,
    options: RunOptions,
) -> Result<RunOptions, EngineError> {
    let default = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".oxiderc"));
    let path = match (rc, default) {
        (Some(path), _) => path.to_path_buf(),
        (None, Some(path)) if path.is_file() => path,
        _ => return Ok(options),
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| EngineError::io(path.display().to_string(), e))?;
    let quiet = RunOptions {
        quiet: true,
        ..options
    };
    let mut driver = Driver::new(session, quiet, true, false);
    driver.run_text(&text).await?;
    Ok(RunOptions {
        quiet: options.quiet,
        ..driver.options
    })
}

async fn run_sql(args: &SqlArgs) -> Result<ExitCode, EngineError> {
    let options = args.run_options()?;
    let session = open_session(&args.session).await?;
    if args.commands.is_empty() && args.files.is_empty() {
        let format = options.format;
        let mut options = run_rc(&session, args.rc.as_deref(), options).await?;
        if args.format.is_some() {
            // An explicit --format wins over the rc file's `.mode`.
            options.format = format;
        }
        let (flow, failures) = repl::repl(&session, options, args.continue_on_error).await?;
        return Ok(exit_code(flow, failures));
    }
    let mut driver = Driver::new(&session, options, args.continue_on_error, false);
    let mut flow = Flow::Continue;
    for text in &args.commands {
        flow = driver.run_text(text).await?;
        if flow != Flow::Continue {
            return Ok(exit_code(flow, driver.failures()));
        }
    }
    for path in &args.files {
        let file = std::fs::File::open(path)
            .map_err(|e| EngineError::io(path.display().to_string(), e))?;
        flow = driver.run_reader(std::io::BufReader::new(file)).await?;
        if flow != Flow::Continue {
            break;
        }
    }
    Ok(exit_code(flow, driver.failures()))
}

fn run_command(command: Command) -> Result<ExitCode, EngineError> {
    match command {
        Command::Demo { dir, rows } => {
            runtime()?.block_on(demo::demo(&dir, rows, &mut std::io::stdout().lock()))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Sql(args) => {
            let runtime = runtime()?;
            let code = runtime.block_on(run_sql(&args));
            // A cancelled query's tasks stop at their next yield; the process need not
            // wait for that to exit.
            runtime.shutdown_background();
            code
        }
        Command::Explain(args) => runtime()?.block_on(async {
            let session = open_session(&args.session).await?;
            println!("{}", session.explain(&args.query).await?.trim_end());
            Ok(ExitCode::SUCCESS)
        }),
        Command::GenData(args) => {
            let compression: ParquetCompression = args.compression.parse()?;
            let options = LakeWriterOptions::default().with_compression(compression);
            if args.tpch {
                if let Some(out) = &args.out {
                    for (table, file) in gen_data::generate_tpch(out, args.scale_factor, &options)?
                    {
                        eprintln!("{table}: {} rows, {} bytes", file.rows, file.bytes);
                    }
                }
                if let Some(dir) = &args.queries {
                    let files = tpch::write_tpch_queries(dir, args.scale_factor)?;
                    eprintln!("queries: {} files in {}", files.len(), dir.display());
                }
            } else if let Some(out) = &args.out {
                let file = gen_data::generate_synthetic(out, args.rows, &options)?;
                eprintln!("t: {} rows, {} bytes", file.rows, file.bytes);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tui(args) => {
            let session = runtime()?.block_on(open_session(&args.session))?;
            run_dashboard(session, &args.query)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Table(args) => managed_objects(table::run(args)),
        Command::Insert(args) => managed_objects(insert::run(args)),
        Command::Objects(args) => managed_objects(objects::run(args)),
    }
}

/// Runs one of the SDK's commands; its error is one `error:` line, as every other.
fn managed_objects(
    body: impl std::future::Future<Output = Result<(), CommandError>>,
) -> Result<ExitCode, EngineError> {
    match runtime()?.block_on(body) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => Ok(report_error(&e)),
    }
}

/// Prints `e` as `oxide`'s one `error:` line on stderr; returns the failing status.
fn report_error(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {}", error_line::one_line(&e.to_string()));
    ExitCode::FAILURE
}
