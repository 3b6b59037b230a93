//! Finding an infra in a workspace and reading its settings file.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

/// The settings file names tried, in order, when a request names none.
const DEFAULT_SETTINGS: [&str; 4] = [
    "settings.toml",
    "settings.yaml",
    "settings.yml",
    "settings.json",
];

/// An infra: its directory and its parsed settings.
#[derive(Debug, Clone)]
pub struct Infra {
    /// Its name (the settings' `name`, else the directory's).
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// The settings file that was read.
    pub settings_file: PathBuf,
    /// The whole settings document (handed to scripts as `ctx.infra.settings`).
    pub settings: Value,
    /// The infra's default provider.
    pub provider: Option<String>,
    /// Its servers, in the settings' order.
    pub servers: Vec<Server>,
}

/// A server entry of the settings.
#[derive(Debug, Clone)]
pub struct Server {
    /// Its hostname.
    pub hostname: String,
    /// Its provider (the entry's, else the infra's).
    pub provider: String,
    /// Taskservs to install on it when it is created.
    pub taskservs: Vec<String>,
    /// The whole entry, with `provider` and `infra` filled in.
    pub record: Value,
}

#[derive(Deserialize)]
struct Settings {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    servers: Vec<Map<String, Value>>,
}

impl Infra {
    /// Finds `infra` (a name or a path) in `workspace` and reads its settings.
    pub fn load(workspace: &Path, infra: &str, settings: Option<&str>) -> Result<Infra, String> {
        if infra.trim().is_empty() {
            return Err("`infra` is empty".into());
        }
        let dir = find_dir(workspace, infra)?;
        let settings_file = find_settings(&dir, infra, settings)?;
        let value = read_settings(&settings_file)?;
        let parsed: Settings = serde_json::from_value(value.clone()).map_err(|e| {
            format!(
                "infra `{infra}`: {} is not valid settings: {e}",
                settings_file.display()
            )
        })?;
        let name = parsed.name.clone().unwrap_or_else(|| {
            dir.file_name()
                .map_or_else(|| infra.to_string(), |n| n.to_string_lossy().into_owned())
        });
        let servers = servers(&name, &parsed, &settings_file)?;
        Ok(Infra {
            name,
            dir,
            settings_file,
            settings: value,
            provider: parsed.provider,
            servers,
        })
    }

    /// The servers named (all when `names` is empty), or an error naming an unknown one.
    pub fn select(&self, names: &[String]) -> Result<Vec<&Server>, String> {
        if names.is_empty() {
            if self.servers.is_empty() {
                return Err(format!(
                    "infra `{}` has no servers in {}",
                    self.name,
                    self.settings_file.display()
                ));
            }
            return Ok(self.servers.iter().collect());
        }
        names
            .iter()
            .map(|name| {
                self.servers
                    .iter()
                    .find(|s| &s.hostname == name)
                    .ok_or_else(|| {
                        let known: Vec<&str> =
                            self.servers.iter().map(|s| s.hostname.as_str()).collect();
                        format!(
                            "unknown server `{name}` in infra `{}` (its servers: {})",
                            self.name,
                            if known.is_empty() {
                                "none".to_string()
                            } else {
                                known.join(", ")
                            }
                        )
                    })
            })
            .collect()
    }

    /// `ctx.infra` for scripts.
    pub fn context(&self) -> Value {
        serde_json::json!({
            "name": self.name,
            "dir": self.dir,
            "settings": self.settings,
        })
    }
}

fn find_dir(workspace: &Path, infra: &str) -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = if infra.contains('/') {
        vec![workspace.join(infra)]
    } else {
        vec![workspace.join("infra").join(infra), workspace.join(infra)]
    };
    candidates
        .iter()
        .find(|c| c.is_dir())
        .map(|c| c.canonicalize().unwrap_or_else(|_| c.clone()))
        .ok_or_else(|| {
            let tried: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
            format!(
                "unknown infra `{infra}`: no directory {}",
                tried.join(" or ")
            )
        })
}

fn find_settings(dir: &Path, infra: &str, named: Option<&str>) -> Result<PathBuf, String> {
    if let Some(named) = named {
        let path = dir.join(named);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "infra `{infra}` has no settings file {}",
                path.display()
            ))
        };
    }
    DEFAULT_SETTINGS
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "infra `{infra}` has no settings file in {} (looked for {})",
                dir.display(),
                DEFAULT_SETTINGS.join(", ")
            )
        })
}

fn read_settings(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let parsed = match extension {
        "yaml" | "yml" => serde_yaml::from_str::<Value>(&text).map_err(|e| e.to_string()),
        "json" => serde_json::from_str::<Value>(&text).map_err(|e| e.to_string()),
        "toml" => toml::from_str::<Value>(&text).map_err(|e| e.to_string()),
        other => Err(format!(
            "the format `.{other}` is not known (use .toml, .yaml, .yml or .json)"
        )),
    };
    let value = parsed.map_err(|e| format!("{} is not valid: {}", path.display(), e.trim()))?;
    if !value.is_object() {
        return Err(format!(
            "{} must hold a table/record at the top",
            path.display()
        ));
    }
    Ok(value)
}

fn servers(infra: &str, settings: &Settings, file: &Path) -> Result<Vec<Server>, String> {
    let mut servers: Vec<Server> = Vec::new();
    for (i, entry) in settings.servers.iter().enumerate() {
        let field = |name: &str| format!("{}: servers[{i}].{name}", file.display());
        let hostname = match entry.get("hostname") {
            Some(Value::String(h)) if !h.trim().is_empty() => h.clone(),
            _ => return Err(format!("{} must be a non-empty string", field("hostname"))),
        };
        if servers.iter().any(|s| s.hostname == hostname) {
            return Err(format!(
                "{}: hostname `{hostname}` appears twice",
                file.display()
            ));
        }
        let provider = match entry.get("provider") {
            Some(Value::String(p)) => p.clone(),
            Some(_) => return Err(format!("{} must be a string", field("provider"))),
            None => settings.provider.clone().ok_or_else(|| {
                format!(
                    "server `{hostname}` has no provider and the infra sets no default `provider` ({})",
                    file.display()
                )
            })?,
        };
        let taskservs = match entry.get("taskservs") {
            None => Vec::new(),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|_| format!("{} must be a list of names", field("taskservs")))?,
        };
        let mut record = entry.clone();
        record.insert("provider".into(), Value::String(provider.clone()));
        record.insert("infra".into(), Value::String(infra.to_string()));
        servers.push(Server {
            hostname,
            provider,
            taskservs,
            record: Value::Object(record),
        });
    }
    Ok(servers)
}
