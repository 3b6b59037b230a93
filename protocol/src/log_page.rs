//! A piece of a task's log, read by byte offset (`GET /tasks/{id}/logs`): the page a
//! reader asks for, and where the next one starts, so a tail can follow a growing log.

use serde::{Deserialize, Serialize};

/// Bytes of a task's log from `offset`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LogPage {
    /// Where the text starts (a byte offset in the log).
    pub offset: u64,
    /// Where the next page starts: ask from here for what follows.
    pub next_offset: u64,
    /// The log's size when it was read.
    pub size: u64,
    /// The text (invalid UTF-8 replaced; a page starting inside a character shows it
    /// replaced too).
    pub text: String,
    /// True once the task is final: the log will not grow.
    pub complete: bool,
}
