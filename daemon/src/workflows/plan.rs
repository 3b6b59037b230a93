//! The plan of a checked draft: the waves a run would go through under its limits, and
//! the waves of a rollback of every step, with big lists cut to what fits in an answer.

use orch_protocol::{PlannedStep, WorkflowPlan};

use super::{Draft, graph};

/// The plan of a checked draft: its waves under the smaller of its and the daemon's
/// limits, and the waves of a rollback of every step; big lists are cut to their first
/// items (the counts stay complete).
pub fn plan(draft: &Draft, daemon_limit: usize) -> WorkflowPlan {
    let limit = effective_limit(draft, daemon_limit);
    let deps = graph::dependency_indexes(&draft.steps).expect("a prepared draft is valid");
    let ids = |wave: Vec<usize>| -> Vec<String> {
        wave.into_iter()
            .map(|i| draft.steps[i].id.clone())
            .collect()
    };
    let waves: Vec<Vec<String>> = graph::waves_of(&deps, limit).into_iter().map(ids).collect();
    let rollback_waves: Vec<Vec<String>> = rollback_waves(draft, &deps, limit)
        .into_iter()
        .map(ids)
        .collect();
    let steps = draft.steps.iter().map(|s| PlannedStep {
        id: s.id.clone(),
        description: s.description.clone(),
        dependencies: s.dependencies.clone(),
        soft_dependencies: s.soft_dependencies.clone(),
        has_rollback: s.rollback.is_some(),
    });
    let (steps, steps_cut) = first_within(steps, WorkflowPlan::MAX_LISTED_BYTES);
    let (wave_count, rollback_wave_count) = (waves.len() as u64, rollback_waves.len() as u64);
    let (waves, waves_cut) = first_ids_within(waves);
    let (rollback_waves, rollback_cut) = first_ids_within(rollback_waves);
    WorkflowPlan {
        name: draft.name.clone(),
        kind: draft.kind,
        parallel_limit: limit as u32,
        step_count: draft.steps.len() as u64,
        steps,
        wave_count,
        waves,
        rollback_wave_count,
        rollback_waves,
        truncated: steps_cut || waves_cut || rollback_cut,
    }
}

/// The wave (from 1) each step of a checked draft runs in under its and the daemon's
/// limits, in the draft's order (the waves a run goes through: the largest of them).
pub fn step_waves(draft: &Draft, daemon_limit: usize) -> Vec<u32> {
    let limit = effective_limit(draft, daemon_limit);
    let Ok(deps) = graph::dependency_indexes(&draft.steps) else {
        return Vec::new();
    };
    let mut waves = vec![0; draft.steps.len()];
    for (n, wave) in graph::waves_of(&deps, limit).into_iter().enumerate() {
        for step in wave {
            waves[step] = u32::try_from(n + 1).unwrap_or(u32::MAX);
        }
    }
    waves
}

/// The smaller of the draft's and the daemon's parallel limits.
fn effective_limit(draft: &Draft, daemon_limit: usize) -> usize {
    draft
        .parallel_limit
        .map_or(daemon_limit, |l| (l as usize).min(daemon_limit))
        .max(1)
}

/// The waves (as step indexes) of a rollback of every compensated step.
fn rollback_waves(draft: &Draft, deps: &[Vec<usize>], limit: usize) -> Vec<Vec<usize>> {
    let compensated: Vec<bool> = draft.steps.iter().map(|s| s.rollback.is_some()).collect();
    let rollback_deps = graph::rollback_dependencies(deps, &compensated);
    // Only compensated steps take part in the rollback's waves.
    let members: Vec<usize> = (0..draft.steps.len()).filter(|&i| compensated[i]).collect();
    let position: std::collections::HashMap<usize, usize> =
        members.iter().enumerate().map(|(p, &i)| (i, p)).collect();
    let sub_deps: Vec<Vec<usize>> = members
        .iter()
        .map(|&i| rollback_deps[i].iter().map(|j| position[j]).collect())
        .collect();
    graph::waves_of(&sub_deps, limit)
        .into_iter()
        .map(|wave| wave.into_iter().map(|p| members[p]).collect())
        .collect()
}

/// The first items whose JSON adds up to at most about `budget` bytes, and whether any
/// were left out.
fn first_within<T: serde::Serialize>(
    items: impl ExactSizeIterator<Item = T>,
    budget: usize,
) -> (Vec<T>, bool) {
    let total = items.len();
    let mut used = 0;
    let mut kept = Vec::new();
    for item in items {
        used += serde_json::to_vec(&item).map_or(0, |json| json.len() + 1);
        if used > budget {
            break;
        }
        kept.push(item);
    }
    let cut = kept.len() < total;
    (kept, cut)
}

/// The first waves whose ids add up to at most about [`WorkflowPlan::MAX_LISTED_BYTES`]
/// (the last one kept may be cut short), and whether any id was left out.
fn first_ids_within(waves: Vec<Vec<String>>) -> (Vec<Vec<String>>, bool) {
    let mut budget = WorkflowPlan::MAX_LISTED_BYTES;
    let mut kept = Vec::new();
    for wave in waves {
        // A wave's brackets and separator.
        budget = budget.saturating_sub(3);
        let mut listed = Vec::with_capacity(wave.len());
        for id in wave {
            let cost = id.len() + 3;
            if cost > budget {
                if !listed.is_empty() {
                    kept.push(listed);
                }
                return (kept, true);
            }
            budget -= cost;
            listed.push(id);
        }
        kept.push(listed);
    }
    (kept, false)
}
