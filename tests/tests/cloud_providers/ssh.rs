//! Commands over SSH (the providers' shared module) for both providers, with a fake `ssh`
//! first on PATH: the command line, quoting, sudo, exit codes and output, and that no
//! setting can become an ssh option.

use serde_json::json;

use crate::aws::{Moto, aws_settings};
use crate::common::{fake_ssh, nu_json, prelude, ssh_calls};
use crate::upcloud::{Standin, UPCLOUD_BASIC, upcloud_settings};

#[test]
fn upcloud_server_exec_builds_the_ssh_command() {
    let standin = Standin::start();
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

#[test]
fn aws_server_exec_builds_the_ssh_command_with_sudo() {
    let moto = Moto::start();
    let (path, ssh_log) = fake_ssh(moto.dir());
    let mut settings = aws_settings(&moto);
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
    let mut env = moto.user_env().to_vec();
    env.push(("PATH", &path));
    let result = nu_json(moto.dir(), &script, &env);
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
    assert_eq!(calls[0].last().unwrap(), "true", "the readiness probe");
    assert_eq!(
        calls[1].last().unwrap(),
        "sudo -n sh -c 'echo one; echo two'"
    );
}

/// Issue 9: an ssh user that could be read as an option is refused before ssh runs, and
/// the destination always comes after `--`.
#[test]
fn ssh_targets_are_checked_and_come_after_a_double_dash() {
    let standin = Standin::start();
    let moto = Moto::start();
    for (provider, user, dir) in [
        ("upcloud", "root", standin.dir()),
        ("aws", "ec2-user", moto.dir()),
    ] {
        let (path, ssh_log) = fake_ssh(dir);
        let mut settings = match provider {
            "upcloud" => upcloud_settings(&standin),
            _ => aws_settings(&moto),
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
            _ => moto.user_env().to_vec(),
        };
        env.push(("PATH", &path));
        let result = nu_json(dir, &script, &env);
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
        assert!(!dir.join("pwned").exists());
    }
}
