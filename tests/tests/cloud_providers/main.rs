//! The cloud providers (`nushell-modules/providers/upcloud` and `.../aws`) run by the real
//! `nu`: the clouds themselves cannot be reached from the test machines.
//!
//! - upcloud against `tests/standins/cloud_standin.py`, a local stand-in of UpCloud's API
//!   1.3 that checks every request against the API's published shapes and records it in a
//!   JSON-lines file, on which these tests assert too;
//! - aws through the real `aws` CLI against moto's EC2 emulator in server mode
//!   (`tests/standins/moto_ec2.py`, authentication on), one per test on a free port: the
//!   CLI signs, moto checks, and the tests read moto's state back with the CLI.
//!
//! `server-exec` is run with a fake `ssh` first on PATH (it records its arguments and runs
//! the command locally): that checks the command line the modules build, not SSH to a real
//! server, which is not tested here.
//!
//! Needs `python3` (standard library for the stand-in), `moto[server]` and the `aws` CLI
//! (the README's test command installs both).

mod aws;
mod common;
mod ssh;
mod upcloud;
mod workflows;
