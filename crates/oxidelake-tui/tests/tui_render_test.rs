//! The dashboard rendered headless (ratatui's TestBackend) at the two sizes it is
//! designed for, and the state transitions behind the keys.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use oxidelake_tui::{
    AppState, Event, Key, Panel, Transition, Update, demo_state, on_event, render,
};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn screen(state: &AppState, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| render(state, frame)).unwrap();
    terminal.backend().to_string()
}

#[test]
fn the_demo_snapshot_is_readable_at_80_by_24() {
    let text = screen(&demo_state(), 80, 24);
    for expected in [
        "OxideLake",
        "Plan",
        "Inspector",
        "Telemetry",
        "Describe",
        "[CUDA]",
        "[CPU]",
    ] {
        assert!(text.contains(expected), "{expected} missing:\n{text}");
    }
    insta::assert_snapshot!(text);
}

#[test]
fn the_demo_snapshot_uses_the_space_at_120_by_40() {
    let text = screen(&demo_state(), 120, 40);
    // The roomy layout adds the operator details and the full percentile table.
    assert!(text.contains("p25") && text.contains("p99"), "{text}");
    assert!(text.contains("[l_returnflag ASC]"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn down_and_up_move_the_selection_within_the_plan() {
    let mut state = demo_state();
    assert_eq!(state.selected, 0);
    assert_eq!(
        on_event(&mut state, Event::Key(Key::Down)),
        Transition::Redraw
    );
    assert_eq!(state.selected, 1);
    assert_eq!(state.selected_node().unwrap().name, "GpuAggregateExec");
    let after_down = screen(&state, 80, 24);
    assert!(after_down.contains("▶   GpuAggregateExec"), "{after_down}");
    insta::assert_snapshot!(after_down);
    assert_eq!(
        on_event(&mut state, Event::Key(Key::Up)),
        Transition::Redraw
    );
    assert_eq!(state.selected, 0);
    // The selection stops at both ends.
    assert_eq!(
        on_event(&mut state, Event::Key(Key::Up)),
        Transition::Unchanged
    );
    for _ in 0..20 {
        on_event(&mut state, Event::Key(Key::Down));
    }
    assert_eq!(state.selected, state.plan.len() - 1);
}

#[test]
fn tab_cycles_the_panels_and_arrows_follow_the_focus() {
    let mut state = demo_state();
    let mut seen = vec![state.focus];
    for _ in 0..4 {
        on_event(&mut state, Event::Key(Key::Tab));
        seen.push(state.focus);
    }
    assert_eq!(
        seen,
        vec![
            Panel::Plan,
            Panel::Inspector,
            Panel::Telemetry,
            Panel::Describe,
            Panel::Plan
        ]
    );
    on_event(&mut state, Event::Key(Key::BackTab));
    assert_eq!(state.focus, Panel::Describe);
    // In the Describe panel ↓ scrolls the columns and leaves the plan selection alone.
    on_event(&mut state, Event::Key(Key::Down));
    assert_eq!((state.selected, state.describe_offset), (0, 1));
}

#[test]
fn q_and_esc_quit() {
    let mut state = demo_state();
    assert_eq!(
        on_event(&mut state, Event::Key(Key::Char('q'))),
        Transition::Quit
    );
    assert!(state.quit);
    let mut state = demo_state();
    assert_eq!(on_event(&mut state, Event::Key(Key::Esc)), Transition::Quit);
    let mut state = demo_state();
    assert_eq!(
        on_event(&mut state, Event::Key(Key::Char('x'))),
        Transition::Unchanged
    );
    assert!(!state.quit);
}

#[test]
fn an_update_with_a_shorter_plan_keeps_the_selection_in_range() {
    let mut state = demo_state();
    for _ in 0..5 {
        on_event(&mut state, Event::Key(Key::Down));
    }
    let plan = state.plan[..2].to_vec();
    let update = Update {
        plan: Some(plan),
        ..Update::default()
    };
    assert_eq!(
        on_event(&mut state, Event::Update(Box::new(update))),
        Transition::Redraw
    );
    assert_eq!(state.selected, 1);
    // An empty dashboard renders without panicking at the smallest sizes too.
    for (w, h) in [(80, 24), (20, 6), (1, 1)] {
        screen(&AppState::new("SELECT 1"), w, h);
    }
}
