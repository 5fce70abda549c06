//! `render`: a pure function of the state. Two layouts: compact below 120×30 (every
//! panel still readable at 80×24) and roomy from there, which adds the operator details,
//! the full percentile table and full-height gauges.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Gauge, LineGauge, Paragraph, Row, Table, Wrap};

use crate::format::{bytes, count, fit, rate};
use crate::model::{QueryStatus, placement_tag};
use crate::state::{AppState, Panel};

/// Width and height from which the roomy layout is used.
pub const ROOMY: (u16, u16) = (120, 30);

fn block(title: &str, panel: Panel, state: &AppState) -> Block<'static> {
    let focused = state.focus == panel;
    let style = if focused {
        Style::default()
            .fg(Color::Cyan)
            .add_modifier(Modifier::BOLD)
    } else {
        Style::default()
    };
    let title = if focused {
        format!(" {title} ● ")
    } else {
        format!(" {title} ")
    };
    Block::default()
        .borders(Borders::ALL)
        .border_style(style)
        .title(title)
}

fn status_text(status: &QueryStatus) -> String {
    match status {
        QueryStatus::Idle => "idle".into(),
        QueryStatus::Running { elapsed_ms } => format!("running {elapsed_ms} ms"),
        QueryStatus::Finished { elapsed_ms, rows } => {
            format!("finished in {elapsed_ms} ms, {} rows", count(*rows))
        }
        QueryStatus::Failed(message) => format!("failed: {message}"),
    }
}

/// Draws the whole dashboard into `frame`.
pub fn render(state: &AppState, frame: &mut Frame) {
    let area = frame.area();
    let roomy = area.width >= ROOMY.0 && area.height >= ROOMY.1;
    let [title, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(4),
        Constraint::Length(1),
    ])
    .areas(area);
    render_title(state, frame, title);
    let (top, bottom) = if roomy {
        let [top, bottom] =
            Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(body);
        (top, bottom)
    } else {
        let [top, bottom] =
            Layout::vertical([Constraint::Min(8), Constraint::Length(8)]).areas(body);
        (top, bottom)
    };
    let [plan, inspector] =
        Layout::horizontal([Constraint::Percentage(58), Constraint::Percentage(42)]).areas(top);
    let split = if roomy { [40, 60] } else { [50, 50] };
    let [telemetry, describe] = Layout::horizontal([
        Constraint::Percentage(split[0]),
        Constraint::Percentage(split[1]),
    ])
    .areas(bottom);
    render_plan(state, frame, plan, roomy);
    render_inspector(state, frame, inspector, roomy);
    render_telemetry(state, frame, telemetry, roomy);
    render_describe(state, frame, describe, roomy);
    frame.render_widget(
        Paragraph::new(" ↑/↓ select   Tab panel   q quit")
            .style(Style::default().fg(Color::DarkGray)),
        footer,
    );
}

fn render_title(state: &AppState, frame: &mut Frame, area: Rect) {
    let status = status_text(&state.status);
    let head = format!(" OxideLake │ {status} │ ");
    let room = (area.width as usize).saturating_sub(head.chars().count());
    let line = Line::from(vec![
        Span::styled(head, Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(fit(&state.query.replace('\n', " "), room)),
    ]);
    frame.render_widget(
        Paragraph::new(line).style(Style::default().bg(Color::Blue).fg(Color::White)),
        area,
    );
}

fn render_plan(state: &AppState, frame: &mut Frame, area: Rect, roomy: bool) {
    let width = area.width.saturating_sub(2) as usize;
    let visible = area.height.saturating_sub(2) as usize;
    // Keep the selection in view.
    let first = state.selected.saturating_sub(visible.saturating_sub(1));
    let lines: Vec<Line> = state
        .plan
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(i, node)| {
            let selected = i == state.selected;
            let marker = if selected { "▶ " } else { "  " };
            let tag = placement_tag(node);
            let rows = if roomy {
                format!(
                    " {} rows  {:.3} ms/batch",
                    count(node.stats.rows_out),
                    node.stats.batch_latency_ms()
                )
            } else {
                format!(" {} rows", count(node.stats.rows_out))
            };
            let indent = "  ".repeat(node.depth);
            let name_room = width.saturating_sub(
                marker.len() + indent.len() + tag.chars().count() + 1 + rows.chars().count(),
            );
            let tag_style = match node.backend {
                oxidelake_core::BackendKind::CpuSimd => Style::default().fg(Color::Yellow),
                _ => Style::default()
                    .fg(Color::Green)
                    .add_modifier(Modifier::BOLD),
            };
            let base = if selected {
                Style::default().add_modifier(Modifier::REVERSED)
            } else {
                Style::default()
            };
            Line::from(vec![
                Span::styled(format!("{marker}{indent}"), base),
                Span::styled(fit(&node.name, name_room), base),
                Span::raw(" "),
                Span::styled(tag, tag_style),
                Span::styled(rows, Style::default().fg(Color::DarkGray)),
            ])
        })
        .collect();
    let body = if lines.is_empty() {
        Paragraph::new("no plan yet")
    } else {
        Paragraph::new(lines)
    };
    frame.render_widget(body.block(block("Plan", Panel::Plan, state)), area);
}

fn render_inspector(state: &AppState, frame: &mut Frame, area: Rect, roomy: bool) {
    let lines: Vec<Line> = match state.selected_node() {
        None => vec![Line::from("select an operator")],
        Some(node) => {
            let s = &node.stats;
            let mut lines = vec![
                Line::from(Span::styled(
                    format!("{} {}", node.name, placement_tag(node)),
                    Style::default().add_modifier(Modifier::BOLD),
                )),
                Line::from(format!(
                    "rows in   {}",
                    s.rows_in.map_or_else(|| "-".to_string(), count)
                )),
                Line::from(format!("rows out  {}", count(s.rows_out))),
                Line::from(format!(
                    "batch     {:.3} ms × {}",
                    s.batch_latency_ms(),
                    count(s.batches)
                )),
                Line::from(format!("memory    {}", bytes(s.allocated_bytes))),
                Line::from(format!("moved     {}", bytes(s.bytes_moved))),
            ];
            if s.cpu_fallback_batches > 0 {
                lines.push(Line::from(format!(
                    "on CPU    {} batches",
                    count(s.cpu_fallback_batches)
                )));
            }
            if roomy && !node.detail.is_empty() {
                lines.push(Line::from(""));
                lines.push(Line::from(Span::styled(
                    node.detail.clone(),
                    Style::default().fg(Color::DarkGray),
                )));
            }
            lines
        }
    };
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(block(
            "Inspector",
            Panel::Inspector,
            state,
        )),
        area,
    );
}

fn ratio(used: u64, capacity: u64) -> f64 {
    if capacity == 0 {
        0.0
    } else {
        (used as f64 / capacity as f64).clamp(0.0, 1.0)
    }
}

fn gauge_label(used: u64, capacity: u64) -> String {
    if capacity == 0 {
        bytes(used)
    } else {
        format!("{} / {}", bytes(used), bytes(capacity))
    }
}

fn render_telemetry(state: &AppState, frame: &mut Frame, area: Rect, roomy: bool) {
    let outer = block("Telemetry", Panel::Telemetry, state);
    let inner = outer.inner(area);
    frame.render_widget(outer, area);
    let Some(t) = &state.telemetry else {
        frame.render_widget(Paragraph::new("no telemetry yet"), inner);
        return;
    };
    let caps = state.capacities;
    // The host gauge also shows its peak: a finished query has released its memory.
    let host_peak = format!(" peak {}", bytes(t.memory.host_peak_bytes));
    let gauges = [
        ("VRAM  ", t.memory.device_bytes, caps.vram_bytes, ""),
        (
            "Host  ",
            t.memory.host_bytes,
            caps.host_bytes,
            host_peak.as_str(),
        ),
        ("Pinned", t.memory.pinned_bytes, caps.pinned_bytes, ""),
        ("Spill ", t.memory.disk_bytes, caps.disk_bytes, ""),
    ];
    let transfer_lines = [
        format!(
            "H2D {} D2H {} {}",
            bytes(t.transfers.h2d_bytes),
            bytes(t.transfers.d2h_bytes),
            rate(
                t.transfers.h2d_bytes + t.transfers.d2h_bytes,
                t.transfers.transfer_ns
            )
        ),
        format!(
            "spill ↓{} ↑{}  {}",
            count(t.spill.demotions),
            count(t.spill.promotions),
            rate(t.spill.written_bytes, t.spill.write_ns)
        ),
    ];
    let gauge_height = if roomy { 2 } else { 1 };
    let mut constraints: Vec<Constraint> = gauges
        .iter()
        .map(|_| Constraint::Length(gauge_height))
        .collect();
    constraints.extend(transfer_lines.iter().map(|_| Constraint::Length(1)));
    let rows = Layout::vertical(constraints).split(inner);
    for (i, (name, used, capacity, suffix)) in gauges.iter().enumerate() {
        let label = format!("{name} {}{suffix}", gauge_label(*used, *capacity));
        if roomy {
            frame.render_widget(
                Gauge::default()
                    .ratio(ratio(*used, *capacity))
                    .label(label)
                    .gauge_style(Style::default().fg(Color::Green)),
                rows[i],
            );
        } else {
            frame.render_widget(
                LineGauge::default()
                    .ratio(ratio(*used, *capacity))
                    .label(label)
                    .filled_style(Style::default().fg(Color::Green)),
                rows[i],
            );
        }
    }
    for (j, line) in transfer_lines.iter().enumerate() {
        frame.render_widget(Paragraph::new(line.as_str()), rows[gauges.len() + j]);
    }
}

fn render_describe(state: &AppState, frame: &mut Frame, area: Rect, roomy: bool) {
    let header: Vec<&str> = if roomy {
        vec!["column", "min", "max", "nulls", "p25", "p50", "p99"]
    } else {
        vec!["column", "min", "max", "nulls"]
    };
    // Concrete column widths, so every cell can be cut with an ellipsis instead of
    // silently losing its last digits.
    let inner = area.width.saturating_sub(2) as usize;
    // (weight, fixed width); the null count gets a fixed 5 columns, the rest share
    // what is left, and rounding leftovers go to the column names.
    let weights: &[usize] = if roomy {
        &[3, 2, 2, 0, 2, 2, 2]
    } else {
        &[3, 2, 2, 0]
    };
    const NULLS_WIDTH: usize = 5;
    let gaps = weights.len() - 1;
    let total: usize = weights.iter().sum();
    let room = inner.saturating_sub(gaps + NULLS_WIDTH);
    let mut widths: Vec<usize> = weights
        .iter()
        .map(|w| {
            if *w == 0 {
                NULLS_WIDTH
            } else {
                room * w / total
            }
        })
        .collect();
    let used: usize = widths.iter().sum::<usize>() + gaps;
    widths[0] += inner.saturating_sub(used);
    let rows: Vec<Row> = state
        .columns
        .iter()
        .skip(state.describe_offset)
        .map(|c| {
            let mut cells = vec![
                c.name.clone(),
                c.min.clone(),
                c.max.clone(),
                count(c.null_count),
            ];
            if roomy {
                cells.extend([c.p25.clone(), c.p50.clone(), c.p99.clone()]);
            }
            Row::new(
                cells
                    .iter()
                    .zip(&widths)
                    .map(|(cell, w)| fit(cell, *w))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let constraints: Vec<Constraint> = widths
        .iter()
        .map(|w| Constraint::Length(*w as u16))
        .collect();
    let header: Vec<String> = header
        .iter()
        .zip(&widths)
        .map(|(h, w)| fit(h, *w))
        .collect();
    let table = Table::new(rows, constraints)
        .header(Row::new(header).style(Style::default().add_modifier(Modifier::BOLD)))
        .block(block("Describe", Panel::Describe, state));
    frame.render_widget(table, area);
}
