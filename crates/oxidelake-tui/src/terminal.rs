//! The interactive loop on a real terminal: raw mode and the alternate screen while it
//! runs (restored on every exit path, panics included), each repaint bracketed in DEC
//! mode 2026 synchronized updates so terminals that support it never show a half-drawn
//! frame.

use std::io::{Stdout, Write, stdout};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};
use crossterm::terminal::{
    BeginSynchronizedUpdate, EndSynchronizedUpdate, EnterAlternateScreen, LeaveAlternateScreen,
    disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use crate::TuiError;
use crate::model::Update;
use crate::render::render;
use crate::state::{AppState, Event, Key, Transition, on_event};

/// How long the loop waits for a key before looking for engine updates again.
const POLL: Duration = Duration::from_millis(50);

/// Raw mode + alternate screen for as long as it lives.
struct TerminalSession;

impl TerminalSession {
    fn enter() -> Result<Self, TuiError> {
        enable_raw_mode()?;
        let session = TerminalSession;
        execute!(stdout(), EnterAlternateScreen, cursor::Hide)?;
        Ok(session)
    }
}

impl Drop for TerminalSession {
    fn drop(&mut self) {
        let _ = execute!(stdout(), cursor::Show, LeaveAlternateScreen);
        let _ = disable_raw_mode();
    }
}

/// Maps a terminal event to a dashboard event.
fn translate(event: TermEvent) -> Option<Event> {
    match event {
        TermEvent::Key(k) if k.kind != KeyEventKind::Release => {
            let key = match k.code {
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => Key::Char('q'),
                KeyCode::Up => Key::Up,
                KeyCode::Down => Key::Down,
                KeyCode::Tab => Key::Tab,
                KeyCode::BackTab => Key::BackTab,
                KeyCode::Esc => Key::Esc,
                KeyCode::Char(c) => Key::Char(c),
                _ => return None,
            };
            Some(Event::Key(key))
        }
        TermEvent::Resize(w, h) => Some(Event::Resize(w, h)),
        _ => None,
    }
}

fn draw(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    state: &AppState,
) -> Result<(), TuiError> {
    execute!(terminal.backend_mut(), BeginSynchronizedUpdate)?;
    terminal.draw(|frame| render(state, frame))?;
    execute!(terminal.backend_mut(), EndSynchronizedUpdate)?;
    terminal.backend_mut().flush()?;
    Ok(())
}

/// Runs the dashboard until the user quits, applying engine `updates` as they arrive.
/// Returns the final state.
pub fn run(mut state: AppState, updates: Receiver<Update>) -> Result<AppState, TuiError> {
    let _session = TerminalSession::enter()?;
    let mut terminal = Terminal::new(CrosstermBackend::new(stdout()))?;
    terminal.clear()?;
    draw(&mut terminal, &state)?;
    loop {
        let mut redraw = false;
        while let Ok(update) = updates.try_recv() {
            redraw |= on_event(&mut state, Event::Update(Box::new(update))) == Transition::Redraw;
        }
        if event::poll(POLL)?
            && let Some(e) = translate(event::read()?)
        {
            match on_event(&mut state, e) {
                Transition::Quit => break,
                Transition::Redraw => redraw = true,
                Transition::Unchanged => {}
            }
        }
        if redraw {
            draw(&mut terminal, &state)?;
        }
    }
    Ok(state)
}
