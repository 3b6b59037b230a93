//! Commands over SSH (the providers' shared module) for both providers, with a fake `ssh`
//! first on PATH: the command line, quoting, sudo, exit codes and output, and that no
//! setting can become an ssh option.

use serde_json::json;

use crate::aws::{Moto, aws_settings};
use crate::common::{fake_ssh, nu_json, prelude, ssh_calls};
use crate::upcloud::{Standin, UPCLOUD_BASIC, upcloud_settings};

/// `server-exec` of both providers: options, key, user@address, the readiness probe, sh
/// quoting, sudo for a user other than root, output, and a failure's exit code and output.
#[test]
fn server_exec_builds_the_ssh_command_of_both_providers() {
    let standin = Standin::start();
    let moto = Moto::start();
    let script = r#"
let created = create-server $server $ctx
let out = server-exec $server "printf '%s|' \"it's\" quoted; echo"
let failure = try { server-exec $server "echo partial; echo broken >&2; exit 3"; "no error" } catch {|e| $e.msg }
{created: $created, out: $out, failure: $failure}"#;
    let cases = [
        (
            "upcloud",
            "root",
            "sh -c '",
            standin.dir(),
            upcloud_settings(&standin),
            UPCLOUD_BASIC.to_vec(),
        ),
        (
            "aws",
            "ec2-user",
            "sudo -n sh -c '",
            moto.dir(),
            aws_settings(&moto),
            moto.user_env().to_vec(),
        ),
    ];
    for (provider, user, remote, dir, mut settings, mut env) in cases {
        let (path, ssh_log) = fake_ssh(dir);
        settings["wait_for_ssh"] = json!(true);
        settings["ssh_key"] = json!("/keys/id_ed25519");
        let server = json!({"hostname": "web-01", "infra": "demo"});
        env.push(("PATH", &path));
        let result = nu_json(dir, &(prelude(provider, settings, server) + script), &env);
        assert_eq!(result["out"], "it's|quoted|\n", "{provider}");
        let failure = result["failure"].as_str().unwrap();
        assert!(
            failure.contains("exit code 3")
                && failure.contains("partial")
                && failure.contains("broken"),
            "{provider}: {failure}"
        );
        let address = result["created"]["address"].as_str().unwrap();
        let calls = ssh_calls(&ssh_log);
        assert_eq!(
            calls.len(),
            3,
            "{provider}: wait_for_ssh, then two commands: {calls:?}"
        );
        let target = format!("{user}@{address}");
        for call in &calls {
            for expected in [
                "BatchMode=yes",
                "StrictHostKeyChecking=accept-new",
                "/keys/id_ed25519",
                &target,
            ] {
                assert!(
                    call.iter().any(|a| a == expected),
                    "{provider}: {expected} in {call:?}"
                );
            }
        }
        assert_eq!(
            calls[0].last().unwrap(),
            "true",
            "{provider}: the readiness probe"
        );
        assert!(
            calls[1].last().unwrap().starts_with(remote),
            "{provider}: {calls:?}"
        );
    }
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
