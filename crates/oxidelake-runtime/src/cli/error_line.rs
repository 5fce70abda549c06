//! Errors as the one line `oxide` prints.

/// The first line of `text`, except that a list the first line introduces (DataFusion's
/// "… with top memory consumers (across reservations) as:" followed by one consumer per
/// line) is kept, joined with "; ": which operator held the memory is the part of an
/// out-of-memory error a user acts on.
///
/// DataFusion's context errors ("<context>\ncaused by\n<error>", e.g. an optimizer
/// rule's refusal under the rule's name) keep their cause: "<context>: <error>".
pub fn one_line(text: &str) -> String {
    let all: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if all.len() >= 3 && all[1] == "caused by" {
        return format!("{}: {}", all[0], one_line(&all[2..].join("\n")));
    }
    let mut lines = all.into_iter();
    let Some(first) = lines.next() else {
        return "unknown error".to_string();
    };
    if !first.ends_with(':') {
        return first.to_string();
    }
    let rest: Vec<&str> = lines.collect();
    if rest.is_empty() {
        first.to_string()
    } else {
        format!("{first} {}", rest.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_of_memory_error_keeps_the_consumers_it_lists() {
        let text = "Resources exhausted: Additional allocation failed for GpuHashJoinExec[1] with top memory consumers (across reservations) as:\n  GpuHashJoinExec[1]#7(can spill: false) consumed 60.0 MB, peak 60.0 MB,\n  ExternalSorter[0]#3(can spill: true) consumed 1.0 MB, peak 2.0 MB.\nError: Failed to allocate additional 8.0 MB";
        let line = one_line(text);
        assert!(!line.contains('\n'));
        assert!(line.starts_with(
            "Resources exhausted: Additional allocation failed for GpuHashJoinExec[1]"
        ));
        assert!(
            line.contains("as: GpuHashJoinExec[1]#7(can spill: false) consumed 60.0 MB"),
            "{line}"
        );
        assert!(
            line.ends_with("Failed to allocate additional 8.0 MB"),
            "{line}"
        );
    }

    #[test]
    fn a_context_error_keeps_its_cause_on_the_line() {
        let text = "Job 1 failed: DataFusion error: oxidelake_file_access\ncaused by\nError during planning: reading file:///x is outside the cluster's allowed roots\nbacktrace …";
        assert_eq!(
            one_line(text),
            "Job 1 failed: DataFusion error: oxidelake_file_access: Error during planning: reading file:///x is outside the cluster's allowed roots"
        );
    }

    #[test]
    fn other_errors_keep_their_first_line() {
        assert_eq!(
            one_line("table 't' not found\nbacktrace …"),
            "table 't' not found"
        );
        assert_eq!(one_line(""), "unknown error");
    }
}
