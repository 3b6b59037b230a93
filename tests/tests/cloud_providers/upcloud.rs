//! The upcloud provider against the stand-in of UpCloud's API 1.3, and the stand-in's own
//! checks of the published request shapes.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Helper, LIFE_CYCLE, assert_life_cycle, base64, nu_error, nu_json, prelude};

pub const UPCLOUD_USERNAME: &str = "standin-api";
pub const UPCLOUD_PASSWORD: &str = "standin-secret";
const UPCLOUD_TOKEN: &str = "ucat_standin_token";
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIStandinKeyForTests e2e@tests";

/// Basic-auth credentials the stand-in accepts, as the modules read them.
pub const UPCLOUD_BASIC: &[(&str, &str)] = &[
    ("UPCLOUD_USERNAME", UPCLOUD_USERNAME),
    ("UPCLOUD_PASSWORD", UPCLOUD_PASSWORD),
];

/// `tests/standins/cloud_standin.py` on a free loopback port (its credentials are the
/// constants above), logging every request.
pub struct Standin(Helper);

impl Standin {
    pub fn start() -> Standin {
        Standin(Helper::start(
            "cloud_standin.py",
            &["--port", "0", "--log", "{dir}/requests.jsonl"],
        ))
    }

    pub fn dir(&self) -> &Path {
        self.0.dir()
    }

    fn base(&self) -> String {
        let port = self
            .0
            .ready
            .rsplit(':')
            .next()
            .expect("listening on HOST:PORT");
        format!("http://127.0.0.1:{port}")
    }

    pub fn endpoint(&self) -> String {
        format!("{}/1.3", self.base())
    }

    /// Every API request the stand-in received, in order (test controls left out).
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir().join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
            .filter(|r| r["api"] == "upcloud")
            .collect()
    }

    /// The servers the stand-in created, with the body of each `POST /server`.
    pub fn create_bodies(&self) -> Vec<Value> {
        self.requests()
            .iter()
            .filter(|r| r["method"] == "POST" && r["path"] == "/1.3/server")
            .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
            .collect()
    }

    /// A script line that sets server `id`'s state through the test control.
    fn set_state(&self, id: &str, state: &str) -> String {
        format!(
            "http post --content-type application/json '{}/_standin/state' {{id: {id}, state: {state}}} | ignore",
            self.base()
        )
    }
}

/// Settings pointing the module at the stand-in, polling fast, without the SSH wait.
pub fn upcloud_settings(standin: &Standin) -> Value {
    json!({
        "endpoint": standin.endpoint(),
        "zone": "de-fra1",
        "poll_interval": "20ms",
        "timeout": "20s",
        "wait_for_ssh": false,
    })
}

/// `POST /server` with `body` as the stand-in's user: (status, error code).
fn create_with(standin: &Standin, body: &Value) -> (u64, String) {
    let script = format!(
        "http post --full --allow-errors --user {UPCLOUD_USERNAME} --password {UPCLOUD_PASSWORD} \
         --content-type application/json {}/server '{body}' | {{status: $in.status, code: ($in.body.error?.error_code? | default '')}}",
        standin.endpoint()
    );
    let answer = nu_json(standin.dir(), &script, &[]);
    (
        answer["status"].as_u64().unwrap(),
        answer["code"].as_str().unwrap().to_string(),
    )
}

#[test]
fn the_standin_checks_create_bodies_against_the_published_shape() {
    let standin = Standin::start();
    let valid = json!({"server": {"zone": "de-fra1", "title": "x", "hostname": "x", "plan": "1xCPU-1GB",
        "storage_devices": {"storage_device": [{"action": "clone",
            "storage": "01000000-0000-4000-8000-000030240200", "title": "x disk", "size": 25}]}}});
    assert_eq!(create_with(&standin, &valid), (202, String::new()));
    // Each change makes the body wrong in one way; the error names the field.
    let cases: [(&str, Value, &str); 8] = [
        ("/server/zone", Value::Null, "ZONE_MISSING"),
        ("/server/zone", json!("mars-1"), "ZONE_INVALID"),
        ("/server/colour", json!("red"), "COLOUR_UNKNOWN"),
        ("/server/metadata", json!(true), "METADATA_INVALID"),
        (
            "/server/storage_devices/storage_device/0/size",
            json!("25"),
            "SIZE_INVALID",
        ),
        (
            "/server/storage_devices/storage_device/0/tier",
            json!("fast"),
            "TIER_INVALID",
        ),
        (
            "/server/labels",
            json!([{"key": "a", "value": "b"}]),
            "LABELS_INVALID",
        ),
        (
            "/server/login_user/ssh_keys",
            json!({"ssh_key": ["not a key"]}),
            "SSH_KEY_INVALID",
        ),
    ];
    for (pointer, value, code) in cases {
        let mut body = valid.clone();
        let (parent, name) = pointer.rsplit_once('/').unwrap();
        if parent == "/server/login_user" {
            body["server"]["login_user"] = json!({"username": "root"});
        }
        let target = body.pointer_mut(parent).unwrap();
        if value.is_null() {
            target.as_object_mut().unwrap().remove(name);
        } else if let Ok(index) = name.parse::<usize>() {
            target[index] = value;
        } else {
            target[name] = value;
        }
        assert_eq!(
            create_with(&standin, &body),
            (400, code.to_string()),
            "{pointer}"
        );
    }
    // A method the path does not have, and a path the API does not have.
    let auth =
        format!("--full --allow-errors --user {UPCLOUD_USERNAME} --password {UPCLOUD_PASSWORD}");
    let endpoint = standin.endpoint();
    let script = format!(
        "[(http delete {auth} {endpoint}/server | get status) (http get {auth} {endpoint}/servers | get status)]"
    );
    assert_eq!(nu_json(standin.dir(), &script, &[]), json!([405, 404]));
}

#[test]
fn upcloud_create_is_idempotent_then_status_and_delete() {
    let standin = Standin::start();
    let script = prelude(
        "upcloud",
        upcloud_settings(&standin),
        json!({"hostname": "web-01", "infra": "demo", "plan": "2xCPU-4GB", "ssh_keys": [SSH_KEY]}),
    ) + LIFE_CYCLE;
    let result = nu_json(standin.dir(), &script, UPCLOUD_BASIC);

    let first = &result["first"];
    assert_eq!(first["hostname"], "web-01");
    assert_eq!(first["provider"], "upcloud");
    assert_eq!(first["state"], "started");
    let id = first["id"].as_str().expect("an id").to_string();
    let address = first["address"].as_str().expect("an address");
    assert!(address.starts_with("94.237."), "public IPv4: {address}");
    assert_life_cycle(&result, "started");

    let requests = standin.requests();
    let basic = format!(
        "Basic {}",
        base64(&format!("{UPCLOUD_USERNAME}:{UPCLOUD_PASSWORD}"))
    );
    for r in &requests {
        assert_eq!(r["headers"]["authorization"], basic.as_str(), "{r}");
        assert!(r["status"].as_u64().unwrap() < 400, "{r}");
    }
    let creates = standin.create_bodies();
    assert_eq!(creates.len(), 1, "one POST /server for two create-server");
    let server = &creates[0]["server"];
    assert_eq!(server["zone"], "de-fra1", "from provider_settings");
    assert_eq!(server["plan"], "2xCPU-4GB", "from the server entry");
    assert_eq!(server["hostname"], "web-01");
    assert_eq!(
        server["storage_devices"]["storage_device"],
        json!([{"action": "clone", "storage": "01000000-0000-4000-8000-000030240200",
                "title": "web-01 OS disk", "size": 25, "tier": "maxiops"}])
    );
    assert_eq!(
        server["login_user"],
        json!({"username": "root", "create_password": "no", "ssh_keys": {"ssh_key": [SSH_KEY]}})
    );
    assert_eq!(
        server["labels"]["label"],
        json!([{"key": "managed-by", "value": "provisioning"}, {"key": "provisioning-infra", "value": "demo"},
               {"key": "provisioning-created-by", "value": "1/create-server@web-01"}])
    );
    let stop: Vec<&Value> = requests
        .iter()
        .filter(|r| r["path"] == format!("/1.3/server/{id}/stop"))
        .collect();
    assert_eq!(stop.len(), 1);
    let stop_body: Value = serde_json::from_str(stop[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(stop_body["stop_server"]["stop_type"], "hard");
    let deletes: Vec<&Value> = requests
        .iter()
        .filter(|r| r["method"] == "DELETE")
        .collect();
    assert_eq!(deletes.len(), 1, "the second delete-server finds nothing");
    assert_eq!(deletes[0]["path"], format!("/1.3/server/{id}"));
    assert_eq!(deletes[0]["query"], "storages=1");
    assert_eq!(deletes[0]["status"], 204);
}

#[test]
fn upcloud_token_from_provider_settings_is_sent_as_bearer() {
    let standin = Standin::start();
    let mut settings = upcloud_settings(&standin);
    settings["token"] = json!(UPCLOUD_TOKEN);
    let script = prelude(
        "upcloud",
        settings,
        json!({"hostname": "db-01", "infra": "demo"}),
    ) + "create-server $server $ctx | get state";
    assert_eq!(nu_json(standin.dir(), &script, &[]), "started");
    let requests = standin.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        let bearer = format!("Bearer {UPCLOUD_TOKEN}");
        assert_eq!(r["headers"]["authorization"], bearer.as_str(), "{r}");
    }
    let body = &standin.create_bodies()[0];
    // manifest defaults where neither the server nor the settings say
    assert_eq!(body["server"]["plan"], "1xCPU-1GB");
    assert!(
        body["server"].get("login_user").is_none(),
        "no ssh_keys, no login_user"
    );
}

#[test]
fn upcloud_wrong_or_missing_credentials_are_a_clear_error() {
    let standin = Standin::start();
    let script = prelude(
        "upcloud",
        upcloud_settings(&standin),
        json!({"hostname": "web-01", "infra": "demo"}),
    ) + "create-server $server $ctx";
    let stderr = nu_error(standin.dir(), &script, &[]);
    for name in ["UPCLOUD_USERNAME", "UPCLOUD_PASSWORD", "UPCLOUD_TOKEN"] {
        assert!(stderr.contains(name), "{name} not named: {stderr}");
    }
    assert!(standin.requests().is_empty(), "nothing sent without them");
    let wrong = [
        ("UPCLOUD_USERNAME", UPCLOUD_USERNAME),
        ("UPCLOUD_PASSWORD", "not-the-password"),
    ];
    let stderr = nu_error(standin.dir(), &script, &wrong);
    assert!(
        stderr.contains("HTTP 401") && stderr.contains("AUTHENTICATION_FAILED"),
        "{stderr}"
    );
    let requests = standin.requests();
    assert_eq!(requests.len(), 1, "stops at the first refusal");
    assert_eq!(requests[0]["status"], 401);
}

#[test]
fn upcloud_endpoint_from_the_environment_and_a_stopped_server_is_started() {
    let standin = Standin::start();
    let mut settings = upcloud_settings(&standin);
    settings.as_object_mut().unwrap().remove("endpoint");
    let endpoint = standin.endpoint();
    let mut env = UPCLOUD_BASIC.to_vec();
    env.push(("UPCLOUD_API_URL", &endpoint));
    let script = prelude(
        "upcloud",
        settings,
        json!({"hostname": "web-01", "infra": "demo"}),
    ) + &format!(
        "let first = create-server $server $ctx
{}
let stopped = server-status $server
let again = create-server $server $ctx
{{first: $first.id, stopped: $stopped.state, again: $again}}",
        standin.set_state("$first.id", "stopped")
    );
    let result = nu_json(standin.dir(), &script, &env);
    assert_eq!(result["stopped"], "stopped");
    assert_eq!(result["again"]["id"], result["first"]);
    assert_eq!(result["again"]["state"], "started");
    let id = result["first"].as_str().unwrap();
    let starts = standin
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "POST" && r["path"] == format!("/1.3/server/{id}/start"))
        .count();
    assert_eq!(starts, 1);
}
