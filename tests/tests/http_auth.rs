//! The HTTP shim's authentication end to end with curl: every route without a token, with
//! a wrong one and with each role's, and tokens made through the API.

use orch_e2e::http::Shim;
use serde_json::json;

#[test]
fn the_auth_matrix_holds_on_every_route() {
    let shim = Shim::lab();
    let mutations = [
        ("POST", "/workflows/servers/create"),
        ("POST", "/workflows/taskserv/create"),
        ("POST", "/workflows/cluster/create"),
        ("POST", "/extensions/taskservs/install"),
        ("POST", "/test/environments/create"),
        ("POST", "/test/environments/1/run"),
        ("DELETE", "/test/environments/1"),
        ("POST", "/queue"),
        ("POST", "/schedules"),
        ("DELETE", "/schedules/nope"),
        ("POST", "/tasks/1/cancel"),
        ("POST", "/tasks/1/retry"),
        ("POST", "/workflows/1/cancel"),
        ("POST", "/workflows/1/rollback"),
        ("POST", "/workflows/1/restart"),
    ];
    let reads = [
        "/tasks",
        "/tasks/1",
        "/test/environments",
        "/test/environments/1",
        "/test/environments/1/logs",
        "/extensions/providers",
        "/extensions/taskservs",
        "/extensions/clusters",
        "/metrics",
        "/queue",
        "/schedules",
        "/tasks/1/logs",
        "/tasks/1/dependants",
        "/workflows",
        "/workflows/1",
        "/test/topologies",
        "/activity",
        "/whoami",
    ];
    let admin_only = [
        ("GET", "/audit"),
        ("GET", "/audit/verify"),
        ("GET", "/auth/tokens"),
        ("POST", "/auth/tokens"),
        ("DELETE", "/auth/tokens/0000000000000000"),
    ];
    let body = json!({});
    for (method, path) in mutations
        .iter()
        .copied()
        .chain(reads.iter().map(|p| ("GET", *p)))
        .chain(admin_only)
    {
        let b = (method != "GET").then_some(&body);
        assert_eq!(
            shim.call(None, method, path, b).0,
            401,
            "{method} {path} without a token"
        );
        assert_eq!(
            shim.call(Some("not-a-token"), method, path, b).0,
            401,
            "{method} {path} with a bad token"
        );
    }
    for (method, path) in mutations {
        let (status, text) = shim.call(Some("viewer"), method, path, Some(&body));
        assert_eq!(status, 403, "viewer {method} {path}: {text}");
        assert!(text.contains("needs operator"), "{text}");
        let (status, _) = shim.call(Some("operator"), method, path, Some(&body));
        assert!(
            ![401, 403].contains(&status),
            "operator may {method} {path}"
        );
    }
    for path in reads {
        let (status, _) = shim.call(Some("viewer"), "GET", path, None);
        assert!(![401, 403].contains(&status), "viewer may GET {path}");
    }
    for (method, path) in admin_only {
        let b = (method != "GET").then_some(&body);
        assert_eq!(
            shim.call(Some("operator"), method, path, b).0,
            403,
            "operator {method} {path}"
        );
        assert_ne!(
            shim.call(Some("admin"), method, path, b).0,
            403,
            "admin {method} {path}"
        );
    }
    // An admin makes a viewer token; it works at once.
    let made = shim.json(
        "admin",
        "POST",
        "/auth/tokens",
        Some(&json!({"name": "ci", "role": "viewer"})),
        201,
    );
    let (status, _) = shim.call(Some(made["token"].as_str().unwrap()), "GET", "/tasks", None);
    assert_eq!(status, 200);
    let (status, _) = shim.call(
        Some(made["token"].as_str().unwrap()),
        "POST",
        "/workflows/servers/create",
        Some(&body),
    );
    assert_eq!(status, 403);
    // The dashboard's files need no token and hold no data; the data behind them does.
    for path in ["/ui/", "/ui/tasks/1", "/ui/assets/app.js"] {
        assert_eq!(shim.call(None, "GET", path, None).0, 200, "{path}");
    }
    let me = shim.json("viewer", "GET", "/whoami", None, 200);
    assert_eq!(me, json!({"token": "viewer", "role": "viewer"}));
    let mode = std::fs::metadata(shim.daemon.data_dir().join("tokens.json"))
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
        .unwrap();
    assert_eq!(mode, 0o600);
}
