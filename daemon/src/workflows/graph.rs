//! Dependency graphs: validation of a workflow's steps (unknown references, duplicates,
//! cycles named), the one topological order (of steps, and of the taskservs a request
//! brings), the plan's waves, and the order of compensations in a rollback.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use petgraph::algo::{tarjan_scc, toposort};
use petgraph::graph::{DiGraph, NodeIndex};

/// What the graph needs to know of a step.
pub trait Node {
    /// The step's id.
    fn id(&self) -> &str;
    /// Hard dependencies.
    fn hard(&self) -> &[String];
    /// Soft dependencies.
    fn soft(&self) -> &[String];
}

/// Why a workflow's steps do not form a DAG.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// A step has no id.
    #[error("step #{index} has an empty id")]
    EmptyId {
        /// Its position.
        index: usize,
    },
    /// Two steps share an id.
    #[error("step id `{id}` is used twice")]
    DuplicateId {
        /// The id.
        id: String,
    },
    /// A step names itself as a dependency.
    #[error("step `{id}` depends on itself")]
    SelfDependency {
        /// The step.
        id: String,
    },
    /// A step depends on an id that no step has.
    #[error("step `{step}` depends on `{dependency}`, which is not a step of this workflow")]
    UnknownDependency {
        /// The step.
        step: String,
        /// What it names.
        dependency: String,
    },
    /// The dependencies form a cycle.
    #[error(
        "the dependencies form a cycle: {} (each step depends on the one after it)",
        .path.join(" → ")
    )]
    Cycle {
        /// The steps on it, the first one again at the end.
        path: Vec<String>,
    },
}

/// Edges of the step graph as indexes: `deps[i]` are the steps `i` waits for.
pub fn dependency_indexes<N: Node>(steps: &[N]) -> Result<Vec<Vec<usize>>, GraphError> {
    let mut index = HashMap::new();
    for (i, step) in steps.iter().enumerate() {
        if step.id().trim().is_empty() {
            return Err(GraphError::EmptyId { index: i });
        }
        if index.insert(step.id(), i).is_some() {
            return Err(GraphError::DuplicateId {
                id: step.id().to_string(),
            });
        }
    }
    steps
        .iter()
        .map(|step| {
            let mut deps = Vec::new();
            for dep in step.hard().iter().chain(step.soft()) {
                if dep == step.id() {
                    return Err(GraphError::SelfDependency { id: dep.clone() });
                }
                let &d = index
                    .get(dep.as_str())
                    .ok_or_else(|| GraphError::UnknownDependency {
                        step: step.id().to_string(),
                        dependency: dep.clone(),
                    })?;
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
            Ok(deps)
        })
        .collect()
}

/// Checks the graph and returns the steps' indexes in [`order`]. A cycle is an error
/// that names it.
pub fn topological_order<N: Node>(steps: &[N]) -> Result<Vec<usize>, GraphError> {
    let deps = dependency_indexes(steps)?;
    order(&deps).map_err(|cycle| GraphError::Cycle {
        path: cycle
            .into_iter()
            .map(|i| steps[i].id().to_string())
            .collect(),
    })
}

/// The one topological order of a graph whose `deps[i]` are the nodes `i` waits for:
/// level by level, in index order within a level. On a cycle, its nodes (each waits for
/// the one after it, the first one again at the end).
pub fn order(deps: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let mut graph = DiGraph::<usize, ()>::with_capacity(deps.len(), deps.len());
    let nodes: Vec<NodeIndex> = (0..deps.len()).map(|i| graph.add_node(i)).collect();
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            graph.add_edge(nodes[d], nodes[i], ());
        }
    }
    if let Err(cycle) = toposort(&graph, None) {
        return Err(cycle_through(&graph, cycle.node_id()));
    }
    Ok(waves_of(deps, usize::MAX).into_iter().flatten().collect())
}

/// The cycle through `start` (a node known to be on one), as node indexes from `start`
/// back to `start`, each waiting for the one after it.
fn cycle_through(graph: &DiGraph<usize, ()>, start: NodeIndex) -> Vec<usize> {
    let component = tarjan_scc(graph)
        .into_iter()
        .find(|c| c.contains(&start))
        .unwrap_or_else(|| vec![start]);
    // Breadth-first from `start` inside its component, back to `start`.
    let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut closing = None;
    'search: while let Some(node) = queue.pop_front() {
        for next in graph.neighbors(node) {
            if next == start {
                closing = Some(node);
                break 'search;
            }
            if component.contains(&next) && !parent.contains_key(&next) {
                parent.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    let mut path = vec![start];
    let mut node = closing.unwrap_or(start);
    while node != start {
        path.push(node);
        node = parent[&node];
    }
    path.push(start);
    // `path` runs backwards along the edges (dependency → dependant), from start to start.
    path.iter().map(|n| graph[*n]).collect()
}

/// The waves a run would go through if every step took the same time: each wave starts
/// up to `limit` ready steps, earliest in the given order first. `deps[i]` are the steps
/// `i` waits for; the graph must be acyclic.
pub fn waves_of(deps: &[Vec<usize>], limit: usize) -> Vec<Vec<usize>> {
    let limit = limit.max(1);
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependants = vec![Vec::new(); deps.len()];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependants[d].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..deps.len())
        .filter(|&i| waiting[i] == 0)
        .map(Reverse)
        .collect();
    let mut waves = Vec::new();
    while !ready.is_empty() {
        let mut wave = Vec::new();
        while wave.len() < limit {
            let Some(Reverse(i)) = ready.pop() else { break };
            wave.push(i);
        }
        for &i in &wave {
            for &d in &dependants[i] {
                waiting[d] -= 1;
                if waiting[d] == 0 {
                    ready.push(Reverse(d));
                }
            }
        }
        waves.push(wave);
    }
    waves
}

/// For each step that has a compensation (`compensated[i]`), the compensated steps whose
/// compensation must finish before its own: the nearest compensated steps that depend on
/// it, directly or through steps without a compensation. Reverse dependency order.
pub fn rollback_dependencies(deps: &[Vec<usize>], compensated: &[bool]) -> Vec<Vec<usize>> {
    let mut dependants = vec![Vec::new(); deps.len()];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependants[d].push(i);
        }
    }
    (0..deps.len())
        .map(|i| {
            if !compensated[i] {
                return Vec::new();
            }
            let mut seen = vec![false; deps.len()];
            let mut stack = dependants[i].clone();
            let mut first = Vec::new();
            while let Some(j) = stack.pop() {
                if std::mem::replace(&mut seen[j], true) {
                    continue;
                }
                if compensated[j] {
                    first.push(j);
                } else {
                    stack.extend(&dependants[j]);
                }
            }
            first.sort_unstable();
            first
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct S(&'static str, Vec<String>, Vec<String>);
    impl Node for S {
        fn id(&self) -> &str {
            self.0
        }
        fn hard(&self) -> &[String] {
            &self.1
        }
        fn soft(&self) -> &[String] {
            &self.2
        }
    }
    fn s(id: &'static str, hard: &[&str]) -> S {
        S(id, hard.iter().map(|d| d.to_string()).collect(), Vec::new())
    }

    #[test]
    fn a_cycle_is_named_step_by_step() {
        let steps = [s("a", &["c"]), s("b", &["a"]), s("c", &["b"]), s("d", &[])];
        let error = topological_order(&steps).unwrap_err().to_string();
        assert!(
            ["a → c → b → a", "b → a → c → b", "c → b → a → c"]
                .iter()
                .any(|c| error.contains(c)),
            "{error}"
        );
    }

    #[test]
    fn unknown_and_duplicate_references_are_named() {
        let error = topological_order(&[s("a", &["zz"])]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "step `a` depends on `zz`, which is not a step of this workflow"
        );
        let error = topological_order(&[s("a", &[]), s("a", &[])]).unwrap_err();
        assert_eq!(error.to_string(), "step id `a` is used twice");
    }

    #[test]
    fn the_order_goes_level_by_level_in_index_order() {
        // 0 waits for 2; 1 and 2 wait for nothing; 3 waits for 0.
        let deps = vec![vec![2], vec![], vec![], vec![0]];
        assert_eq!(order(&deps), Ok(vec![1, 2, 0, 3]));
        let cycle = order(&[vec![1], vec![0]]).unwrap_err();
        assert!(cycle == [0, 1, 0] || cycle == [1, 0, 1], "{cycle:?}");
    }

    #[test]
    fn waves_respect_dependencies_and_the_limit() {
        // a, b, c at level 0; d after a and b; e after d.
        let deps = vec![vec![], vec![], vec![], vec![0, 1], vec![3]];
        assert_eq!(waves_of(&deps, 8), vec![vec![0, 1, 2], vec![3], vec![4]]);
        assert_eq!(waves_of(&deps, 2), vec![vec![0, 1], vec![2, 3], vec![4]]);
    }

    #[test]
    fn rollback_runs_in_reverse_through_uncompensated_steps() {
        // 0 → 1 → 2, 0 → 3; step 1 has no compensation.
        let deps = vec![vec![], vec![0], vec![1], vec![0]];
        let comp = [true, false, true, true];
        let r = rollback_dependencies(&deps, &comp);
        assert_eq!(r, vec![vec![2, 3], vec![], vec![], vec![]]);
    }
}
