//! How request fields are read: lists bounded while they are read, flattened fields that
//! name themselves in their errors, and an operation's node labels (one or a list).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

/// The most entries a request's lists of servers or operations may hold: each becomes at
/// least one step, and a workflow has at most this many steps.
pub const MAX_LIST_LEN: usize = 100_000;

/// A list of at most [`MAX_LIST_LEN`] entries, refused while it is read, so a longer one is
/// never held in memory.
pub(crate) fn bounded_list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Bounded<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Bounded<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {MAX_LIST_LEN} entries")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut items = Vec::new();
            // An entry that cannot be read is named by its place in the list.
            let entry = |i: usize, e: A::Error| A::Error::custom(format_args!("entry {i}: {e}"));
            while let Some(item) = seq.next_element().map_err(|e| entry(items.len(), e))? {
                if items.len() == MAX_LIST_LEN {
                    return Err(serde::de::Error::custom(format!(
                        "more than {MAX_LIST_LEN} entries (a workflow has at most {MAX_LIST_LEN} steps)"
                    )));
                }
                items.push(item);
            }
            Ok(items)
        }
    }
    deserializer.deserialize_seq(Bounded(std::marker::PhantomData))
}

/// The node labels of an operation's `on`: one label (`on = "docker"`) or a list of them,
/// with `on` named in errors. How many labels, and which, the daemon checks per step.
pub(crate) fn node_labels<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: Deserializer<'de>,
{
    struct Labels;
    impl<'de> serde::de::Visitor<'de> for Labels {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a node label or a list of node labels")
        }
        fn visit_str<E: serde::de::Error>(self, label: &str) -> Result<Vec<String>, E> {
            Ok(vec![label.to_string()])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Vec<String>, A::Error> {
            Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
        }
    }
    deserializer
        .deserialize_any(Labels)
        .map_err(|e| D::Error::custom(format_args!("`on`: {e}")))
}

/// What the JSON Schema says `on` takes: one label or a list of them.
#[cfg(feature = "schema")]
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, reason = "never built: only its schema is used")]
pub(crate) enum NodeLabels {
    /// One label.
    One(String),
    /// Several labels, all required.
    Many(Vec<String>),
}

/// Reads a `T`, putting `field: ` before any error. Serde reads flattened fields from a
/// buffer, where an error loses the field's place (`invalid type: string "yes", expected
/// a boolean` instead of `check_mode: invalid type: ...`); these fields name themselves.
fn named_field<'de, D, T>(field: &str, deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map_err(|e| D::Error::custom(format_args!("{field}: {e}")))
}

/// One reader per flattened field (serde's `deserialize_with` takes a function's path).
macro_rules! named_readers {
    ($($field:ident: $type:ty),* $(,)?) => {
        $(
            #[doc = concat!("Reads `", stringify!($field), "`, naming it in errors.")]
            pub(crate) fn $field<'de, D: Deserializer<'de>>(deserializer: D) -> Result<$type, D::Error> {
                super::named_field(stringify!($field), deserializer)
            }
        )*
    };
}

/// The readers of the fields of [`super::InfraTarget`] and [`super::RunOptions`].
pub(crate) mod named {
    use std::path::PathBuf;

    use serde::Deserializer;

    named_readers! {
        infra: String,
        settings: Option<String>,
        workspace: Option<PathBuf>,
        check_mode: bool,
        wait: bool,
        priority: i32,
        parallel_limit: Option<u32>,
        rollback_enabled: bool,
    }
}

#[cfg(test)]
mod tests {
    use crate::{ServersRequest, TaskservRequest, WorkflowRequest};

    fn servers(json: &str) -> Result<ServersRequest, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn requests_stay_flat_on_the_wire() {
        let seed = r#"{"infra": "production", "settings": "./settings.yaml",
                       "servers": ["web-01", "web-02"], "check_mode": false, "wait": true}"#;
        let request = servers(seed).unwrap();
        assert_eq!(request.target.infra, "production");
        assert_eq!(request.target.settings.as_deref(), Some("./settings.yaml"));
        assert!(request.run.wait && !request.run.check_mode);
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            serde_json::json!({"infra": "production", "settings": "./settings.yaml",
                               "servers": ["web-01", "web-02"], "check_mode": false,
                               "wait": true, "priority": 0, "rollback_enabled": false})
        );
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (r#"{"infra": "lab", "bogus": 1}"#, "unknown field `bogus`"),
            (r#"{"settings": "s.toml"}"#, "missing field `infra`"),
            (r#"{"infra": 3}"#, "infra: invalid type: integer `3`"),
            (
                r#"{"infra": "lab", "check_mode": "yes"}"#,
                "check_mode: invalid type",
            ),
            (
                r#"{"infra": "lab", "priority": 1.5}"#,
                "priority: invalid type",
            ),
            (
                r#"{"infra": "lab", "parallel_limit": -1}"#,
                "parallel_limit: invalid value",
            ),
            (
                r#"{"infra": "lab", "workspace": []}"#,
                "workspace: invalid type",
            ),
        ];
        for (json, expected) in cases {
            let error = servers(json).unwrap_err();
            assert!(error.contains(expected), "{json}: {error}");
        }
        // Inside the tagged request (as the socket reads it) too.
        let error = serde_json::from_str::<WorkflowRequest>(
            r#"{"kind": "taskserv", "infra": "lab", "taskserv": "redis", "wait": 1}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("wait: invalid type"), "{error}");
        let error = serde_json::from_str::<TaskservRequest>(
            r#"{"infra": "lab", "taskserv": "redis", "surprise": 1}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("unknown field `surprise`"), "{error}");
    }

    #[test]
    fn lists_are_bounded_while_they_are_read() {
        let hosts: Vec<String> = (0..=super::MAX_LIST_LEN).map(|i| format!("h{i}")).collect();
        let json = serde_json::json!({"infra": "lab", "servers": hosts}).to_string();
        let error = servers(&json).unwrap_err();
        assert!(error.contains("more than 100000 entries"), "{error}");
        let hosts = &hosts[..super::MAX_LIST_LEN];
        let json = serde_json::json!({"infra": "lab", "servers": hosts}).to_string();
        assert_eq!(servers(&json).unwrap().servers.len(), super::MAX_LIST_LEN);
    }
}
