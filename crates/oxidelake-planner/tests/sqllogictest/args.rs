//! The runner's command line. Unknown libtest flags (`--nocapture`, `--test-threads`)
//! are accepted and ignored, because `cargo test --workspace -- …` hands them to every
//! test binary.

use std::path::PathBuf;
use std::time::Duration;

/// What to run.
#[derive(Debug)]
pub struct Args {
    /// Every `.slt` file instead of the CI subset.
    pub all: bool,
    /// Files whose path (relative to `test_files/`) contains one of these.
    pub names: Vec<String>,
    /// Where to write the Markdown report.
    pub report: Option<PathBuf>,
    /// The longest one run of one file may take; a file over it counts as timed out.
    pub timeout: Duration,
    /// `--ignored` or `--list`: libtest asks for something this binary does not have.
    pub nothing_to_run: bool,
}

impl Args {
    /// Reads the arguments after the program name.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut parsed = Args {
            all: false,
            names: Vec::new(),
            report: None,
            timeout: Duration::from_secs(300),
            nothing_to_run: false,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--all" => parsed.all = true,
                "--report" => {
                    let path = args.next().ok_or("--report needs a file path")?;
                    parsed.report = Some(PathBuf::from(path));
                }
                "--timeout-secs" => {
                    let secs = args.next().ok_or("--timeout-secs needs a number")?;
                    let secs: u64 = secs
                        .parse()
                        .map_err(|_| format!("--timeout-secs: `{secs}` is not a number"))?;
                    parsed.timeout = Duration::from_secs(secs);
                }
                "--ignored" | "--list" => parsed.nothing_to_run = true,
                flag if flag.starts_with('-') => {}
                name => parsed.names.push(name.to_string()),
            }
        }
        Ok(parsed)
    }
}
