//! Workflows through the real daemon with both cloud providers: rollbacks delete only what
//! their own steps created, and the settings' credentials stay out of every record.

use serde_json::{Value, json};

use crate::aws::{Moto, aws_settings, tag};
use crate::common::{nu_json, prelude};
use crate::upcloud::{
    Standin, UPCLOUD_BASIC, UPCLOUD_PASSWORD, UPCLOUD_USERNAME, upcloud_settings,
};

/// Workflow A creates up-01 (UpCloud) and ec2-01 (EC2); workflow B names them too, creates
/// up-02 and ec2-02, fails and rolls back. B's rollback deletes only up-02 and ec2-02. The
/// credentials, in the infra's settings, authenticate every request, yet no task record
/// (`orch task`, `GET /tasks/N` as admin, `orch workflow show`) holds them.
#[test]
fn workflow_rollbacks_delete_only_their_own_cloud_servers_and_credentials_stay_out_of_records() {
    let standin = Standin::start();
    let moto = Moto::start();
    let shim = orch_e2e::http::Shim::start(&[]);
    let daemon = &shim.daemon;
    let dir = daemon.dir().join("infra/cloud");
    std::fs::create_dir_all(&dir).unwrap();
    let mut upcloud = upcloud_settings(&standin);
    upcloud["username"] = json!(UPCLOUD_USERNAME);
    upcloud["password"] = json!(UPCLOUD_PASSWORD);
    let mut aws = aws_settings(&moto);
    let [(_, key), (_, secret)] = moto.user_env();
    aws["aws_access_key_id"] = json!(key);
    aws["aws_secret_access_key"] = json!(secret);
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

    let a = nu
        .json("orch workflow submit servers up-01 ec2-01 --infra cloud --wait | select id status");
    assert_eq!(a["status"], "succeeded", "{a}\n{}", nu.task_logs());
    let b = json!({"name": "b", "rollback_enabled": true, "operations": [
        {"id": "up", "type": "server_create", "servers": ["up-01", "up-02"]},
        {"id": "ec2", "type": "server_create", "servers": ["ec2-01", "ec2-02"]},
        {"id": "boom", "type": "nu", "nu": "error make {msg: 'boom'}", "dependencies": ["up", "ec2"]},
    ]});
    let done = nu.json(&format!(
        "'{b}' | from json | orch workflow submit batch --infra cloud --wait | select id status"
    ));
    assert_eq!(done["status"], "rolled_back", "{done}\n{}", nu.task_logs());

    // UpCloud: every request authenticated; each server created once, with its step's
    // mark; B's rollback deleted only up-02.
    let requests = standin.requests();
    assert!(
        requests.iter().all(|r| r["status"].as_u64().unwrap() < 400),
        "{requests:?}"
    );
    let created: Vec<(String, String)> = standin
        .create_bodies()
        .iter()
        .map(|body| {
            let label = body["server"]["labels"]["label"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["key"] == "provisioning-created-by")
                .unwrap()["value"]
                .clone();
            (
                body["server"]["hostname"].as_str().unwrap().to_string(),
                label.as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        created,
        [
            ("up-01".into(), format!("{}/create:up-01", a["id"])),
            ("up-02".into(), format!("{}/up", done["id"]))
        ]
    );
    let deleted = requests.iter().filter(|r| r["method"] == "DELETE").count();
    assert_eq!(deleted, 1);
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

    // EC2 (moto's state): ec2-01 runs with A's mark; ec2-02, B's, is the one terminated.
    let states: Vec<(String, String, String)> = moto
        .instances()
        .iter()
        .map(|i| {
            (
                tag(i, "Name").unwrap(),
                tag(i, "provisioning-created-by").unwrap(),
                i["State"]["Name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut states = states;
    states.sort();
    assert_eq!(
        states,
        [
            (
                "ec2-01".into(),
                format!("{}/create:ec2-01", a["id"]),
                "running".into()
            ),
            (
                "ec2-02".into(),
                format!("{}/ec2", done["id"]),
                "terminated".into()
            )
        ]
    );

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
        .map(|id| {
            shim.call(Some("admin"), "GET", &format!("/tasks/{id}"), None)
                .1
        })
        .collect();
    assert!(http.contains("\"$secret\""), "{http}");
    for (what, text) in [
        ("orch task", &tasks),
        ("orch workflow show", &workflows),
        ("GET /tasks/N", &http),
    ] {
        for secret in [UPCLOUD_PASSWORD, moto.secret()] {
            assert!(!text.contains(secret), "{what} shows {secret}: {text}");
        }
    }
}
