//! The daemon's own retention (`--retain-finished`, `--retain-label`, `--retain-events`)
//! with the real daemon and a real `nu`: what it removes across a kill -9 mid-run, label
//! overrides both ways, whole workflows only once final and old enough, events trimmed
//! with watches from before refused, and bad flags named.

mod crash;
mod events;
mod labels;
mod workflows;

use std::collections::BTreeSet;
use std::path::Path;

use orch_e2e::Nu;

/// The ids of the tasks the store holds.
fn task_ids(nu: &Nu) -> BTreeSet<u64> {
    let ids = nu.json("orch tasks | get id");
    ids.as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// The ids of the task logs in `data_dir`.
fn log_ids(data_dir: &Path) -> BTreeSet<u64> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("logs")) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect()
}

/// The sum of the removals the retention recorded in the audit log.
fn audited_removals(nu: &Nu) -> u64 {
    let outcomes = nu.json("orch audit --action clean | where interface == daemon | get outcome");
    outcomes
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let text = o.as_str().unwrap();
            let n: u64 = text.split(' ').nth(1).unwrap().parse().unwrap();
            n
        })
        .sum()
}
