//! The daemon's HTTP shim from the tests: a daemon serving `--port` on a free port, its
//! tokens by role, and requests through `curl` (as a user would make them).

use std::process::Command;

use serde_json::{Map, Value};

use crate::Daemon;

/// The secrets of the daemon's `tokens.json`, by role (the first token of each role).
pub fn tokens_by_role(daemon: &Daemon) -> Map<String, Value> {
    let path = daemon.data_dir().join("tokens.json");
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (is HTTP on?)", path.display())),
    )
    .expect("tokens.json is JSON");
    let mut tokens = Map::new();
    for token in file["tokens"].as_array().expect("a list of tokens") {
        let role = token["role"].as_str().expect("a role").to_string();
        tokens.entry(role).or_insert_with(|| token["token"].clone());
    }
    tokens
}

/// The secret of the daemon's first token with `role`.
pub fn token(daemon: &Daemon, role: &str) -> String {
    tokens_by_role(daemon)[role]
        .as_str()
        .unwrap_or_else(|| panic!("no {role} token"))
        .to_string()
}

/// A daemon serving HTTP on a free port, with its tokens by role (read at start).
pub struct Shim {
    /// The daemon (its workspace is its directory).
    pub daemon: Daemon,
    /// The HTTP port on 127.0.0.1.
    pub port: u16,
    tokens: Map<String, Value>,
}

impl Shim {
    /// Starts a daemon with `--port <free port>` and `extra` flags.
    pub fn start(extra: &[&str]) -> Shim {
        let port = crate::free_port();
        let port_arg = port.to_string();
        let mut args = vec!["--port", port_arg.as_str()];
        args.extend_from_slice(extra);
        let daemon = Daemon::start(&args);
        let tokens = tokens_by_role(&daemon);
        Shim {
            daemon,
            port,
            tokens,
        }
    }

    /// [`Shim::start`] whose workspace holds an infra `lab` of one local server `h1` with
    /// redis (the HTTP tests' infra).
    pub fn lab() -> Shim {
        Shim::start(&[]).with_infra(
            "lab",
            "provider = \"local\"\n[[servers]]\nhostname = \"h1\"\ntaskservs = [\"redis\"]\n",
        )
    }

    /// Writes `<workspace>/infra/<name>/settings.toml`.
    pub fn with_infra(self, name: &str, settings_toml: &str) -> Shim {
        let infra = self.daemon.dir().join("infra").join(name);
        std::fs::create_dir_all(&infra).expect("the infra directory");
        std::fs::write(infra.join("settings.toml"), settings_toml).expect("the settings file");
        self
    }

    /// The daemon's workspace (where it was started).
    pub fn workspace(&self) -> String {
        self.daemon.dir().display().to_string()
    }

    /// The secret of the token with `role`.
    pub fn token(&self, role: &str) -> &str {
        self.tokens
            .get(role)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no {role} token"))
    }

    /// `http://127.0.0.1:PORT<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `curl -X method` with `token` (none: no Authorization header) and `extra` curl
    /// options: (status, body); status 0 when curl got no answer.
    pub fn curl(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        extra: &[&str],
    ) -> (u16, String) {
        let mut command = Command::new("curl");
        command.args(["-s", "--max-time", "120", "-X", method]);
        command.args(["-w", "\n%{http_code}"]);
        if let Some(token) = token {
            command.args(["-H", &format!("Authorization: Bearer {token}")]);
        }
        let out = command
            .args(extra)
            .arg(self.url(path))
            .output()
            .expect("curl runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
        (status.trim().parse().unwrap_or(0), body.to_string())
    }

    /// A request as `who` (a role's token, or `who` itself as the token; none: no
    /// token) with a JSON body (sent from a file, so it may be megabytes): (status, body).
    pub fn call(
        &self,
        who: Option<&str>,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, String) {
        let token = who.map(|who| self.tokens.get(who).and_then(Value::as_str).unwrap_or(who));
        let Some(body) = body else {
            return self.curl(token, method, path, &[]);
        };
        let file = self.daemon.dir().join("body.json");
        std::fs::write(&file, body.to_string()).expect("the body file");
        let data = format!("@{}", file.display());
        let extra = [
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &data,
        ];
        self.curl(token, method, path, &extra)
    }

    /// [`Shim::call`] with the body read as JSON (a string when it is not JSON).
    pub fn call_json(
        &self,
        who: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let (status, text) = self.call(Some(who), method, path, body);
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// [`Shim::call_json`] that must answer `expect`; the body.
    pub fn json(
        &self,
        who: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
        expect: u16,
    ) -> Value {
        let (status, body) = self.call_json(who, method, path, body);
        assert_eq!(status, expect, "{method} {path}: {body}");
        body
    }
}
