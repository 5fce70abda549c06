//! `oxidelake-tui-demo`: the dashboard over a fixed synthetic snapshot (no clock, no
//! animation), for trying the keys and for PTY tests. ↑/↓ select, Tab panel, q quit.

fn main() -> Result<(), oxidelake_tui::TuiError> {
    let (_tx, updates) = std::sync::mpsc::channel();
    oxidelake_tui::run(oxidelake_tui::demo_state(), updates)?;
    Ok(())
}
