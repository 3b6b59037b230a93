//! The aws provider through the real `aws` CLI against moto's EC2 emulator (authentication
//! on): what the module asks for is read back from moto's state, not from a log of our own.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Helper, LIFE_CYCLE, assert_life_cycle, base64, nu_error, nu_json, prelude};

pub const AWS_REGION: &str = "eu-north-1";
/// An AMI id of the right shape (moto accepts any).
const IMAGE: &str = "ami-0123456789abcdef0";

/// `tests/standins/moto_ec2.py`: moto in server mode on a free port, an IAM user allowed
/// EC2 and temporary credentials of a role; stopped when dropped, even when the test fails.
pub struct Moto {
    helper: Helper,
    endpoint: String,
    security_group: String,
    user: [String; 2],
    session: [String; 3],
}

impl Moto {
    pub fn start() -> Moto {
        let helper = Helper::start("moto_ec2.py", &["--region", AWS_REGION]);
        let ready: Value = serde_json::from_str(&helper.ready)
            .unwrap_or_else(|e| panic!("moto's first line ({e}): {}", helper.ready));
        let text = |pointer: &str| {
            ready
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap()
                .to_string()
        };
        Moto {
            endpoint: text("/endpoint"),
            security_group: text("/security_group_id"),
            user: [text("/user/access_key_id"), text("/user/secret_access_key")],
            session: [
                text("/session/access_key_id"),
                text("/session/secret_access_key"),
                text("/session/session_token"),
            ],
            helper,
        }
    }

    pub fn dir(&self) -> &Path {
        self.helper.dir()
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The IAM user's key, as the module reads it from the environment.
    pub fn user_env(&self) -> [(&str, &str); 2] {
        [
            ("AWS_ACCESS_KEY_ID", &self.user[0]),
            ("AWS_SECRET_ACCESS_KEY", &self.user[1]),
        ]
    }

    /// The IAM user's secret key.
    pub fn secret(&self) -> &str {
        &self.user[1]
    }

    /// `aws ec2 <args>` against moto as the IAM user, outside the module: its JSON answer.
    pub fn ec2(&self, args: &[&str]) -> Value {
        let out = Command::new("aws")
            .args(["--endpoint-url", &self.endpoint, "--region", AWS_REGION])
            .args(["--output", "json", "ec2"])
            .args(args)
            .envs(self.user_env())
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_PROFILE")
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .stdin(Stdio::null())
            .output()
            .expect("the aws CLI runs (the README's test command installs it)");
        assert!(
            out.status.success(),
            "aws ec2 {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// Every instance moto knows, terminated ones included.
    pub fn instances(&self) -> Vec<Value> {
        let answer = self.ec2(&["describe-instances"]);
        answer["Reservations"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["Instances"].as_array().unwrap().clone())
            .collect()
    }

    /// The instances tagged Name=`hostname`, with their state and tags.
    pub fn named(&self, hostname: &str) -> Vec<Value> {
        self.instances()
            .into_iter()
            .filter(|i| tag(i, "Name").as_deref() == Some(hostname))
            .collect()
    }
}

/// The value of an instance's tag.
pub fn tag(instance: &Value, key: &str) -> Option<String> {
    instance["Tags"]
        .as_array()?
        .iter()
        .find(|t| t["Key"] == key)
        .and_then(|t| t["Value"].as_str().map(str::to_string))
}

/// Settings pointing the module at moto, polling fast, without the SSH wait.
pub fn aws_settings(moto: &Moto) -> Value {
    json!({
        "endpoint": moto.endpoint(),
        "region": AWS_REGION,
        "image": IMAGE,
        "key_name": "deploy",
        "poll_interval": "20ms",
        "timeout": "20s",
        "wait_for_ssh": false,
    })
}

#[test]
fn aws_create_is_idempotent_then_status_and_terminate() {
    let moto = Moto::start();
    let server = json!({"hostname": "web-01", "infra": "demo", "instance_type": "t3.small",
        "security_group_ids": [moto.security_group], "user_data": "#cloud-config\n"});
    // Temporary credentials: moto refuses them without their session token.
    let script = prelude("aws", aws_settings(&moto), server) + LIFE_CYCLE;
    let env = [
        ("AWS_ACCESS_KEY_ID", moto.session[0].as_str()),
        ("AWS_SECRET_ACCESS_KEY", &moto.session[1]),
        ("AWS_SESSION_TOKEN", &moto.session[2]),
    ];
    let result = nu_json(moto.dir(), &script, &env);

    let first = &result["first"];
    assert_eq!(first["provider"], "aws");
    assert_eq!(first["state"], "running");
    let id = first["id"].as_str().expect("an id").to_string();
    assert_life_cycle(&result, "running");

    // What moto holds: one instance, as asked, tagged, terminated.
    let instances = moto.named("web-01");
    assert_eq!(instances.len(), 1, "one RunInstances: {instances:?}");
    let instance = &instances[0];
    assert_eq!(instance["InstanceId"], id.as_str());
    assert!(
        first["address"]
            .as_str()
            .is_some_and(|a| a.parse::<std::net::Ipv4Addr>().is_ok()),
        "{first}"
    );
    assert_eq!(instance["State"]["Name"], "terminated");
    assert_eq!(instance["InstanceType"], "t3.small");
    assert_eq!(instance["ImageId"], IMAGE);
    assert_eq!(instance["KeyName"], "deploy");
    assert_eq!(
        instance["SecurityGroups"][0]["GroupId"],
        moto.security_group.as_str()
    );
    for (key, value) in [
        ("managed-by", "provisioning"),
        ("provisioning-infra", "demo"),
        ("provisioning-created-by", "1/create-server@web-01"),
    ] {
        assert_eq!(tag(instance, key).as_deref(), Some(value), "{instance}");
    }
    let user_data = moto.ec2(&[
        "describe-instance-attribute",
        "--instance-id",
        &id,
        "--attribute",
        "userData",
    ]);
    assert_eq!(user_data["UserData"]["Value"], base64("#cloud-config\n"));
}

#[test]
fn aws_wrong_or_missing_credentials_are_a_clear_error() {
    let moto = Moto::start();
    let script = prelude(
        "aws",
        aws_settings(&moto),
        json!({"hostname": "web-01", "infra": "demo"}),
    ) + "create-server $server $ctx";
    let wrong_secret = [
        ("AWS_ACCESS_KEY_ID", moto.user[0].as_str()),
        ("AWS_SECRET_ACCESS_KEY", "not/the/secret"),
    ];
    let unknown_key = [
        ("AWS_ACCESS_KEY_ID", "AKIAUNKNOWN000000000"),
        ("AWS_SECRET_ACCESS_KEY", &moto.user[1]),
    ];
    for env in [wrong_secret, unknown_key] {
        let stderr = nu_error(moto.dir(), &script, &env);
        assert!(
            stderr.contains("EC2 DescribeInstances failed: AuthFailure"),
            "{stderr}"
        );
    }
    let stderr = nu_error(moto.dir(), &script, &[("AWS_ACCESS_KEY_ID", &moto.user[0])]);
    for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        assert!(stderr.contains(name), "{name} not named: {stderr}");
    }
    assert!(moto.instances().is_empty(), "nothing was created");
}

#[test]
fn aws_endpoint_from_the_environment_and_a_stopped_instance_is_started() {
    let moto = Moto::start();
    let mut settings = aws_settings(&moto);
    let settings_obj = settings.as_object_mut().unwrap();
    settings_obj.remove("endpoint");
    settings_obj.remove("region");
    let mut env = moto.user_env().to_vec();
    env.push(("AWS_EC2_ENDPOINT", moto.endpoint()));
    env.push(("AWS_REGION", AWS_REGION));
    let server = json!({"hostname": "web-01", "infra": "demo", "disk_size": 30});
    let prelude = prelude("aws", settings, server);
    let first = nu_json(
        moto.dir(),
        &(prelude.clone() + "create-server $server $ctx | get id"),
        &env,
    );
    let first = first.as_str().unwrap();
    moto.ec2(&["stop-instances", "--instance-ids", first]);
    let script = prelude
        + "{stopped: (server-status $server | get state), again: (create-server $server $ctx)}";
    let result = nu_json(moto.dir(), &script, &env);
    assert_eq!(result["stopped"], "stopped");
    assert_eq!(result["again"]["id"], first);
    assert_eq!(result["again"]["state"], "running");
    let instances = moto.named("web-01");
    assert_eq!(instances.len(), 1, "started, not created again");
    // The root volume has the size asked for (disk_size), on the AMI's root device.
    let root = &instances[0]["BlockDeviceMappings"][0];
    assert_eq!(root["DeviceName"], "/dev/xvda", "{root}");
    let volume = root["Ebs"]["VolumeId"].as_str().unwrap();
    let volumes = moto.ec2(&["describe-volumes", "--volume-ids", volume]);
    assert_eq!(volumes["Volumes"][0]["Size"], 30, "{volumes}");
}
