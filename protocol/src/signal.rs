//! What a running task's processes may be sent besides pauses: signals (`orch kill
//! --signal`) and input (`orch send`), as [`Nudge`]s.
//!
//! Only signals a task may want to handle itself: stopping and continuing belong to
//! `orch pause` / `orch resume` (the daemon records those), and the signals the kernel
//! raises on faults (SEGV, BUS, ...) are not for sending.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Something for a running attempt, delivered in the order asked for: a signal for its
/// process group, or input for its standard input. (How the daemon passes it to the
/// supervisor and, in a cluster, to the node that runs the attempt.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Nudge {
    /// A signal for the process group.
    Signal(TaskSignal),
    /// Bytes for the standard input (a task submitted with `stdin`), then its end when
    /// `eof`.
    Input {
        /// What to write.
        data: String,
        /// Close the standard input after it.
        eof: bool,
    },
}

/// A signal for a task's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "UPPERCASE")]
pub enum TaskSignal {
    /// Hang-up: by custom, reload the configuration.
    Hup,
    /// Interrupt, as Ctrl-C.
    Int,
    /// Quit (with a core dump, by default).
    Quit,
    /// Kill: cannot be caught.
    Kill,
    /// User-defined 1.
    Usr1,
    /// User-defined 2.
    Usr2,
    /// Alarm clock.
    Alrm,
    /// Terminate (what a cancel sends first).
    Term,
    /// The terminal's size changed.
    Winch,
}

impl TaskSignal {
    /// Every signal, in the order of their numbers on Linux.
    pub const ALL: [TaskSignal; 9] = [
        TaskSignal::Hup,
        TaskSignal::Int,
        TaskSignal::Quit,
        TaskSignal::Kill,
        TaskSignal::Usr1,
        TaskSignal::Usr2,
        TaskSignal::Alrm,
        TaskSignal::Term,
        TaskSignal::Winch,
    ];

    /// Its name without the `SIG` prefix (`HUP`).
    pub fn name(self) -> &'static str {
        match self {
            TaskSignal::Hup => "HUP",
            TaskSignal::Int => "INT",
            TaskSignal::Quit => "QUIT",
            TaskSignal::Kill => "KILL",
            TaskSignal::Usr1 => "USR1",
            TaskSignal::Usr2 => "USR2",
            TaskSignal::Alrm => "ALRM",
            TaskSignal::Term => "TERM",
            TaskSignal::Winch => "WINCH",
        }
    }

    /// What it is for, in a few words (the completion's description).
    pub fn purpose(self) -> &'static str {
        match self {
            TaskSignal::Hup => "hang-up; by custom, reload",
            TaskSignal::Int => "interrupt, as Ctrl-C",
            TaskSignal::Quit => "quit",
            TaskSignal::Kill => "kill, cannot be caught",
            TaskSignal::Usr1 => "user-defined 1",
            TaskSignal::Usr2 => "user-defined 2",
            TaskSignal::Alrm => "alarm clock",
            TaskSignal::Term => "terminate",
            TaskSignal::Winch => "terminal size changed",
        }
    }
}

impl fmt::Display for TaskSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a text names no signal that may be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    /// Stopping and continuing a task are pauses, which the daemon records.
    #[error(
        "{0} stops or continues a task: use `orch pause` / `orch resume`, which the daemon records"
    )]
    Pause(String),
    /// Not a signal this accepts.
    #[error("`{0}` is not a signal for a task (use one of {names})", names = names())]
    Unknown(String),
}

/// The accepted names, for messages: `HUP, INT, ...`.
fn names() -> String {
    let names: Vec<&str> = TaskSignal::ALL.iter().map(|s| s.name()).collect();
    names.join(", ")
}

impl FromStr for TaskSignal {
    type Err = SignalError;

    /// A name, in any case, with or without `SIG` (`usr1`, `SIGUSR1`).
    fn from_str(text: &str) -> Result<TaskSignal, SignalError> {
        let upper = text.trim().to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        if let Some(signal) = TaskSignal::ALL.into_iter().find(|s| s.name() == bare) {
            return Ok(signal);
        }
        match bare {
            "STOP" | "TSTP" | "CONT" => Err(SignalError::Pause(format!("SIG{bare}"))),
            _ => Err(SignalError::Unknown(text.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_in_any_case_with_or_without_sig() {
        for text in ["usr1", "USR1", "SIGUSR1", "sigusr1", " Usr1 "] {
            assert_eq!(text.parse(), Ok(TaskSignal::Usr1), "{text}");
        }
        for signal in TaskSignal::ALL {
            assert_eq!(signal.name().parse(), Ok(signal));
            let json = serde_json::to_string(&signal).unwrap();
            assert_eq!(json, format!("\"{}\"", signal.name()));
        }
    }

    #[test]
    fn pauses_and_unknown_names_are_refused_with_the_reason() {
        let stop = "STOP".parse::<TaskSignal>().unwrap_err();
        assert!(stop.to_string().contains("orch pause"), "{stop}");
        for text in ["SEGV", "9", "", "SIG", "HUP;rm", "../x"] {
            let error = text.parse::<TaskSignal>().unwrap_err();
            assert_eq!(error, SignalError::Unknown(text.to_string()));
            assert!(error.to_string().contains("HUP, INT"), "{error}");
        }
        assert!(serde_json::from_str::<TaskSignal>("\"STOP\"").is_err());
    }
}
