//! The cloud providers (`nushell-modules/providers/upcloud` and `.../aws`) run by the real
//! `nu` against `tests/standins/cloud_standin.py`, a local stand-in of UpCloud's API 1.3 and
//! of the EC2 Query API: the clouds themselves cannot be reached from the test machines.
//!
//! The stand-in checks what it receives (credentials, the JSON body of UpCloud's create,
//! the Signature Version 4 of every EC2 request, recomputed with the known secret) and
//! records every request in a JSON-lines file, on which these tests assert too.
//!
//! `server-exec` is run with a fake `ssh` first on PATH (it records its arguments and runs
//! the command locally): that checks the command line the modules build, not SSH to a real
//! server, which is not tested here.
//!
//! Needs `python3` (standard library only).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use orch_e2e::nu_binary;
use serde_json::{Value, json};
use tempfile::TempDir;

const UPCLOUD_USERNAME: &str = "standin-api";
const UPCLOUD_PASSWORD: &str = "standin-secret";
const UPCLOUD_TOKEN: &str = "ucat_standin_token";
const AWS_ACCESS_KEY_ID: &str = "AKIASTANDIN000000000";
const AWS_SECRET_ACCESS_KEY: &str = "standin/Secret+Key/0123456789abcdefghijk";
const AWS_SESSION_TOKEN: &str = "FwoGZXIvYXdzEStandin/Session+Token==";
const AWS_REGION: &str = "eu-north-1";
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIStandinKeyForTests e2e@tests";

/// The environment variables the modules read: removed from every `nu` run so the
/// developer's own credentials never reach the tests (nor the tests' the real clouds).
const PROVIDER_ENV: &[&str] = &[
    "UPCLOUD_USERNAME",
    "UPCLOUD_PASSWORD",
    "UPCLOUD_TOKEN",
    "UPCLOUD_API_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_EC2_ENDPOINT",
    "AWS_PROFILE",
    "ORCH_PARAMS",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the repository")
        .to_path_buf()
}

fn provider_module(name: &str) -> PathBuf {
    repo().join("nushell-modules/providers").join(name)
}

fn standin_script() -> PathBuf {
    repo().join("tests/standins/cloud_standin.py")
}

/// `$PYTHON` or `python3` on PATH.
fn python() -> PathBuf {
    std::env::var_os("PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// The stand-in on a free loopback port, in its own temporary directory; killed when
/// dropped, even when the test fails.
struct Standin {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl Standin {
    fn start(extra_args: &[&str]) -> Standin {
        let dir = tempfile::Builder::new()
            .prefix("orch-cloud-")
            .tempdir()
            .expect("a temp dir");
        let stderr = std::fs::File::create(dir.path().join("standin.stderr")).unwrap();
        let mut child = Command::new(python())
            .arg(standin_script())
            .args(["--port", "0", "--log"])
            .arg(dir.path().join("requests.jsonl"))
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} (the cloud provider tests need python3): {e}",
                    python().display()
                )
            });
        // Guard first, so the process is killed if reading its port fails.
        let stdout = child.stdout.take().expect("piped stdout");
        let mut standin = Standin {
            child,
            port: 0,
            dir,
        };
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the stand-in's first line");
        standin.port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "the stand-in did not start ({line:?}): {}",
                    standin.stderr()
                )
            });
        standin
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir().join("standin.stderr")).unwrap_or_default()
    }

    fn upcloud_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/1.3", self.port)
    }

    fn aws_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Every request the stand-in received, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir().join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// The requests of one API (`upcloud`, `aws`).
    fn api_requests(&self, api: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r["api"] == api)
            .collect()
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a `nu` script in `dir` with the provider variables cleared, then `env` set;
/// `Ok(stdout)` or `Err(stderr)`.
fn run_nu(dir: &Path, script: &str, env: &[(&str, &str)]) -> Result<String, String> {
    let mut command = Command::new(nu_binary());
    command
        .arg("--no-config-file")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .stdin(Stdio::null());
    for name in PROVIDER_ENV {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let out = command.output().expect("nu runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A script whose last value is returned as JSON; panics with stderr when it fails.
fn nu_json(dir: &Path, script: &str, env: &[(&str, &str)]) -> Value {
    let stdout = run_nu(dir, &format!("{script} | to json --raw"), env)
        .unwrap_or_else(|stderr| panic!("nu failed:\n{script}\n---\n{stderr}"));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// A script expected to fail; returns its stderr.
fn nu_error(dir: &Path, script: &str, env: &[(&str, &str)]) -> String {
    match run_nu(dir, script, env) {
        Ok(stdout) => panic!("expected an error from:\n{script}\n---\nstdout: {stdout}"),
        Err(stderr) => stderr,
    }
}

/// The prelude of every script: the module, the step context (also in
/// $env.ORCH_PARAMS, as the daemon sets it, for server-exec and server-status) and the
/// server record.
fn prelude(provider: &str, settings: Value, server: Value) -> String {
    let ctx = json!({
        "workflow": 1,
        "step": format!("create-server@{}", server["hostname"].as_str().unwrap()),
        "infra": {
            "name": "demo",
            "dir": "/tmp/demo",
            "settings": {
                "name": "demo",
                "provider": provider,
                "provider_settings": {provider: settings},
            },
        },
        "server": server,
    });
    format!(
        "use '{}' *\nlet ctx = ('{}' | from json)\nlet server = ('{}' | from json)\n$env.ORCH_PARAMS = ($ctx | to json)\n",
        provider_module(provider).display(),
        ctx,
        server,
    )
}

fn upcloud_settings(standin: &Standin) -> Value {
    json!({
        "endpoint": standin.upcloud_endpoint(),
        "zone": "de-fra1",
        "poll_interval": "20ms",
        "timeout": "20s",
        "wait_for_ssh": false,
    })
}

fn aws_settings(standin: &Standin) -> Value {
    json!({
        "endpoint": standin.aws_endpoint(),
        "region": AWS_REGION,
        "image": "ami-0123456789abcdef0",
        "key_name": "deploy",
        "poll_interval": "20ms",
        "timeout": "20s",
        "wait_for_ssh": false,
    })
}

const UPCLOUD_BASIC: &[(&str, &str)] = &[
    ("UPCLOUD_USERNAME", UPCLOUD_USERNAME),
    ("UPCLOUD_PASSWORD", UPCLOUD_PASSWORD),
];

const AWS_CREDENTIALS: &[(&str, &str)] = &[
    ("AWS_ACCESS_KEY_ID", AWS_ACCESS_KEY_ID),
    ("AWS_SECRET_ACCESS_KEY", AWS_SECRET_ACCESS_KEY),
];

/// The full life cycle: create twice, status, delete twice, status.
const LIFE_CYCLE: &str = "
let first = create-server $server $ctx
let second = create-server $server $ctx
let status = server-status $server
delete-server $server $ctx
delete-server $server $ctx
{first: $first, second: $second, status: $status, after_delete: (server-status $server)}";

/// A fake `ssh` first on PATH: appends its arguments (one per line, then `--end--`) to
/// `ssh.log` and runs the remote command (its last argument) locally with `sh -c`, a
/// leading `sudo -n ` removed.
fn fake_ssh(dir: &Path) -> (String, PathBuf) {
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("ssh.log");
    let script = format!(
        "#!/bin/sh\nfor a; do printf '%s\\n' \"$a\"; done >> '{log}'\necho --end-- >> '{log}'\nfor last; do :; done\ncase \"$last\" in \"sudo -n \"*) last=\"${{last#sudo -n }}\";; esac\nexec sh -c \"$last\"\n",
        log = log.display()
    );
    let path = bin.join("ssh");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let search = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (search, log)
}

/// The fake ssh's invocations, each a list of arguments.
fn ssh_calls(log: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.split("--end--\n")
        .filter(|c| !c.is_empty())
        .map(|c| c.lines().map(str::to_string).collect())
        .collect()
}

// ---- the stand-in and the signing themselves ---------------------------------------------

#[test]
fn standin_signature_check_reproduces_the_aws_published_example() {
    let out = Command::new(python())
        .arg(standin_script())
        .arg("--self-test")
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn aws_module_signature_reproduces_the_aws_published_example() {
    // The module's signing function (not exported) in a copy of the module that exports it.
    let dir = TempDir::new().unwrap();
    let copy = dir.path().join("aws");
    std::fs::create_dir(&copy).unwrap();
    for file in ["mod.nu", "manifest.toml"] {
        let text = std::fs::read_to_string(provider_module("aws").join(file)).unwrap();
        let text = text.replace(
            "\ndef sigv4-authorization ",
            "\nexport def sigv4-authorization ",
        );
        std::fs::write(copy.join(file), text).unwrap();
    }
    // AWS's example request (IAM ListUsers, 2015-08-30) and its documented signature.
    let script = format!(
        "use '{}' *\nsigv4-authorization {{method: GET, path: '/', query: 'Action=ListUsers&Version=2010-05-08', \
         headers: {{content-type: 'application/x-www-form-urlencoded; charset=utf-8', host: 'iam.amazonaws.com', x-amz-date: '20150830T123600Z'}}, \
         payload: ('' | into binary), region: us-east-1, service: iam, access_key: AKIDEXAMPLE, \
         secret_key: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', amz_date: '20150830T123600Z'}}",
        copy.display()
    );
    let header = nu_json(dir.path(), &script, &[]);
    assert_eq!(
        header,
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, \
         SignedHeaders=content-type;host;x-amz-date, \
         Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    );
}

#[test]
fn upcloud_standin_rejects_a_create_body_without_zone() {
    let standin = Standin::start(&[]);
    let script = format!(
        "http post --full --allow-errors --user {UPCLOUD_USERNAME} --password {UPCLOUD_PASSWORD} \
         --content-type application/json {}/server {{server: {{title: x, hostname: x, plan: '1xCPU-1GB'}}}} | select status body",
        standin.upcloud_endpoint()
    );
    let answer = nu_json(standin.dir(), &script, &[]);
    assert_eq!(
        answer,
        json!({"status": 400, "body": {"error": {"error_code": "ZONE_MISSING", "error_message": "The parameter zone is missing."}}})
    );
}

// ---- UpCloud -------------------------------------------------------------------------------

#[test]
fn upcloud_create_is_idempotent_then_status_and_delete() {
    let standin = Standin::start(&[]);
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
    assert_eq!(
        result["second"], *first,
        "the second create returns the same server"
    );
    assert_eq!(
        result["status"],
        json!({"hostname": "web-01", "exists": true, "state": "started"})
    );
    assert_eq!(
        result["after_delete"],
        json!({"hostname": "web-01", "exists": false, "state": "missing"})
    );

    let requests = standin.api_requests("upcloud");
    let basic = format!(
        "Basic {}",
        base64(&format!("{UPCLOUD_USERNAME}:{UPCLOUD_PASSWORD}"))
    );
    for r in &requests {
        assert_eq!(r["headers"]["authorization"], basic.as_str(), "{r}");
        assert_eq!(r["auth"], "basic", "{r}");
        assert!(r["status"].as_u64().unwrap() < 400, "{r}");
    }
    let creates: Vec<&Value> = requests
        .iter()
        .filter(|r| r["method"] == "POST" && r["path"] == "/1.3/server")
        .collect();
    assert_eq!(creates.len(), 1, "one POST /server for two create-server");
    let body: Value = serde_json::from_str(creates[0]["body"].as_str().unwrap()).unwrap();
    let server = &body["server"];
    assert_eq!(server["zone"], "de-fra1", "from provider_settings");
    assert_eq!(server["plan"], "2xCPU-4GB", "from the server entry");
    assert_eq!(server["hostname"], "web-01");
    assert_eq!(server["title"], "web-01");
    assert_eq!(
        server["storage_devices"]["storage_device"],
        json!([{
            "action": "clone",
            "storage": "01000000-0000-4000-8000-000030240200",
            "title": "web-01 OS disk",
            "size": 25,
            "tier": "maxiops",
        }])
    );
    assert_eq!(
        server["login_user"],
        json!({"username": "root", "create_password": "no", "ssh_keys": {"ssh_key": [SSH_KEY]}})
    );
    assert!(
        creates[0]["headers"]["content-type"]
            .as_str()
            .unwrap()
            .starts_with("application/json")
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
    let standin = Standin::start(&[]);
    let mut settings = upcloud_settings(&standin);
    settings["token"] = json!(UPCLOUD_TOKEN);
    let script = prelude(
        "upcloud",
        settings,
        json!({"hostname": "db-01", "infra": "demo"}),
    ) + "create-server $server $ctx | get state";
    assert_eq!(nu_json(standin.dir(), &script, &[]), "started");
    let requests = standin.api_requests("upcloud");
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(
            r["headers"]["authorization"],
            format!("Bearer {UPCLOUD_TOKEN}"),
            "{r}"
        );
    }
    let create = requests
        .iter()
        .find(|r| r["method"] == "POST" && r["path"] == "/1.3/server")
        .unwrap();
    let body: Value = serde_json::from_str(create["body"].as_str().unwrap()).unwrap();
    // manifest defaults where neither the server nor the settings say
    assert_eq!(body["server"]["plan"], "1xCPU-1GB");
    assert!(
        body["server"].get("login_user").is_none(),
        "no ssh_keys, no login_user"
    );
}

#[test]
fn upcloud_wrong_credentials_are_a_clear_error() {
    let standin = Standin::start(&[]);
    let script = prelude(
        "upcloud",
        upcloud_settings(&standin),
        json!({"hostname": "web-01", "infra": "demo"}),
    ) + "create-server $server $ctx";
    let stderr = nu_error(
        standin.dir(),
        &script,
        &[
            ("UPCLOUD_USERNAME", UPCLOUD_USERNAME),
            ("UPCLOUD_PASSWORD", "not-the-password"),
        ],
    );
    assert!(stderr.contains("HTTP 401"), "{stderr}");
    assert!(stderr.contains("AUTHENTICATION_FAILED"), "{stderr}");
    let requests = standin.api_requests("upcloud");
    assert_eq!(requests.len(), 1, "stops at the first refusal");
    assert_eq!(requests[0]["status"], 401);
}

#[test]
fn upcloud_missing_credentials_name_the_variables() {
    let standin = Standin::start(&[]);
    let script = prelude(
        "upcloud",
        upcloud_settings(&standin),
        json!({"hostname": "web-01", "infra": "demo"}),
    ) + "create-server $server $ctx";
    let stderr = nu_error(standin.dir(), &script, &[]);
    for name in ["UPCLOUD_USERNAME", "UPCLOUD_PASSWORD", "UPCLOUD_TOKEN"] {
        assert!(stderr.contains(name), "{name} not named: {stderr}");
    }
    assert!(
        standin.requests().is_empty(),
        "nothing is sent without credentials"
    );
}

#[test]
fn upcloud_endpoint_from_the_environment_and_a_stopped_server_is_started() {
    let standin = Standin::start(&[]);
    let mut settings = upcloud_settings(&standin);
    settings.as_object_mut().unwrap().remove("endpoint");
    let endpoint = standin.upcloud_endpoint();
    let mut env = UPCLOUD_BASIC.to_vec();
    env.push(("UPCLOUD_API_URL", &endpoint));
    let control = format!("http://127.0.0.1:{}/_standin/state", standin.port);
    let script = prelude("upcloud", settings, json!({"hostname": "web-01", "infra": "demo"}))
        + &format!(
            "let first = create-server $server $ctx
http post --content-type application/json '{control}' {{api: upcloud, id: $first.id, state: stopped}} | ignore
let stopped = server-status $server
let again = create-server $server $ctx
{{first: $first.id, stopped: $stopped.state, again: $again}}"
        );
    let result = nu_json(standin.dir(), &script, &env);
    assert_eq!(result["stopped"], "stopped");
    assert_eq!(result["again"]["id"], result["first"]);
    assert_eq!(result["again"]["state"], "started");
    let id = result["first"].as_str().unwrap();
    let starts = standin
        .api_requests("upcloud")
        .into_iter()
        .filter(|r| r["method"] == "POST" && r["path"] == format!("/1.3/server/{id}/start"))
        .count();
    assert_eq!(starts, 1);
}

#[test]
fn upcloud_server_exec_builds_the_ssh_command() {
    let standin = Standin::start(&[]);
    let (path, ssh_log) = fake_ssh(standin.dir());
    let mut settings = upcloud_settings(&standin);
    settings["wait_for_ssh"] = json!(true);
    settings["ssh_key"] = json!("/keys/id_ed25519");
    let script = prelude(
        "upcloud",
        settings,
        json!({"hostname": "web-01", "infra": "demo"}),
    ) + r#"
let created = create-server $server $ctx
let out = server-exec $server "printf '%s|' \"it's\" quoted; echo"
let failure = try { server-exec $server "echo partial; echo broken >&2; exit 3"; "no error" } catch {|e| $e.msg }
{created: $created, out: $out, failure: $failure}"#;
    let mut env = UPCLOUD_BASIC.to_vec();
    env.push(("PATH", &path));
    let result = nu_json(standin.dir(), &script, &env);
    assert_eq!(result["out"], "it's|quoted|\n");
    let failure = result["failure"].as_str().unwrap();
    assert!(failure.contains("exit code 3"), "{failure}");
    assert!(
        failure.contains("partial") && failure.contains("broken"),
        "{failure}"
    );
    let address = result["created"]["address"].as_str().unwrap();
    let calls = ssh_calls(&ssh_log);
    assert_eq!(calls.len(), 3, "wait_for_ssh, then two commands: {calls:?}");
    let target = format!("root@{address}");
    for call in &calls {
        for expected in [
            "BatchMode=yes",
            "StrictHostKeyChecking=accept-new",
            "/keys/id_ed25519",
            target.as_str(),
        ] {
            assert!(call.iter().any(|a| a == expected), "{expected} in {call:?}");
        }
    }
    assert_eq!(calls[0].last().unwrap(), "true", "the readiness probe");
    assert!(calls[1].last().unwrap().starts_with("sh -c '"), "{calls:?}");
}

// ---- AWS -----------------------------------------------------------------------------------

#[test]
fn aws_create_is_idempotent_then_status_and_terminate() {
    let standin = Standin::start(&[
        "--aws-session-token",
        AWS_SESSION_TOKEN,
        "--aws-region",
        AWS_REGION,
    ]);
    let script = prelude(
        "aws",
        aws_settings(&standin),
        json!({"hostname": "web-01", "infra": "demo", "instance_type": "t3.small", "disk_size": 30,
               "security_group_ids": ["sg-0123abcd"], "user_data": "#cloud-config\n"}),
    ) + LIFE_CYCLE;
    let mut env = AWS_CREDENTIALS.to_vec();
    env.push(("AWS_SESSION_TOKEN", AWS_SESSION_TOKEN));
    let result = nu_json(standin.dir(), &script, &env);

    let first = &result["first"];
    assert_eq!(first["hostname"], "web-01");
    assert_eq!(first["provider"], "aws");
    assert_eq!(first["state"], "running");
    let id = first["id"].as_str().expect("an id").to_string();
    assert!(id.starts_with("i-"), "{id}");
    assert!(
        first["address"].as_str().unwrap().starts_with("54."),
        "public address: {first}"
    );
    assert_eq!(
        result["second"], *first,
        "the second create returns the same instance"
    );
    assert_eq!(
        result["status"],
        json!({"hostname": "web-01", "exists": true, "state": "running"})
    );
    assert_eq!(
        result["after_delete"],
        json!({"hostname": "web-01", "exists": false, "state": "missing"})
    );

    let requests = standin.api_requests("aws");
    for r in &requests {
        assert_eq!(r["signature"], "valid", "SigV4 accepted: {r}");
        assert_eq!(r["credential"]["region"], AWS_REGION);
        assert_eq!(r["credential"]["access_key"], AWS_ACCESS_KEY_ID);
        assert_eq!(r["headers"]["x-amz-security-token"], AWS_SESSION_TOKEN);
        assert_eq!(r["params"]["Version"], "2016-11-15");
        assert_eq!(r["method"], "POST");
    }
    let runs: Vec<&Value> = requests
        .iter()
        .filter(|r| r["action"] == "RunInstances")
        .collect();
    assert_eq!(runs.len(), 1, "one RunInstances for two create-server");
    let p = &runs[0]["params"];
    assert_eq!(p["ImageId"], "ami-0123456789abcdef0");
    assert_eq!(p["InstanceType"], "t3.small");
    assert_eq!(p["MinCount"], "1");
    assert_eq!(p["MaxCount"], "1");
    assert_eq!(p["KeyName"], "deploy");
    assert_eq!(p["SecurityGroupId.1"], "sg-0123abcd");
    assert_eq!(p["TagSpecification.1.ResourceType"], "instance");
    assert_eq!(p["TagSpecification.1.Tag.1.Key"], "Name");
    assert_eq!(p["TagSpecification.1.Tag.1.Value"], "web-01");
    assert_eq!(p["BlockDeviceMapping.1.Ebs.VolumeSize"], "30");
    assert_eq!(p["UserData"], base64("#cloud-config\n"));
    // The first create looked for the Name tag among live instances before running one.
    let first_describe = &requests[0];
    assert_eq!(first_describe["action"], "DescribeInstances");
    assert_eq!(first_describe["params"]["Filter.1.Name"], "tag:Name");
    assert_eq!(first_describe["params"]["Filter.1.Value.1"], "web-01");
    assert_eq!(
        first_describe["params"]["Filter.2.Name"],
        "instance-state-name"
    );
    // A new instance unknown for a moment (eventual consistency) was waited out.
    assert!(
        requests
            .iter()
            .any(|r| r["error_code"] == "InvalidInstanceID.NotFound"),
        "the stand-in hides a new instance from the first describe"
    );
    let terminates: Vec<&Value> = requests
        .iter()
        .filter(|r| r["action"] == "TerminateInstances")
        .collect();
    assert_eq!(
        terminates.len(),
        1,
        "the second delete-server finds nothing"
    );
    assert_eq!(terminates[0]["params"]["InstanceId.1"], id.as_str());
}

#[test]
fn aws_wrong_secret_is_refused_by_the_signature_check() {
    let standin = Standin::start(&[]);
    let script = prelude(
        "aws",
        aws_settings(&standin),
        json!({"hostname": "web-01", "infra": "demo"}),
    ) + "create-server $server $ctx";
    let stderr = nu_error(
        standin.dir(),
        &script,
        &[
            ("AWS_ACCESS_KEY_ID", AWS_ACCESS_KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", "not/the/secret"),
        ],
    );
    assert!(stderr.contains("HTTP 403"), "{stderr}");
    assert!(stderr.contains("SignatureDoesNotMatch"), "{stderr}");
    let requests = standin.api_requests("aws");
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["signature"], "mismatch");

    let stderr = nu_error(
        standin.dir(),
        &script,
        &[
            ("AWS_ACCESS_KEY_ID", "AKIAUNKNOWN000000000"),
            ("AWS_SECRET_ACCESS_KEY", AWS_SECRET_ACCESS_KEY),
        ],
    );
    assert!(stderr.contains("HTTP 401"), "{stderr}");
    assert!(stderr.contains("AuthFailure"), "{stderr}");
}

#[test]
fn aws_missing_credentials_name_the_variables() {
    let standin = Standin::start(&[]);
    let script = prelude(
        "aws",
        aws_settings(&standin),
        json!({"hostname": "web-01", "infra": "demo"}),
    ) + "create-server $server $ctx";
    let stderr = nu_error(
        standin.dir(),
        &script,
        &[("AWS_ACCESS_KEY_ID", AWS_ACCESS_KEY_ID)],
    );
    for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        assert!(stderr.contains(name), "{name} not named: {stderr}");
    }
    assert!(
        standin.requests().is_empty(),
        "nothing is sent without credentials"
    );
}

#[test]
fn aws_endpoint_from_the_environment_and_a_stopped_instance_is_started() {
    let standin = Standin::start(&["--aws-region", AWS_REGION]);
    let mut settings = aws_settings(&standin);
    let settings_obj = settings.as_object_mut().unwrap();
    settings_obj.remove("endpoint");
    settings_obj.remove("region");
    let endpoint = standin.aws_endpoint();
    let mut env = AWS_CREDENTIALS.to_vec();
    env.push(("AWS_EC2_ENDPOINT", &endpoint));
    env.push(("AWS_REGION", AWS_REGION));
    let control = format!("http://127.0.0.1:{}/_standin/state", standin.port);
    let script = prelude("aws", settings, json!({"hostname": "web-01", "infra": "demo"}))
        + &format!(
            "let first = create-server $server $ctx
http post --content-type application/json '{control}' {{api: aws, id: $first.id, state: stopped}} | ignore
let stopped = server-status $server
let again = create-server $server $ctx
{{first: $first.id, stopped: $stopped.state, again: $again}}"
        );
    let result = nu_json(standin.dir(), &script, &env);
    assert_eq!(result["stopped"], "stopped");
    assert_eq!(result["again"]["id"], result["first"]);
    assert_eq!(result["again"]["state"], "running");
    let requests = standin.api_requests("aws");
    let starts: Vec<&Value> = requests
        .iter()
        .filter(|r| r["action"] == "StartInstances")
        .collect();
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0]["params"]["InstanceId.1"], result["first"]);
    assert!(requests.iter().all(|r| r["signature"] == "valid"));
}

#[test]
fn aws_server_exec_builds_the_ssh_command_with_sudo() {
    let standin = Standin::start(&[]);
    let (path, ssh_log) = fake_ssh(standin.dir());
    let mut settings = aws_settings(&standin);
    settings["wait_for_ssh"] = json!(true);
    let script = prelude(
        "aws",
        settings,
        json!({"hostname": "web-01", "infra": "demo"}),
    ) + r#"
let created = create-server $server $ctx
let out = server-exec $server "echo one; echo two"
let failure = try { server-exec $server "echo partial; exit 4"; "no error" } catch {|e| $e.msg }
{created: $created, out: $out, failure: $failure}"#;
    let mut env = AWS_CREDENTIALS.to_vec();
    env.push(("PATH", &path));
    let result = nu_json(standin.dir(), &script, &env);
    assert_eq!(result["out"], "one\ntwo\n");
    let failure = result["failure"].as_str().unwrap();
    assert!(
        failure.contains("exit code 4") && failure.contains("partial"),
        "{failure}"
    );
    let address = result["created"]["address"].as_str().unwrap();
    let calls = ssh_calls(&ssh_log);
    assert_eq!(calls.len(), 3, "{calls:?}");
    let target = format!("ec2-user@{address}");
    for call in &calls {
        assert!(call.contains(&target), "{target} in {call:?}");
    }
    assert_eq!(
        calls[1].last().unwrap(),
        "sudo -n sh -c 'echo one; echo two'"
    );
}

/// Standard base64 (for the expected Authorization and UserData values).
fn base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `GET path` on the daemon's HTTP shim with the admin token: the body.
fn admin_get(daemon: &orch_e2e::Daemon, port: u16, path: &str) -> String {
    let tokens: Value = serde_json::from_str(
        &std::fs::read_to_string(daemon.data_dir().join("tokens.json")).unwrap(),
    )
    .unwrap();
    let admin = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["role"] == "admin")
        .expect("an admin token")["token"]
        .as_str()
        .unwrap()
        .to_string();
    let out = Command::new("curl")
        .args(["-s", "--max-time", "60", "-H"])
        .arg(format!("Authorization: Bearer {admin}"))
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Workflows through the real daemon against the stand-in, with the credentials in the
/// infra's settings: workflow A creates up-01 (UpCloud) and ec2-01 (EC2); workflow B
/// names them too, creates up-02 and ec2-02, fails and rolls back. B's rollback deletes
/// only up-02 and ec2-02. The credentials authenticate every request, yet no task record
/// (`orch task`, `GET /tasks/N` as admin, `orch workflow show`) holds them.
#[test]
fn workflow_rollbacks_delete_only_their_own_cloud_servers_and_credentials_stay_out_of_records() {
    let standin = Standin::start(&[]);
    let port = orch_e2e::free_port();
    let daemon = orch_e2e::Daemon::start(&["--port", &port.to_string()]);
    let dir = daemon.dir().join("infra/cloud");
    std::fs::create_dir_all(&dir).unwrap();
    let mut upcloud = upcloud_settings(&standin);
    upcloud["username"] = json!(UPCLOUD_USERNAME);
    upcloud["password"] = json!(UPCLOUD_PASSWORD);
    let mut aws = aws_settings(&standin);
    aws["aws_access_key_id"] = json!(AWS_ACCESS_KEY_ID);
    aws["aws_secret_access_key"] = json!(AWS_SECRET_ACCESS_KEY);
    let settings = json!({
        "name": "cloud",
        "provider": "upcloud",
        "provider_settings": {"upcloud": upcloud, "aws": aws},
        "servers": [
            {"hostname": "up-01"}, {"hostname": "up-02"},
            {"hostname": "ec2-01", "provider": "aws"}, {"hostname": "ec2-02", "provider": "aws"},
        ],
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
    let nu = daemon.nu();
    let explain = |nu: &orch_e2e::Nu| {
        nu.try_run("orch tasks | each {|t| $'--- task ($t.id) ($t.status)\n(orch logs $t.id)' } | str join")
            .unwrap_or_else(|e| e)
    };

    let a = nu
        .json("orch workflow submit servers up-01 ec2-01 --infra cloud --wait | select id status");
    assert_eq!(a["status"], "succeeded", "{a}\n{}", explain(&nu));
    let b = json!({"name": "b", "rollback_enabled": true, "operations": [
        {"id": "up", "type": "server_create", "servers": ["up-01", "up-02"]},
        {"id": "ec2", "type": "server_create", "servers": ["ec2-01", "ec2-02"]},
        {"id": "boom", "type": "nu", "nu": "error make {msg: 'boom'}", "dependencies": ["up", "ec2"]},
    ]});
    let done = nu.json(&format!(
        "'{b}' | from json | orch workflow submit batch --infra cloud --wait | select id status"
    ));
    assert_eq!(done["status"], "rolled_back", "{done}\n{}", explain(&nu));

    // Every request authenticated with the settings' credentials.
    let requests = standin.requests();
    for r in requests.iter().filter(|r| r["api"] != "control") {
        assert!(
            r["status"].as_u64().unwrap() < 400 || r["error_code"] == "InvalidInstanceID.NotFound",
            "{r}"
        );
    }
    // B's rollback deleted only what B created.
    let upcloud_created: Vec<(String, String)> = requests
        .iter()
        .filter(|r| r["method"] == "POST" && r["path"] == "/1.3/server")
        .map(|r| {
            let body: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
            let labels = body["server"]["labels"]["label"]
                .as_array()
                .unwrap()
                .clone();
            let mark = labels
                .iter()
                .find(|l| l["key"] == "provisioning-created-by")
                .unwrap()["value"]
                .clone();
            (
                body["server"]["hostname"].as_str().unwrap().to_string(),
                mark.as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        upcloud_created,
        [
            ("up-01".into(), format!("{}/create:up-01", a["id"])),
            ("up-02".into(), format!("{}/up", done["id"]))
        ]
    );
    let deleted: Vec<&str> = requests
        .iter()
        .filter(|r| r["method"] == "DELETE")
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    let terminated: Vec<String> = requests
        .iter()
        .filter(|r| {
            r["body"]
                .as_str()
                .unwrap_or("")
                .contains("Action=TerminateInstances")
        })
        .map(|r| r["body"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(terminated.len(), 1, "{terminated:?}");
    let left = nu_json(
        standin.dir(),
        &(prelude(
            "upcloud",
            upcloud_settings(&standin),
            json!({"hostname": "up-01"}),
        ) + "[up-01 up-02] | each {|h| server-status {hostname: $h} | get state }"),
        UPCLOUD_BASIC,
    );
    assert_eq!(left, json!(["started", "missing"]));
    let left = nu_json(
        standin.dir(),
        &(prelude("aws", aws_settings(&standin), json!({"hostname": "ec2-01"}))
            + "[ec2-01 ec2-02] | each {|h| server-status {hostname: $h} | get state }"),
        AWS_CREDENTIALS,
    );
    assert_eq!(left, json!(["running", "missing"]));

    // No record holds a credential.
    let tasks = nu.run("orch tasks | get id | each {|id| orch task $id } | to json --raw");
    let workflows =
        nu.run("orch workflow list | get id | each {|id| orch workflow show $id } | to json --raw");
    let ids: Vec<u64> =
        serde_json::from_str::<Vec<Value>>(&nu.run("orch tasks | get id | to json --raw"))
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
    // A: two steps; B: three steps and two compensations.
    assert_eq!(ids.len(), 7, "{ids:?}");
    let http: String = ids
        .iter()
        .map(|id| admin_get(&daemon, port, &format!("/tasks/{id}")))
        .collect();
    assert!(http.contains("\"$secret\""), "{http}");
    for (what, text) in [
        ("orch task", &tasks),
        ("orch workflow show", &workflows),
        ("GET /tasks/N", &http),
    ] {
        for secret in [UPCLOUD_PASSWORD, AWS_SECRET_ACCESS_KEY] {
            assert!(!text.contains(secret), "{what} shows {secret}: {text}");
        }
    }
}

/// Issue 9: an ssh user that could be read as an option is refused before ssh runs, and
/// the destination always comes after `--`.
#[test]
fn ssh_targets_are_checked_and_come_after_a_double_dash() {
    for (provider, user) in [("upcloud", "root"), ("aws", "ec2-user")] {
        let standin = Standin::start(&[]);
        let (path, ssh_log) = fake_ssh(standin.dir());
        let mut settings = match provider {
            "upcloud" => upcloud_settings(&standin),
            _ => aws_settings(&standin),
        };
        settings["user"] = json!(user);
        let script = prelude(
            provider,
            settings,
            json!({"hostname": "web-01", "infra": "demo"}),
        ) + r#"
let created = create-server $server $ctx
server-exec $server "true" | ignore
let hostile = ($server | insert user "-oProxyCommand=touch pwned")
let refused = try { server-exec $hostile "true"; "no error" } catch {|e| $e.msg }
{created: $created, refused: $refused}"#;
        let mut env = match provider {
            "upcloud" => UPCLOUD_BASIC.to_vec(),
            _ => AWS_CREDENTIALS.to_vec(),
        };
        env.push(("PATH", &path));
        let result = nu_json(standin.dir(), &script, &env);
        let refused = result["refused"].as_str().unwrap();
        assert!(
            refused.contains("is not a valid user name"),
            "{provider}: {refused}"
        );
        let address = result["created"]["address"].as_str().unwrap();
        let calls = ssh_calls(&ssh_log);
        assert_eq!(
            calls.len(),
            1,
            "{provider}: only the valid user ran ssh: {calls:?}"
        );
        let target = format!("{user}@{address}");
        let at = calls[0]
            .iter()
            .position(|a| *a == target)
            .expect("the target");
        assert_eq!(calls[0][at - 1], "--", "{provider}: {:?}", calls[0]);
        assert!(!standin.dir().join("pwned").exists());
    }
}
