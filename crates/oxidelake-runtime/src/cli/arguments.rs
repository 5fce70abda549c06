//! Command-line arguments that are not UTF-8 text.
//!
//! Arguments reach a process as bytes. The binaries keep file names as they are
//! (`PathBuf` and `OsString` arguments: `-f`, `--rc`, `--data`, `--out`, `--work-dir`,
//! the TLS files, the `@path` values of `oxide insert`). SQL, table names and options
//! must be text; there clap refuses other bytes with "invalid UTF-8 was detected in one
//! or more arguments", naming neither the argument nor its flag, and `oxide` then
//! panicked reading `std::env::args` for its own message (issue 44). [`non_text_argument`]
//! says which argument it was; [`non_text_error`] says it for clap's error, and
//! [`parse_args_or_exit`] parses a binary's arguments with it (`oxide-scheduler`,
//! `oxide-worker`; `oxide` words its other usage errors itself).

use std::ffi::OsString;

/// This process's arguments parsed as `A`, or the process ends as clap ends it (`--help`
/// and `--version` with status 0, a usage error with 2), except that an argument that
/// is not UTF-8 text is named with its flag in one `error:` line, with status 1.
pub fn parse_args_or_exit<A: clap::Parser>() -> A {
    match A::try_parse() {
        Ok(args) => args,
        Err(e) => match non_text_error(&e) {
            Some(which) => {
                eprintln!("error: {which}");
                std::process::exit(1)
            }
            None => e.exit(),
        },
    }
}

/// When clap refused this process's arguments because one is not UTF-8 text, which one
/// ([`non_text_argument`]); `None` for every other error.
pub fn non_text_error(e: &clap::Error) -> Option<String> {
    if e.kind() == clap::error::ErrorKind::InvalidUtf8 {
        non_text_argument(std::env::args_os().skip(1))
    } else {
        None
    }
}

/// The first argument of `args` (the program's, without its name) that is not UTF-8,
/// described by its flag (`-c`, `--table`, `--flag=…`) or its position, with its
/// bytes escaped; `None` when all are text.
pub fn non_text_argument(args: impl IntoIterator<Item = OsString>) -> Option<String> {
    let args: Vec<OsString> = args.into_iter().collect();
    let index = args.iter().position(|a| a.to_str().is_none())?;
    let value = &args[index];
    let bytes = value.as_encoded_bytes();
    let inline_flag = bytes
        .starts_with(b"-")
        .then(|| bytes.iter().position(|&b| b == b'='))
        .flatten()
        .map(|eq| String::from_utf8_lossy(&bytes[..eq]).into_owned());
    let previous_flag = index
        .checked_sub(1)
        .and_then(|p| args[p].to_str())
        .filter(|p| p.starts_with('-') && !p.contains('='))
        .map(str::to_string);
    let what = match (inline_flag, previous_flag) {
        (Some(flag), _) | (None, Some(flag)) => format!("the value of {flag}"),
        (None, None) => format!("argument {}", index + 1),
    };
    Some(format!(
        "{what} is not UTF-8 text ({value:?}): it must be text here (only file names \
         may hold other bytes)"
    ))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    fn args(list: &[&[u8]]) -> Vec<OsString> {
        list.iter()
            .map(|a| OsString::from_vec(a.to_vec()))
            .collect()
    }

    #[test]
    fn a_value_that_is_not_text_is_named_by_its_flag_with_its_bytes_escaped() {
        let said = non_text_argument(args(&[b"sql", b"-c", b"SELECT '\xff'"])).unwrap();
        assert!(
            said.starts_with("the value of -c is not UTF-8 text"),
            "{said}"
        );
        assert!(said.contains("\\xFF"), "{said}");
        let said = non_text_argument(args(&[b"sql", b"--table=t=\xfe.parquet"])).unwrap();
        assert!(said.starts_with("the value of --table is"), "{said}");
    }

    #[test]
    fn a_positional_argument_is_named_by_its_position() {
        let said =
            non_text_argument(args(&[b"table", b"--data-dir", b"d", b"create", b"\xff"])).unwrap();
        assert!(said.starts_with("argument 5 is not UTF-8 text"), "{said}");
    }

    #[test]
    fn text_arguments_are_not_reported() {
        assert_eq!(
            non_text_argument(args(&[b"sql", b"-c", b"SELECT 'h\xc3\xa9'"])),
            None
        );
    }
}
