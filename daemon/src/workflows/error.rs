//! Why a workflow request cannot be expanded, by kind of failure, and how it is answered.

use super::checks::MAX_STEPS;
use super::graph::GraphError;

/// Why a request could not become a checked draft. Each message names what is wrong; none
/// of these leaves anything behind (nothing is created before a draft is complete).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// A name of the request or of the settings resolves to nothing the request may use:
    /// an infra, a settings file, a server, a provider, a taskserv, a cluster definition,
    /// a script.
    #[error("{0}")]
    Unknown(String),
    /// A value (or a combination of values) of the request is not acceptable: not a plain
    /// name, not a duration, a field an operation needs is missing, providers are mixed.
    #[error("{0}")]
    Invalid(String),
    /// The infra's settings file cannot be read, or does not hold valid settings.
    #[error("{0}")]
    Settings(String),
    /// The steps do not form a DAG.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The dependencies of the taskservs a request brings form a cycle.
    #[error("the taskservs' dependencies form a cycle: {}", .path.join(" → "))]
    TaskservCycle {
        /// The taskservs on it (each needs the one after it), the first one again at the
        /// end.
        path: Vec<String>,
    },
    /// The workflow would have more steps than [`MAX_STEPS`] (counted before any is built).
    #[error("{what} would have {}", steps_over_limit(*.count))]
    TooManySteps {
        /// The workflow, in words.
        what: String,
        /// How many steps it would have (none: more than `usize` counts).
        count: Option<usize>,
    },
    /// A failure of one part of the request: a server, an operation.
    #[error("{part}: {error}")]
    In {
        /// The part, such as ``operation `a` ``.
        part: String,
        /// What is wrong with it.
        error: Box<ExpandError>,
    },
}

impl ExpandError {
    /// `self` as the failure of `part` of the request.
    pub fn within(self, part: String) -> ExpandError {
        ExpandError::In {
            part,
            error: Box::new(self),
        }
    }
}

fn steps_over_limit(count: Option<usize>) -> String {
    match count {
        Some(n) => format!("{n} steps; the limit is {MAX_STEPS}"),
        None => format!("more than {MAX_STEPS} steps"),
    }
}

/// For callers that report failures as text (test environments resolving their
/// taskservs).
impl From<ExpandError> for String {
    fn from(error: ExpandError) -> String {
        error.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_is_wrong_and_where() {
        let too_many = ExpandError::TooManySteps {
            what: "servers create lab".into(),
            count: Some(100_001),
        };
        assert_eq!(
            too_many.to_string(),
            "servers create lab would have 100001 steps; the limit is 100000"
        );
        let uncounted = ExpandError::TooManySteps {
            what: "x".into(),
            count: None,
        };
        assert_eq!(uncounted.to_string(), "x would have more than 100000 steps");
        let cycle = ExpandError::TaskservCycle {
            path: vec!["a".into(), "b".into(), "a".into()],
        };
        let nested = cycle.within("server `web-01`".into());
        assert_eq!(
            nested.to_string(),
            "server `web-01`: the taskservs' dependencies form a cycle: a → b → a"
        );
    }
}
