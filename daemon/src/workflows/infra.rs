//! Finding an infra in a workspace and reading its settings file.
//!
//! Infra and settings names are plain names resolved inside the workspace (never in the
//! daemon's data directory), and an error never tells whether a file outside exists.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::ExpandError;

/// The settings file names tried, in order, when a request names none.
const DEFAULT_SETTINGS: [&str; 4] = [
    "settings.toml",
    "settings.yaml",
    "settings.yml",
    "settings.json",
];

/// The file extensions a settings file may have.
const SETTINGS_EXTENSIONS: [&str; 4] = ["toml", "yaml", "yml", "json"];

/// Where infras are looked up: the workspace, and the daemon's data directory, which is
/// never an infra even when it lies in the workspace.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The workspace.
    pub workspace: &'a Path,
    /// The daemon's data directory.
    pub data_dir: &'a Path,
}

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
    /// Finds the infra named `infra` in the workspace of `place` and reads its settings.
    pub fn load(place: Place, infra: &str, settings: Option<&str>) -> Result<Infra, ExpandError> {
        super::names::plain("infra", infra)?;
        let dir = find_dir(place, infra)?;
        let settings_file = find_settings(&dir, infra, settings)?;
        let value = read_settings(&settings_file).map_err(ExpandError::Settings)?;
        let parsed: Settings = serde_json::from_value(value.clone()).map_err(|e| {
            ExpandError::Settings(format!(
                "infra `{infra}`: {} is not valid settings: {e}",
                settings_file.display()
            ))
        })?;
        let name = parsed.name.clone().unwrap_or_else(|| infra.to_string());
        if !super::names::is_plain(&name) {
            return Err(ExpandError::Settings(format!(
                "{}: `name` `{}` is not a plain name (letters, digits, `-`, `_` or `.`)",
                settings_file.display(),
                super::names::shown(&name)
            )));
        }
        let servers = servers(&name, &parsed, &settings_file).map_err(ExpandError::Settings)?;
        Ok(Infra {
            name,
            dir,
            settings_file,
            settings: value,
            provider: parsed.provider,
            servers,
        })
    }

    /// The servers named (all when `names` is empty), or an error naming an unknown or a
    /// repeated one.
    pub fn select(&self, names: &[String]) -> Result<Vec<&Server>, ExpandError> {
        if names.is_empty() {
            if self.servers.is_empty() {
                return Err(ExpandError::Settings(format!(
                    "infra `{}` has no servers in {}",
                    self.name,
                    self.settings_file.display()
                )));
            }
            return Ok(self.servers.iter().collect());
        }
        let by_name: HashMap<&str, &Server> = self
            .servers
            .iter()
            .map(|s| (s.hostname.as_str(), s))
            .collect();
        let mut seen = HashSet::with_capacity(names.len().min(self.servers.len()));
        names
            .iter()
            .map(|name| {
                let server = by_name
                    .get(name.as_str())
                    .copied()
                    .ok_or_else(|| self.unknown_server(name))?;
                if !seen.insert(name.as_str()) {
                    return Err(ExpandError::Invalid(format!(
                        "`servers`: `{}` is named twice (each server at most once)",
                        super::names::shown(name)
                    )));
                }
                Ok(server)
            })
            .collect()
    }

    fn unknown_server(&self, name: &str) -> ExpandError {
        let known: Vec<&str> = self.servers.iter().map(|s| s.hostname.as_str()).collect();
        ExpandError::Unknown(format!(
            "unknown server `{}` in infra `{}` (its servers: {})",
            super::names::shown(name),
            self.name,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ))
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

/// `<workspace>/infra/<infra>`, else `<workspace>/<infra>`, canonical and inside the
/// workspace but not in the data directory; one message for "missing" and "outside".
fn find_dir(place: Place, infra: &str) -> Result<PathBuf, ExpandError> {
    let unknown = || {
        ExpandError::Unknown(format!(
            "unknown infra `{infra}`: no directory infra/{infra} or {infra} in the workspace"
        ))
    };
    let workspace = place.workspace.canonicalize().map_err(|_| unknown())?;
    let data_dir = place.data_dir.canonicalize().ok();
    [workspace.join("infra").join(infra), workspace.join(infra)]
        .iter()
        .filter_map(|candidate| candidate.canonicalize().ok())
        .find(|dir| {
            dir.is_dir()
                && dir.starts_with(&workspace)
                && !data_dir.as_ref().is_some_and(|d| dir.starts_with(d))
        })
        .ok_or_else(unknown)
}

/// The settings file `named` (a plain file name, `./` allowed before it) or the first
/// default one, canonical and directly in `dir`.
fn find_settings(dir: &Path, infra: &str, named: Option<&str>) -> Result<PathBuf, ExpandError> {
    let Some(named) = named else {
        return DEFAULT_SETTINGS
            .iter()
            .find_map(|f| inside(dir, f))
            .ok_or_else(|| {
                ExpandError::Unknown(format!(
                    "infra `{infra}` has no settings file (looked for {})",
                    DEFAULT_SETTINGS.join(", ")
                ))
            });
    };
    let name = named.strip_prefix("./").unwrap_or(named);
    super::names::plain("settings", name)?;
    let extension = Path::new(name).extension().and_then(|e| e.to_str());
    if !extension.is_some_and(|e| SETTINGS_EXTENSIONS.contains(&e)) {
        return Err(ExpandError::Invalid(format!(
            "`settings`: `{name}` is not a settings file name (it ends in .toml, .yaml, .yml or .json)"
        )));
    }
    inside(dir, name).ok_or_else(|| {
        ExpandError::Unknown(format!("infra `{infra}` has no settings file `{name}`"))
    })
}

/// `dir/name` when it is a file whose canonical path is directly in `dir` (canonical).
fn inside(dir: &Path, name: &str) -> Option<PathBuf> {
    let path = dir.join(name).canonicalize().ok()?;
    (path.parent() == Some(dir) && path.is_file()).then_some(path)
}

/// The settings document at `path`, or why it cannot be read.
fn read_settings(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let parsed = match extension {
        "yaml" | "yml" => serde_saphyr::from_str::<Value>(&text).map_err(|e| e.to_string()),
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

/// The servers of the settings with their providers filled in, or what is wrong with one.
fn servers(infra: &str, settings: &Settings, file: &Path) -> Result<Vec<Server>, String> {
    let mut servers: Vec<Server> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (i, entry) in settings.servers.iter().enumerate() {
        let field = |name: &str| format!("{}: servers[{i}].{name}", file.display());
        let hostname = match entry.get("hostname") {
            Some(Value::String(h)) if super::names::is_hostname(h) => h.clone(),
            Some(Value::String(h)) => {
                return Err(format!(
                    "{} `{}` is not a valid hostname: {}",
                    field("hostname"),
                    super::names::shown(h),
                    super::names::HOSTNAME_RULE
                ));
            }
            _ => return Err(format!("{} must be a string", field("hostname"))),
        };
        if !seen.insert(hostname.clone()) {
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
