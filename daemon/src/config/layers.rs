//! Settings from the environment and a config file, under the command line.
//!
//! Every daemon flag can also come from an environment variable,
//! `PROVISIONING_ORCHESTRATOR_<FLAG>` (`--parallel` from `PROVISIONING_ORCHESTRATOR_PARALLEL`,
//! `--retain-finished` from `PROVISIONING_ORCHESTRATOR_RETAIN_FINISHED`), or from a TOML file:
//! `--config FILE`, else `$PROVISIONING_ORCHESTRATOR_CONFIG`, else `config.toml` in the data
//! directory when it exists. Its keys are the flags' long names (`parallel = 4`,
//! `retain_finished = "30d"`, `label = ["docker", "region=eu"]`, `quiet = true`).
//!
//! The command line wins over the environment, which wins over the file. Each layer's
//! settings become arguments put before the command line's, so that clap checks them with
//! the same parsers, and a bad one is refused with the same message, naming where it came
//! from. Tools (`migrate`, `completions`, ...) take none of them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, CommandFactory};

use super::Cli;

/// The config file read from the data directory when no other is named.
pub const CONFIG_FILE: &str = "config.toml";

/// The prefix of the environment variables that set flags.
pub const ENV_PREFIX: &str = "PROVISIONING_ORCHESTRATOR_";

/// The largest config file read.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Flags no layer sets: their own (`config`), clap's, and those whose environment
/// variable already has a meaning of its own (the socket every client also reads, the
/// database URL taken out of the environment at start).
const NEVER_LAYERED: &[&str] = &["help", "version", "config"];

/// Flags the environment layer leaves alone (see [`NEVER_LAYERED`]).
const NOT_FROM_ENV: &[&str] = &["socket", "database-url"];

/// A setting that cannot be used, found before the daemon starts.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The config file cannot be read.
    #[error("cannot read the config file {}: {error}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// The config file is not TOML, or too large.
    #[error("the config file {} is not usable: {error}", .path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: String,
    },
    /// A key, or an environment variable, that is no setting, or one with a value of the
    /// wrong kind.
    #[error("{source_name}: {problem}")]
    Setting {
        /// The file (and key) or the variable.
        source_name: String,
        /// What is wrong.
        problem: String,
    },
}

/// The command line with the settings of the environment and the config file added.
pub struct Layered {
    /// The arguments to parse: the file's, then the environment's, then the command
    /// line's.
    pub args: Vec<OsString>,
    /// Where settings came from besides the command line, for the daemon's log
    /// (`config file /d/config.toml: parallel, label`).
    pub sources: Vec<String>,
}

/// `args` (the process's, the program's name first) with the settings of the environment
/// (`env`) and of the config file added before the command line's own.
pub fn layered(
    args: Vec<OsString>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Layered, LayerError> {
    let command = Cli::command();
    let Ok(matches) = command.clone().try_get_matches_from(&args) else {
        // The command line itself is wrong (or asks for help): its parse says so.
        return Ok(Layered {
            args,
            sources: Vec::new(),
        });
    };
    if matches.subcommand_name().is_some() {
        return Ok(Layered {
            args,
            sources: Vec::new(),
        });
    }
    let flags: Vec<&Arg> = command
        .get_arguments()
        .filter(|a| a.get_long().is_some_and(|l| !NEVER_LAYERED.contains(&l)))
        .collect();
    let given = |arg: &Arg| {
        matches!(
            matches.value_source(arg.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    };
    let mut sources = Vec::new();
    let mut from_env = Vec::new();
    let mut env_names = Vec::new();
    let mut env_set = Vec::new();
    for arg in flags.iter().filter(|a| !given(a)) {
        let long = arg.get_long().expect("filtered");
        if NOT_FROM_ENV.contains(&long) {
            continue;
        }
        let name = env_name(long);
        if let Some(value) = env(&name) {
            from_env.extend(env_args(arg, &name, value)?);
            env_names.push(name);
            env_set.push(long);
        }
    }
    if !env_names.is_empty() {
        sources.push(format!("environment: {}", env_names.join(", ")));
    }
    let set_by_env = |arg: &Arg| env_set.contains(&arg.get_long().expect("filtered"));
    let mut from_file = Vec::new();
    if let Some((path, named)) = config_path(&matches, env) {
        let table = read_config(&path, named)?;
        let in_data_dir = !named;
        let mut keys = Vec::new();
        for (key, value) in &table {
            let long = key.replace('_', "-");
            let place = format!("{} (`{key}`)", path.display());
            let Some(arg) = flags.iter().find(|a| a.get_long() == Some(long.as_str())) else {
                return Err(unknown_key(&place, key, &flags));
            };
            if in_data_dir && long == "data-dir" {
                return Err(LayerError::Setting {
                    source_name: place,
                    problem: "the data directory's own config file cannot move the data directory: use --data-dir, or --config with a file elsewhere".into(),
                });
            }
            if long == "database-url" {
                private_file(&path, &place)?;
            }
            if given(arg) || set_by_env(arg) {
                continue;
            }
            from_file.extend(file_args(arg, &place, value)?);
            keys.push(key.clone());
        }
        if !keys.is_empty() {
            sources.push(format!(
                "config file {}: {}",
                path.display(),
                keys.join(", ")
            ));
        }
    }
    let mut layered = Vec::with_capacity(args.len() + from_file.len() + from_env.len());
    let mut args = args.into_iter();
    layered.extend(args.next());
    layered.extend(from_file);
    layered.extend(from_env);
    layered.extend(args);
    Ok(Layered {
        args: layered,
        sources,
    })
}

/// The daemon's settings: the process's command line over its environment and its config
/// file. Exits as clap does on a bad command line (or `--help`), with status 2 and the
/// source named on a bad setting from the environment or the file.
pub fn from_process() -> Cli {
    use clap::Parser as _;
    let args: Vec<OsString> = std::env::args_os().collect();
    let layered = match layered(args.clone(), &|name| std::env::var_os(name)) {
        Ok(layered) => layered,
        Err(e) => refuse(&e.to_string()),
    };
    match Cli::try_parse_from(&layered.args) {
        Ok(mut cli) => {
            cli.settings_from = layered.sources;
            cli
        }
        // The command line alone parses: the bad value came from another layer.
        Err(e) if !layered.sources.is_empty() && Cli::try_parse_from(&args).is_ok() => {
            let message = e.to_string();
            let message = message.trim().trim_start_matches("error: ");
            refuse(&format!(
                "a setting from {} is not valid: {message}",
                layered.sources.join("; ")
            ))
        }
        Err(e) => e.exit(),
    }
}

/// Says why the settings cannot be used, and exits with status 2 (as clap does).
fn refuse(message: &str) -> ! {
    eprintln!("provisioning-orchestrator: {message}");
    std::process::exit(2)
}

/// The environment variable of flag `--long`.
pub fn env_name(long: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        long.to_ascii_uppercase().replace('-', "_")
    )
}

/// The config file to read and whether it was named (`--config`, or the environment):
/// else the data directory's, when it exists.
fn config_path(
    matches: &ArgMatches,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Option<(PathBuf, bool)> {
    if let Some(path) = matches.get_one::<PathBuf>("config") {
        return Some((path.clone(), true));
    }
    if let Some(path) = env(&env_name("config")).filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(path), true));
    }
    let data_dir = matches
        .get_one::<PathBuf>("data_dir")
        .cloned()
        .or_else(|| env(&env_name("data-dir")).map(PathBuf::from))
        .unwrap_or_else(orch_protocol::paths::default_data_dir);
    let path = data_dir.join(CONFIG_FILE);
    path.is_file().then_some((path, false))
}

/// The config file as a TOML table (a named one must exist; the data directory's is read
/// only when it does).
fn read_config(path: &Path, named: bool) -> Result<toml::Table, LayerError> {
    let read = |error: String| LayerError::Read {
        path: path.to_path_buf(),
        error,
    };
    let meta = std::fs::metadata(path).map_err(|e| match (named, e.kind()) {
        (true, std::io::ErrorKind::NotFound) => read("no such file".into()),
        _ => read(e.to_string()),
    })?;
    if !meta.is_file() {
        return Err(read("not a file".into()));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(LayerError::Parse {
            path: path.to_path_buf(),
            error: format!(
                "it is {} bytes; a config file is at most {MAX_CONFIG_BYTES}",
                meta.len()
            ),
        });
    }
    let text = std::fs::read_to_string(path).map_err(|e| read(e.to_string()))?;
    text.parse::<toml::Table>().map_err(|e| LayerError::Parse {
        path: path.to_path_buf(),
        error: e.to_string().trim().to_string(),
    })
}

/// Refuses a config file holding a secret that others than its owner may read.
fn private_file(path: &Path, place: &str) -> Result<(), LayerError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map(|m| m.permissions().mode())
        .unwrap_or(0);
    if mode & 0o077 == 0 {
        return Ok(());
    }
    Err(LayerError::Setting {
        source_name: place.to_string(),
        problem: format!(
            "the file holds the database URL (and its password) but is readable by others (mode {:o}): chmod 600 it, or use database_url_file",
            mode & 0o777
        ),
    })
}

/// The refusal of `key`, which is no flag of the daemon.
fn unknown_key(place: &str, key: &str, flags: &[&Arg]) -> LayerError {
    let known: Vec<String> = flags
        .iter()
        .filter_map(|a| a.get_long())
        .map(|l| l.replace('-', "_"))
        .collect();
    LayerError::Setting {
        source_name: place.to_string(),
        problem: format!(
            "`{key}` is not a setting of the daemon (the settings are its flags: {})",
            known.join(", ")
        ),
    }
}

/// The arguments a config file's `value` gives flag `arg`.
fn file_args(arg: &Arg, place: &str, value: &toml::Value) -> Result<Vec<OsString>, LayerError> {
    let long = format!("--{}", arg.get_long().expect("flags have long names"));
    let bad = |problem: String| LayerError::Setting {
        source_name: place.to_string(),
        problem,
    };
    match (arg.get_action(), value) {
        (ArgAction::SetTrue, toml::Value::Boolean(true)) => Ok(vec![long.into()]),
        (ArgAction::SetTrue, toml::Value::Boolean(false)) => Ok(Vec::new()),
        (ArgAction::SetTrue, _) => Err(bad("expected true or false".into())),
        (ArgAction::Append, toml::Value::Array(items)) => {
            let mut args = Vec::with_capacity(2 * items.len());
            for item in items {
                let item = scalar(item)
                    .ok_or_else(|| bad("expected a list of strings or numbers".to_string()))?;
                args.extend([OsString::from(&long), item.into()]);
            }
            Ok(args)
        }
        (_, value) => match scalar(value) {
            Some(text) => Ok(vec![long.into(), text.into()]),
            None if matches!(value, toml::Value::Array(_)) => {
                Err(bad(format!("{long} takes one value, not a list")))
            }
            None => Err(bad(
                "expected a string, a number or (for a switch) true or false".into(),
            )),
        },
    }
}

/// A string or a number as a flag's value.
fn scalar(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(text) => Some(text.clone()),
        toml::Value::Integer(n) => Some(n.to_string()),
        toml::Value::Float(x) => Some(x.to_string()),
        _ => None,
    }
}

/// The arguments environment variable `name` (of flag `arg`) gives: a switch takes
/// `true`/`1`/`yes` or `false`/`0`/`no`/empty; a repeatable flag a comma-separated list.
fn env_args(arg: &Arg, name: &str, value: OsString) -> Result<Vec<OsString>, LayerError> {
    let long = format!("--{}", arg.get_long().expect("flags have long names"));
    let bad = |problem: String| LayerError::Setting {
        source_name: format!("${name}"),
        problem,
    };
    match arg.get_action() {
        ArgAction::SetTrue => match value.to_string_lossy().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" => Ok(vec![long.into()]),
            "" | "0" | "false" | "no" => Ok(Vec::new()),
            other => Err(bad(format!("expected true or false, not `{other}`"))),
        },
        ArgAction::Append => {
            let text = value
                .into_string()
                .map_err(|_| bad("not valid UTF-8".into()))?;
            Ok(text
                .split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .flat_map(|item| [OsString::from(&long), item.into()])
                .collect())
        }
        _ => Ok(vec![long.into(), value]),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use clap::Parser;

    use super::*;

    /// The settings `args` give with `vars` set and `config` as the data directory's
    /// config file (none when empty).
    fn parse(args: &[&str], vars: &[(&str, &str)], config: &str) -> Result<Cli, String> {
        let dir = tempfile::tempdir().unwrap();
        if !config.is_empty() {
            std::fs::write(dir.path().join(CONFIG_FILE), config).unwrap();
        }
        let mut vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        vars.insert(env_name("data-dir"), dir.path().into());
        let env = |name: &str| vars.get(name).cloned();
        let mut full = vec![OsString::from("provisioning-orchestrator")];
        full.extend(args.iter().map(OsString::from));
        let layered = layered(full, &env).map_err(|e| e.to_string())?;
        Cli::try_parse_from(layered.args).map_err(|e| e.to_string())
    }

    #[test]
    fn the_command_line_wins_over_the_environment_which_wins_over_the_file() {
        let config =
            "parallel = 2\nlog_keep = 3\nlabel = [\"docker\", \"region=eu\"]\nquiet = true\n";
        let cli = parse(&[], &[], config).unwrap();
        assert_eq!((cli.parallel, cli.log_keep, cli.quiet), (2, 3, true));
        assert_eq!(cli.labels, ["docker", "region=eu"]);
        let vars = [
            (env_name("parallel"), "5".to_string()),
            (env_name("label"), "gpu, ssd".into()),
        ];
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let cli = parse(&[], &vars, config).unwrap();
        assert_eq!((cli.parallel, cli.log_keep), (5, 3));
        assert_eq!(cli.labels, ["gpu", "ssd"]);
        let cli = parse(&["--parallel", "7", "--label", "x"], &vars, config).unwrap();
        assert_eq!(cli.parallel, 7);
        assert_eq!(cli.labels, ["x"]);
    }

    #[test]
    fn bad_settings_name_where_they_came_from() {
        let unknown = parse(&[], &[], "paralel = 2\n").unwrap_err();
        assert!(unknown.contains("`paralel` is not a setting"), "{unknown}");
        assert!(
            unknown.contains("parallel"),
            "lists the settings: {unknown}"
        );
        let list = parse(&[], &[], "parallel = [1, 2]\n").unwrap_err();
        assert!(list.contains("takes one value"), "{list}");
        let switch = parse(&[], &[], "quiet = \"yes\"\n").unwrap_err();
        assert!(
            switch.contains("`quiet`") && switch.contains("true or false"),
            "{switch}"
        );
        let toml = parse(&[], &[], "parallel = \n").unwrap_err();
        assert!(toml.contains("is not usable"), "{toml}");
        let moved = parse(&[], &[], "data_dir = \"/elsewhere\"\n").unwrap_err();
        assert!(moved.contains("cannot move the data directory"), "{moved}");
        let var = env_name("no-supervisor");
        let flag = parse(&[], &[(var.as_str(), "maybe")], "").unwrap_err();
        assert!(flag.contains(&var), "{flag}");
        // A value of the right kind that the flag refuses: clap's own message.
        let value = parse(&[], &[], "parallel = 0\n").unwrap_err();
        assert!(value.contains("--parallel"), "{value}");
    }

    #[test]
    fn a_named_file_must_exist_and_tools_take_no_settings() {
        let missing = parse(&["--config", "/nonexistent/orch.toml"], &[], "").unwrap_err();
        assert!(
            missing.contains("/nonexistent/orch.toml: no such file"),
            "{missing}"
        );
        let tool = parse(&["completions", "nu"], &[], "paralel = 1\n").unwrap();
        assert!(tool.tool.is_some(), "a tool ignores the file");
    }

    #[test]
    fn a_database_url_only_in_a_private_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orch.toml");
        std::fs::write(&path, "database_url = \"postgres://u:pw@h/db\"\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let args = ["--config", path.to_str().unwrap()];
        let exposed = parse(&args, &[], "").unwrap_err();
        assert!(
            exposed.contains("readable by others (mode 644)"),
            "{exposed}"
        );
        assert!(
            !exposed.contains("pw"),
            "the password is not shown: {exposed}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(parse(&args, &[], "").unwrap().database_url.is_some());
    }
}
