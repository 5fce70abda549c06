#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
//! The demo dashboard driven through a real pseudo-terminal with termlens: what a user
//! sees at 80×24, after a key press, after a resize to 120×40, and how it exits.
//!
//! Every wait is bounded by [`WAIT`], so a dashboard that hangs fails with the screen it
//! was showing instead of stalling CI. Nothing here sleeps: each step waits for the
//! picture that proves the previous input was handled, and whole-screen snapshots are
//! taken with `snapshot_after`, which also waits for the picture to hold still.

use std::time::Duration;

use termlens::{Key, Screen, Terminal};

/// The deadline of every wait: generous for a debug build on a loaded two-core machine,
/// short enough that a hang is a readable failure.
const WAIT: Duration = Duration::from_secs(10);

/// Spawns the demo at `cols`×`rows` with a cleared environment, so nothing on the host
/// (colours, locale, `RUST_LOG`) changes what it draws.
fn spawn_demo(cols: u16, rows: u16) -> termlens::Result<Terminal> {
    Terminal::builder()
        .size(cols, rows)
        .env_clear()
        .timeout(WAIT)
        .spawn(env!("CARGO_BIN_EXE_oxidelake-tui-demo"))
}

/// Sends `q` and checks that the dashboard exits with status 0.
fn quit(t: &mut Terminal) -> termlens::Result<()> {
    t.send(Key::Char('q'))?;
    let status = t.wait_exit()?;
    assert_eq!(status.code(), Some(0), "status: {status}");
    Ok(())
}

/// The operator the Plan panel marks with `▶ `: the first word after the marker.
fn selected_operator(screen: &Screen) -> Option<String> {
    let (row, _) = screen.find("▶ ")?;
    let line = screen.row_text(row);
    let after = line.split_once("▶ ")?.1;
    after
        .split(|c: char| c.is_whitespace() || c == '│')
        .find(|word| word.starts_with(|c: char| c.is_ascii_alphanumeric()))
        .map(str::to_owned)
}

/// The text inside the bordered panel whose top border carries `title`, or `None` when
/// no such panel is on screen.
fn panel_text(screen: &Screen, title: &str) -> Option<String> {
    const TOP_LEFT: [&str; 4] = ["┌", "╭", "╔", "┏"];
    const TOP_RIGHT: [&str; 4] = ["┐", "╮", "╗", "┓"];
    const BOTTOM_LEFT: [&str; 4] = ["└", "╰", "╚", "┗"];
    let glyph = |row: u16, col: u16| screen.cell(row, col).map_or("", |cell| cell.contents());
    screen.find_all(title).into_iter().find_map(|(row, col)| {
        let left = (0..col)
            .rev()
            .find(|&c| TOP_LEFT.contains(&glyph(row, c)))?;
        let title_end = col + u16::try_from(title.chars().count()).ok()?;
        let right = (title_end..screen.cols()).find(|&c| TOP_RIGHT.contains(&glyph(row, c)))?;
        let bottom = (row + 1..screen.rows()).find(|&r| BOTTOM_LEFT.contains(&glyph(r, left)))?;
        Some(screen.rect_text(left + 1..right, row + 1..bottom))
    })
}

/// True when `screen` shows the whole dashboard: the title bar, all four panels and the
/// key help in the footer (the last row painted).
fn shows_dashboard(screen: &Screen) -> bool {
    screen.contains("OxideLake")
        && ["Plan", "Inspector", "Telemetry", "Describe"]
            .iter()
            .all(|title| panel_text(screen, title).is_some())
        && screen.row_text(screen.rows() - 1).contains("q quit")
}

#[test]
fn demo_dashboard_shows_title_four_panels_and_the_highlighted_selection_at_80x24()
-> termlens::Result<()> {
    let mut t = spawn_demo(80, 24)?;
    let screen = t.snapshot_after(|s| shows_dashboard(s) && selected_operator(s).is_some())?;

    let selected = selected_operator(&screen).expect("the Plan panel marks one operator");
    let inspector = panel_text(&screen, "Inspector").expect("an Inspector panel");
    assert!(
        inspector.contains(&selected),
        "the Inspector shows the selected operator {selected:?}:\n{screen}"
    );
    let (marker_row, marker_col) = screen.find("▶ ").expect("a selection marker");
    let marker_style = *screen
        .cell(marker_row, marker_col)
        .expect("the marker cell")
        .style();
    assert_ne!(
        marker_style,
        termlens::Style::default(),
        "the selected row is highlighted:\n{}",
        screen.with_styles()
    );
    insta::assert_snapshot!("demo_80x24_initial", screen.with_styles());

    quit(&mut t)
}

#[test]
fn down_arrow_selects_the_next_operator_and_the_inspector_follows() -> termlens::Result<()> {
    let mut t = spawn_demo(80, 24)?;
    let before = t.snapshot_after(|s| shows_dashboard(s) && selected_operator(s).is_some())?;
    let first = selected_operator(&before).expect("an initial selection");
    let (first_row, _) = before.find("▶ ").expect("a selection marker");

    t.send(Key::Down)?;
    let after = t.snapshot_after(|s| {
        selected_operator(s).is_some_and(|name| {
            name != first
                && panel_text(s, "Inspector").is_some_and(|inspector| inspector.contains(&name))
        })
    })?;
    let (second_row, _) = after.find("▶ ").expect("a selection marker");
    assert_eq!(
        second_row,
        first_row + 1,
        "Down moves the marker to the next row of the plan:\n{after}"
    );
    insta::assert_snapshot!("demo_80x24_after_down", after.with_styles());

    t.send(Key::Up)?;
    t.wait_until(|s| {
        selected_operator(s).as_deref() == Some(first.as_str())
            && panel_text(s, "Inspector").is_some_and(|inspector| inspector.contains(&first))
    })?;

    quit(&mut t)
}

#[test]
fn resizing_to_120x40_switches_to_the_roomy_layout() -> termlens::Result<()> {
    let mut t = spawn_demo(80, 24)?;
    let compact = t.snapshot_after(shows_dashboard)?;
    assert_eq!(compact.size(), (80, 24));
    assert!(
        !compact.contains("p99"),
        "the compact Describe table has no p99 column:\n{compact}"
    );

    t.resize(120, 40)?;
    // The grid takes the new size at once but keeps the old 80×24 frame until the
    // dashboard handles SIGWINCH, so wait for what only a repaint at 120×40 can show:
    // the roomy layout's p99 column and the footer on the new bottom row.
    let roomy = t.snapshot_after(|s| s.contains("p99") && shows_dashboard(s))?;
    assert_eq!(roomy.size(), (120, 40));
    let inspector = panel_text(&roomy, "Inspector").expect("an Inspector panel");
    assert!(
        inspector.contains("[l_returnflag ASC]"),
        "the roomy Inspector adds the selected operator's details:\n{roomy}"
    );
    insta::assert_snapshot!("demo_120x40_after_resize", roomy.with_styles());

    quit(&mut t)
}

#[test]
fn tab_moves_the_focus_through_the_four_panels_in_order() -> termlens::Result<()> {
    let mut t = spawn_demo(80, 24)?;
    t.wait_until(|s| shows_dashboard(s) && s.contains(" Plan ● "))?;
    for focused in ["Inspector", "Telemetry", "Describe", "Plan"] {
        t.send(Key::Tab)?;
        let marked = format!(" {focused} ● ");
        t.wait_until(|s| s.contains(&marked) && s.find_all("●").len() == 1)?;
    }

    quit(&mut t)
}

#[test]
fn q_quits_with_exit_code_zero_and_leaves_the_alternate_screen() -> termlens::Result<()> {
    let mut t = spawn_demo(80, 24)?;
    t.wait_until(|s| shows_dashboard(s) && s.alternate_screen())?;

    quit(&mut t)?;
    let last = t.screen();
    assert!(
        !last.alternate_screen(),
        "the dashboard leaves the alternate screen on exit:\n{last}"
    );
    Ok(())
}
