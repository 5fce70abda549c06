//! A one-line progress indicator on stderr, shown only when stderr is a terminal.

use std::io::{IsTerminal, Write};

/// Progress of one long job (rows written of a known total).
#[derive(Debug)]
pub struct Progress {
    label: String,
    total: u64,
    done: u64,
    shown_percent: Option<u64>,
    enabled: bool,
}

impl Progress {
    /// Progress towards `total` units, labelled `label`.
    pub fn new(label: impl Into<String>, total: u64) -> Self {
        Self {
            label: label.into(),
            total,
            done: 0,
            shown_percent: None,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// Adds `n` finished units and redraws when the percentage changed.
    pub fn advance(&mut self, n: u64) {
        self.done += n;
        if !self.enabled {
            return;
        }
        let percent = (self.done * 100)
            .checked_div(self.total)
            .unwrap_or(100)
            .min(100);
        if self.shown_percent == Some(percent) {
            return;
        }
        self.shown_percent = Some(percent);
        let width = 30usize;
        let filled = (percent as usize * width) / 100;
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{:<12} [{}{}] {:>3}% ({} / {})",
            self.label,
            "#".repeat(filled),
            " ".repeat(width - filled),
            percent,
            self.done,
            self.total
        );
        let _ = err.flush();
    }

    /// Ends the line.
    pub fn finish(self) {
        if self.enabled {
            eprintln!();
        }
    }
}
