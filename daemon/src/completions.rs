//! `provisioning-orchestrator completions <shell>`: the completion script of the daemon's
//! flags and tools for a shell, on standard output (nu through clap_complete_nushell, the
//! others through clap_complete).

use clap::CommandFactory;

use crate::config::Cli;

/// The shells a completion script is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// Nushell (`source` it, or save it in an autoload directory).
    Nu,
    /// Bash.
    Bash,
    /// Zsh.
    Zsh,
    /// Fish.
    Fish,
    /// Elvish.
    Elvish,
    /// PowerShell.
    Powershell,
}

/// Writes `shell`'s completion script to standard output.
pub fn print(shell: Shell) -> std::process::ExitCode {
    write(shell, &mut std::io::stdout());
    std::process::ExitCode::SUCCESS
}

/// Writes `shell`'s completion script to `out`.
pub fn write(shell: Shell, out: &mut dyn std::io::Write) {
    let mut command = Cli::command();
    let name = command.get_name().to_string();
    let other = match shell {
        Shell::Nu => {
            return clap_complete::generate(
                clap_complete_nushell::Nushell,
                &mut command,
                name,
                out,
            );
        }
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
        Shell::Elvish => clap_complete::Shell::Elvish,
        Shell::Powershell => clap_complete::Shell::PowerShell,
    };
    clap_complete::generate(other, &mut command, name, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn every_shell_gets_a_script_naming_the_flags_and_tools() {
        for shell in Shell::value_variants() {
            let mut script = Vec::new();
            write(*shell, &mut script);
            let script = String::from_utf8(script).unwrap();
            for word in ["data-dir", "storage-type", "migrate", "completions"] {
                assert!(script.contains(word), "{shell:?} lacks {word}");
            }
        }
    }
}
