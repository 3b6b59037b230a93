//! Property-based fuzzing of what a socket client controls: the frame decoder the daemon
//! reads with ([`Connection::recv`]) and the parsers of its handshake and requests.
//! Arbitrary bytes, arbitrary JSON shapes and mutated valid requests must give a frame or
//! one of the documented errors (`too_large`, `bad_request`, `unavailable`), never a panic.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use orch_protocol::{Actor, ErrorKind, MAX_FRAME_LEN};
use proptest::prelude::*;
use provisioning_orchestrator::config::Cli;
use provisioning_orchestrator::policy::Role;
use provisioning_orchestrator::server::connection::{Connection, Patience, RecvError};
use provisioning_orchestrator::server::limits::Limits;
use provisioning_orchestrator::server::{parse_hello, parse_request};
use tokio::io::AsyncWriteExt;

/// One valid request of every kind, the seeds that mutations start from.
const VALID: &[&str] = &[
    r#"{"protocol":3,"client":"fuzz 1"}"#,
    r#"{"request":"health"}"#,
    r#"{"request":"submit","tasks":[{"kind":{"type":"command","program":"true","args":["a"]},"label":"l","priority":1,"retries":2,"backoff":{"initial_ms":10,"max_ms":100},"timeout_ms":1000,"after":[1],"soft_after":[2],"params":{"k":[1,{"x":null}]},"env":{"K":"V"}}]}"#,
    r#"{"request":"submit","tasks":[{"kind":{"type":"nu","code":"print 1"}}]}"#,
    r#"{"request":"list","filter":{"status":["queued","failed"],"label":"x","limit":3}}"#,
    r#"{"request":"get","id":1}"#,
    r#"{"request":"wait","ids":[1,2]}"#,
    r#"{"request":"cancel","id":1}"#,
    r#"{"request":"retry","id":1}"#,
    r#"{"request":"watch","since":0,"task":1}"#,
    r#"{"request":"logs","id":1,"follow":false}"#,
    r#"{"request":"clean","filter":{"older_than_ms":1000,"status":["succeeded"]}}"#,
    r#"{"request":"audit","filter":{"action":"submit","limit":2}}"#,
    r#"{"request":"audit_verify"}"#,
    r#"{"request":"workflow_submit","workflow":{"kind":"servers","infra":"lab","servers":["web-01"],"check_mode":true}}"#,
    r#"{"request":"workflow_plan","workflow":{"kind":"batch","workflow":{"name":"n","operations":[{"id":"a","type":"nu","nu":"print 1","dependencies":[]}]}}}"#,
    r#"{"request":"workflows","limit":5}"#,
    r#"{"request":"workflow","id":3}"#,
    r#"{"request":"env_create","env":{"env":{"type":"single","taskserv":"redis"},"auto_start":true}}"#,
    r#"{"request":"env_logs","id":1,"follow":false}"#,
    r#"{"request":"topologies"}"#,
];

/// The daemon's limits, with the defaults a test can wait for.
fn limits() -> Arc<Limits> {
    let cli = Cli::parse_from(["provisioning-orchestrator", "--read-timeout", "2s"]);
    Arc::new(Limits::from_cli(&cli))
}

/// What the decoder made of `input`: the frames, then the error that ended the reading.
fn decode(input: Vec<u8>) -> (Vec<Vec<u8>>, RecvError) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let (ours, mut theirs) = tokio::net::UnixStream::pair().expect("a socket pair");
        let writer = tokio::spawn(async move {
            let _ = theirs.write_all(&input).await;
            let _ = theirs.shutdown().await;
            theirs
        });
        let actor = Actor {
            uid: 0,
            interface: "fuzz".into(),
        };
        let mut conn = Connection::new(ours, actor, Role::Viewer, limits());
        let mut frames = Vec::new();
        let end = loop {
            match conn.recv(Patience::Idle(Duration::from_secs(2))).await {
                Ok(frame) => frames.push(frame.body),
                Err(end) => break end,
            }
        };
        drop(writer.await);
        (frames, end)
    })
}

/// A frame: the length prefix, then `body`.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(body);
    bytes
}

/// Checks the documented outcome of parsing `body` as a request and as a handshake.
fn parses_or_bad_request(body: &[u8]) {
    if let Err(reply) = parse_request(body) {
        assert_eq!(reply.kind, ErrorKind::BadRequest, "{}", reply.message);
        assert!(
            reply.message.starts_with("invalid request"),
            "{}",
            reply.message
        );
    }
    if let Err(reply) = parse_hello(body) {
        assert_eq!(reply.kind, ErrorKind::BadRequest, "{}", reply.message);
        assert!(reply.message.contains("handshake"), "{}", reply.message);
    }
}

/// Arbitrary JSON values, nested a few levels.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map_or(serde_json::Value::Null, serde_json::Value::Number)),
        ".{0,12}".prop_map(serde_json::Value::from),
        prop::sample::select(vec![
            "request", "health", "submit", "tasks", "kind", "type", "command", "program", "id",
            "ids", "filter", "workflow", "env", "protocol", "client", "since", "follow",
        ])
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "request", "tasks", "kind", "type", "program", "args", "id", "ids",
                        "filter", "status", "limit", "workflow", "env", "protocol", "client",
                        "params", "after", "x",
                    ]),
                    inner
                ),
                0..6
            )
            .prop_map(|pairs| serde_json::Value::Object(
                pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
            )),
        ]
    })
}

/// One change to a valid request's bytes.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Duplicate(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        any::<usize>().prop_map(Mutation::Truncate),
        (
            any::<usize>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 1..8),
                prop::sample::select(vec![
                    b"{".to_vec(),
                    b"}".to_vec(),
                    b"[".to_vec(),
                    b"\"".to_vec(),
                    b",".to_vec(),
                    b":".to_vec(),
                    b"null".to_vec(),
                    b"-1".to_vec(),
                    b"1e999".to_vec(),
                    b"18446744073709551616".to_vec(),
                    b"\\u0000".to_vec(),
                    b"\\ud800".to_vec(),
                ]),
            ]
        )
            .prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        (any::<usize>(), 1..16usize).prop_map(|(at, n)| Mutation::Remove(at, n)),
        (any::<usize>(), 1..32usize).prop_map(|(at, n)| Mutation::Duplicate(at, n)),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len().max(1);
        match m {
            Mutation::Flip(at, bit) => {
                if let Some(b) = bytes.get_mut(at % len) {
                    *b ^= bit;
                }
            }
            Mutation::Truncate(at) => bytes.truncate(at % len),
            Mutation::Insert(at, extra) => {
                let at = (at % len).min(bytes.len());
                bytes.splice(at..at, extra.iter().copied());
            }
            Mutation::Remove(at, n) => {
                let at = (at % len).min(bytes.len());
                let end = (at + n).min(bytes.len());
                bytes.drain(at..end);
            }
            Mutation::Duplicate(at, n) => {
                let at = (at % len).min(bytes.len());
                let end = (at + n).min(bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(at..at, copy);
            }
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever bytes arrive, the decoder yields frames and then one documented ending.
    #[test]
    fn arbitrary_bytes_decode_to_frames_or_a_documented_error(
        input in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let (frames, end) = decode(input);
        for body in &frames {
            parses_or_bad_request(body);
        }
        if let RecvError::Refused(reply) = end {
            prop_assert!(
                matches!(reply.kind, ErrorKind::TooLarge | ErrorKind::BadRequest | ErrorKind::Unavailable),
                "{reply:?}"
            );
        }
    }

    /// Well-formed frames come out exactly as they went in, whatever follows them.
    #[test]
    fn well_formed_frames_are_decoded_exactly(
        bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..512), 0..8),
        tail in prop::collection::vec(any::<u8>(), 0..16),
    ) {
        let mut input: Vec<u8> = bodies.iter().flat_map(|b| frame(b)).collect();
        input.extend_from_slice(&tail);
        let (frames, _) = decode(input);
        prop_assert!(frames.len() >= bodies.len());
        prop_assert_eq!(&frames[..bodies.len()], &bodies[..]);
    }

    /// A declared length over the limit is refused as `too_large` before any body is read.
    #[test]
    fn oversized_lengths_are_refused_as_too_large(
        len in (MAX_FRAME_LEN as u32 + 1)..=u32::MAX,
        rest in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut input = len.to_be_bytes().to_vec();
        input.extend(rest);
        let (frames, end) = decode(input);
        prop_assert!(frames.is_empty());
        match end {
            RecvError::Refused(reply) => prop_assert_eq!(reply.kind, ErrorKind::TooLarge),
            other => prop_assert!(false, "expected too_large, got {other:?}"),
        }
    }

    /// Any JSON shape parses as a request or handshake, or is a `bad_request`.
    #[test]
    fn arbitrary_json_is_a_request_or_a_bad_request(value in json_value()) {
        parses_or_bad_request(&serde_json::to_vec(&value).unwrap());
    }

    /// Valid requests with their bytes changed parse, or are a `bad_request`; through the
    /// decoder they arrive intact.
    #[test]
    fn mutated_requests_are_requests_or_bad_requests(
        seed in prop::sample::select(VALID),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let body = mutate(seed.as_bytes().to_vec(), &mutations);
        parses_or_bad_request(&body);
        let (frames, _) = decode(frame(&body));
        prop_assert_eq!(frames, vec![body]);
    }
}

/// Nesting deeper than the parser's recursion limit is an error, not a stack overflow.
#[test]
fn deep_nesting_is_a_bad_request() {
    for open in [b"[", b"{"] {
        let mut body =
            br#"{"request":"submit","tasks":[{"kind":{"type":"command","program":"x"},"params":"#
                .to_vec();
        body.extend(std::iter::repeat_n(open[0], 100_000));
        let reply = parse_request(&body).unwrap_err();
        assert_eq!(reply.kind, ErrorKind::BadRequest);
        assert!(parse_hello(&body).is_err());
    }
}

/// Every seed is a valid request or handshake (so the mutations start from real ones).
#[test]
fn the_seeds_are_valid() {
    for seed in VALID {
        assert!(
            parse_request(seed.as_bytes()).is_ok() || parse_hello(seed.as_bytes()).is_ok(),
            "{seed}"
        );
    }
}
