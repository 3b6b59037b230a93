//! A schemathesis fuzz of the HTTP API from its OpenAPI document (its stateful phase
//! following the document's links) with zero 5xx.

use std::process::Command;

use orch_e2e::containers::{TestEnvSweeper, engine_socket};
use orch_e2e::http::Shim;

#[test]
fn schemathesis_finds_no_server_error() {
    let Ok(version) = Command::new("st").arg("--version").output() else {
        panic!("schemathesis (`st`) is not installed: scripts/test.sh installs it with pip");
    };
    assert!(version.status.success());
    let shim = Shim::lab();
    let sweeper = engine_socket().map(|socket| TestEnvSweeper {
        socket,
        data_dir: shim.daemon.data_dir(),
    });
    let token = shim.token("admin").to_string();
    let out = Command::new("st")
        .args([
            "run",
            &format!("http://127.0.0.1:{}/openapi.json", shim.port),
        ])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args([
            "--checks",
            "not_a_server_error",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            "10",
            "--seed",
            "1",
        ])
        // Its cache goes to the test's directory, not the repository.
        .current_dir(shim.daemon.dir())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("passed"), "{report}");
    // The stateful phase followed the document's links: a token made by POST /auth/tokens
    // was revoked through the link to DELETE /auth/tokens/{id} (its id cannot be guessed).
    assert!(report.contains("Stateful"), "{report}");
    let revoked = shim.json("admin", "GET", "/audit?action=token_revoke", None, 200);
    assert!(
        !revoked.as_array().unwrap().is_empty(),
        "no token was revoked through the link:\n{report}"
    );
    drop(sweeper);
}
