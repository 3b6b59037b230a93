//! Provider credentials stay out of task records: in a step's context, the value of every
//! secret-looking key of the infra's settings (the audit log's rule,
//! [`crate::audit::is_secret_name`]) is replaced by a reference, `{"$secret": [path]}`,
//! the path of the value in the infra's settings file. The step's code reads the file at
//! run time and puts the values back ([`RESOLVE_NU`]), so nothing secret is written to the
//! store, shown by `orch task` or `GET /tasks/N`, or copied into the workflow record.

use serde_json::{Value, json};

use crate::audit::is_secret_name;

/// The key of a secret reference.
const REFERENCE: &str = "$secret";

/// Replaces the secrets of the step context `ctx` by references into `settings` (the
/// infra's settings document): those of `ctx.infra.settings`, and those of every server
/// record (`ctx.server`, `ctx.servers`, `ctx.node_servers`), found by hostname among the
/// settings' `servers`. Returns whether it made any reference (only then does the step
/// need [`RESOLVE_NU`]).
pub fn reference(ctx: &mut Value, settings: &Value) -> bool {
    let Some(map) = ctx.as_object_mut() else {
        return false;
    };
    let mut made = false;
    if let Some(infra_settings) = map.get_mut("infra").and_then(|i| i.get_mut("settings")) {
        made |= replace(infra_settings, &mut Vec::new());
    }
    let mut records: Vec<&mut Value> = Vec::new();
    for (key, value) in map.iter_mut() {
        match (key.as_str(), value) {
            ("server", v) => records.push(v),
            ("servers", Value::Array(items)) => records.extend(items.iter_mut()),
            ("node_servers", Value::Object(nodes)) => records.extend(nodes.values_mut()),
            _ => {}
        }
    }
    for record in records {
        made |= server_record(record, settings);
    }
    made
}

/// A server record's secrets, as references to its entry in the settings' `servers`;
/// whether it made any.
fn server_record(record: &mut Value, settings: &Value) -> bool {
    let hostname = record.get("hostname").and_then(Value::as_str);
    let listed = settings
        .get("servers")
        .and_then(Value::as_array)
        .is_some_and(|servers| {
            servers
                .iter()
                .any(|s| s.get("hostname").and_then(Value::as_str) == hostname)
        });
    match hostname.filter(|_| listed) {
        // By hostname, not position: the settings may be reordered before the step runs.
        Some(hostname) => replace(
            record,
            &mut vec![json!("servers"), json!({ "hostname": hostname })],
        ),
        // Not from the settings (a cluster's node): nothing of it can be resolved.
        None => {
            crate::audit::redact(record);
            false
        }
    }
}

/// Replaces, under `value` (found at `path` in the settings), each secret-looking key's
/// value by a reference to it; whether it replaced any.
fn replace(value: &mut Value, path: &mut Vec<Value>) -> bool {
    let mut made = false;
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                path.push(json!(key));
                if is_secret_name(key) {
                    *item = json!({ REFERENCE: path.clone() });
                    made = true;
                } else {
                    made |= replace(item, path);
                }
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                path.push(json!(i));
                made |= replace(item, path);
                path.pop();
            }
        }
        _ => {}
    }
    made
}

/// Nushell code that puts the secrets back into `$params` (and `$env.ORCH_PARAMS`, which
/// the providers read when they get no context) from `$params.infra.settings_file`, read
/// now. A step without references reads nothing.
pub const RESOLVE_NU: &str = r#"# The value at `path` in the settings; a `{hostname}` step picks that server of a list.
def secret-at [settings: record, path: list]: nothing -> any {
    $path | reduce --fold $settings {|key, acc|
        if $acc == null {
            null
        } else if ($key | describe | str starts-with "record") {
            $acc | where {|s| $s.hostname? == $key.hostname } | get -o 0
        } else {
            try { $acc | get ([$key] | into cell-path) } catch { null }
        }
    }
}
def resolve-secrets [value: any, settings: record, file: string]: nothing -> any {
    let type = ($value | describe --detailed | get type)
    if $type == "record" {
        if ($value | columns) == ["$secret"] {
            let path = ($value | get "$secret")
            let found = (secret-at $settings $path)
            if $found == null {
                let shown = ($path | each {|k| if ($k | describe | str starts-with "record") { $"[hostname=($k.hostname)]" } else { $"($k)" } } | str join '.')
                error make {msg: $"the secret `($shown)` of the infra's settings is no longer in ($file)"}
            }
            return $found
        }
        $value | columns | reduce --fold $value {|key, acc| $acc | update $key (resolve-secrets ($acc | get $key) $settings $file) }
    } else if $type in [list table] {
        $value | each {|item| resolve-secrets $item $settings $file }
    } else { $value }
}
let secrets_file = if ($params | to json -r | str contains '"$secret"') { $params.infra?.settings_file? } else { null }
let params = if $secrets_file != null {
    let settings = (try { open $secrets_file } catch {|e| error make {msg: $"cannot read the infra's settings ($secrets_file) for its secrets: ($e.msg)"} })
    resolve-secrets $params $settings $secrets_file
} else { $params }
if $secrets_file != null {
    # Large params came in a private file (an environment variable that large would make
    # every external command of the step fail): the resolved ones go back there.
    if ($env.ORCH_PARAMS_FILE? | is-not-empty) {
        $params | to json -r | save --force $env.ORCH_PARAMS_FILE
    } else {
        $env.ORCH_PARAMS = ($params | to json -r)
    }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_become_references_into_the_settings() {
        let settings = json!({
            "provider_settings": {"upcloud": {"zone": "de-fra1", "password": "p"}},
            "servers": [{"hostname": "a"}, {"hostname": "b", "api_token": "t"}],
        });
        let mut ctx = json!({
            "infra": {"name": "x", "settings": settings.clone()},
            "server": {"hostname": "b", "api_token": "t", "infra": "x"},
            "servers": [{"hostname": "b", "api_token": "t"}],
            "node_servers": {"n": {"hostname": "n", "password": "q"}},
        });
        assert!(reference(&mut ctx, &settings));
        assert!(reference(&mut ctx, &settings), "a reference stays one");
        let mut plain =
            json!({"infra": {"settings": {"zone": "z"}}, "servers": [{"hostname": "a"}]});
        assert!(!reference(&mut plain, &settings));
        assert_eq!(
            ctx["infra"]["settings"]["provider_settings"]["upcloud"],
            json!({"zone": "de-fra1", "password": {"$secret": ["provider_settings", "upcloud", "password"]}})
        );
        let server = json!({"$secret": ["servers", {"hostname": "b"}, "api_token"]});
        assert_eq!(ctx["server"]["api_token"], server);
        assert_eq!(ctx["servers"][0]["api_token"], server);
        assert_eq!(ctx["node_servers"]["n"]["password"], "[redacted]");
        assert!(!ctx.to_string().contains("\"p\""), "{ctx}");
    }
}
