//! A display's lines on the terminal's standard error: a bar per running task, what
//! tasks report made one plain line, every line cut to the terminal's width, and the
//! redrawing and clearing of what was drawn.

use std::io::Write as _;

use orch_protocol::Task;

use super::BARS;
use super::sources::Frame;

/// The width of a bar, in cells.
const BAR_WIDTH: usize = 20;

/// The display's lines: the header, then a bar per running task (the first [`BARS`]).
pub(super) fn lines(frame: &Frame) -> Vec<String> {
    let mut lines = vec![frame.header.clone()];
    for task in frame.running.iter().take(BARS) {
        lines.push(bar(task));
    }
    if frame.running.len() > BARS {
        lines.push("  … and more running".to_string());
    }
    lines
}

/// One running task's line: its id, a bar of its progress (empty until it reports one),
/// the percentage, its message, and what it runs.
fn bar(task: &Task) -> String {
    let percent = task
        .progress
        .as_ref()
        .and_then(|p| p.percent)
        .map(|p| p.clamp(0.0, 100.0));
    let filled = percent.map_or(0, |p| (p * BAR_WIDTH as f64 / 100.0) as usize);
    let shown = match percent {
        Some(p) => format!("{p:>3.0}%"),
        None => "   ·".to_string(),
    };
    let message = task
        .progress
        .as_ref()
        .and_then(|p| p.message.as_deref())
        .map(one_line)
        .unwrap_or_default();
    let text = format!(
        "  #{:<5} {}{} {shown} {message}  {}",
        task.id,
        "█".repeat(filled),
        "░".repeat(BAR_WIDTH - filled),
        one_line(&task.spec.describe())
    );
    text
}

/// `text` on one line, safe to print: every control character (a line break, an escape
/// sequence's ESC) becomes a space, so what a task reports can neither break the
/// display's count of lines nor drive the terminal.
pub(super) fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `text` cut to `width` characters (one cell each: the display's own text and what
/// [`one_line`] made of the tasks'), so that no line wraps.
fn clipped(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    kept + "…"
}

/// The terminal's width in columns (standard error's), less one so that the last column
/// is never written; 120 when it cannot be told.
fn width() -> usize {
    // SAFETY: TIOCGWINSZ fills the winsize it is given and reads nothing else.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointer is to a live winsize.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    match size.ws_col {
        cols if ok && cols > 1 => usize::from(cols) - 1,
        _ => 120,
    }
}

/// Replaces the `drawn` lines of the last drawing with `lines` (none: clears them);
/// how many lines are drawn now.
pub(super) fn redraw(drawn: usize, lines: &[String]) -> usize {
    let mut out = String::new();
    if drawn > 0 {
        // To the start of the first drawn line, then clear to the end of the screen.
        out.push_str(&format!("\r\x1b[{drawn}A\x1b[J"));
    }
    let width = width();
    for line in lines {
        out.push_str(&clipped(line, width));
        out.push('\n');
    }
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(out.as_bytes());
    let _ = stderr.flush();
    lines.len()
}
