//! `AppState` and `on_event`, the only way it changes.

use oxidelake_core::TelemetrySnapshot;

use crate::model::{Capacities, ColumnStats, PlanNode, QueryStatus, Update};

/// The dashboard's panels, in Tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Panel {
    /// The operator tree.
    #[default]
    Plan,
    /// The selected operator's figures.
    Inspector,
    /// Memory tiers, transfers and spill.
    Telemetry,
    /// Result column statistics.
    Describe,
}

impl Panel {
    const ORDER: [Panel; 4] = [
        Panel::Plan,
        Panel::Inspector,
        Panel::Telemetry,
        Panel::Describe,
    ];

    fn index(self) -> usize {
        Self::ORDER.iter().position(|p| *p == self).unwrap_or(0)
    }

    /// The next panel in Tab order.
    pub fn next(self) -> Panel {
        Self::ORDER[(self.index() + 1) % Self::ORDER.len()]
    }

    /// The previous panel in Tab order.
    pub fn previous(self) -> Panel {
        Self::ORDER[(self.index() + Self::ORDER.len() - 1) % Self::ORDER.len()]
    }
}

/// A key the dashboard reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// ↑
    Up,
    /// ↓
    Down,
    /// Tab
    Tab,
    /// Shift+Tab
    BackTab,
    /// Esc
    Esc,
    /// A character key.
    Char(char),
}

/// Something that happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A key press.
    Key(Key),
    /// The terminal's new size.
    Resize(u16, u16),
    /// New data from the engine.
    Update(Box<Update>),
}

/// What the loop should do after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Repaint.
    Redraw,
    /// Nothing changed.
    Unchanged,
    /// Leave the dashboard.
    Quit,
}

/// Everything the dashboard displays.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AppState {
    /// The query text (shown in the title).
    pub query: String,
    /// Where the query is.
    pub status: QueryStatus,
    /// The operators, in display order (pre-order of the plan tree).
    pub plan: Vec<PlanNode>,
    /// Index of the selected operator in `plan`.
    pub selected: usize,
    /// First row shown in the Describe panel.
    pub describe_offset: usize,
    /// The focused panel.
    pub focus: Panel,
    /// The latest telemetry snapshot.
    pub telemetry: Option<TelemetrySnapshot>,
    /// What the memory gauges are drawn against.
    pub capacities: Capacities,
    /// Result column statistics.
    pub columns: Vec<ColumnStats>,
    /// Set once the user asked to quit.
    pub quit: bool,
}

impl AppState {
    /// A dashboard for `query`.
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            ..Self::default()
        }
    }

    /// The selected operator, if the plan is not empty.
    pub fn selected_node(&self) -> Option<&PlanNode> {
        self.plan.get(self.selected)
    }
}

fn step(current: usize, len: usize, down: bool) -> usize {
    if len == 0 {
        0
    } else if down {
        (current + 1).min(len - 1)
    } else {
        current.saturating_sub(1)
    }
}

/// Applies `event` to `state`: the only mutator of the dashboard's state.
pub fn on_event(state: &mut AppState, event: Event) -> Transition {
    match event {
        Event::Key(Key::Char('q')) | Event::Key(Key::Esc) => {
            state.quit = true;
            Transition::Quit
        }
        Event::Key(Key::Tab) => {
            state.focus = state.focus.next();
            Transition::Redraw
        }
        Event::Key(Key::BackTab) => {
            state.focus = state.focus.previous();
            Transition::Redraw
        }
        Event::Key(key @ (Key::Up | Key::Down)) => {
            let down = key == Key::Down;
            let before = (state.selected, state.describe_offset);
            match state.focus {
                Panel::Describe => {
                    state.describe_offset = step(state.describe_offset, state.columns.len(), down);
                }
                _ => state.selected = step(state.selected, state.plan.len(), down),
            }
            if before == (state.selected, state.describe_offset) {
                Transition::Unchanged
            } else {
                Transition::Redraw
            }
        }
        Event::Key(Key::Char(_)) => Transition::Unchanged,
        Event::Resize(..) => Transition::Redraw,
        Event::Update(update) => {
            let Update {
                plan,
                telemetry,
                columns,
                status,
            } = *update;
            if let Some(plan) = plan {
                state.selected = state.selected.min(plan.len().saturating_sub(1));
                state.plan = plan;
            }
            if let Some(t) = telemetry {
                state.telemetry = Some(t);
            }
            if let Some(c) = columns {
                state.describe_offset = state.describe_offset.min(c.len().saturating_sub(1));
                state.columns = c;
            }
            if let Some(s) = status {
                state.status = s;
            }
            Transition::Redraw
        }
    }
}
