//! The audit log end to end (real daemon, real nu, the real redb file):
//! - `recording`: every change request is recorded (secrets redacted), and tampering with
//!   the live log is detected;
//! - `compaction`: entries archived to sealed segments keep the chain verifiable;
//!   tampering with what remains, with the list of segments or with a segment file is
//!   detected (online, and offline for an exported segment); the daemon's own retention;
//! - `crash`: a kill -9 in the middle of a compaction loses and duplicates nothing.
//!
//! `store_file` reads and changes the audit tables of a stopped daemon's database.

mod compaction;
mod crash;
mod recording;
mod retention;
mod store_file;
