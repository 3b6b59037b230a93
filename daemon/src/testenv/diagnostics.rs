//! What a failure leaves for inspection: the failed state (with the stage in progress),
//! each container's inspect output and log, every probe's last outcome and the output
//! of what failed; and the one-line root cause of a script's output for the error.

use orch_protocol::{Diagnostics, NodeDiagnostics, TestEnv};

use super::TestEnvService;
use super::engine::ContainerEngine;
use super::stages::Transition;

impl TestEnvService {
    /// Fails the stage in progress with `error`, saving the diagnostics and `output` (of
    /// what failed).
    pub(super) async fn fail(
        &self,
        mut env: TestEnv,
        engine: &ContainerEngine,
        error: String,
        output: String,
    ) -> TestEnv {
        let mut nodes = Vec::new();
        for node in &env.nodes {
            nodes.push(NodeDiagnostics {
                node: node.name.clone(),
                inspect: engine.inspect(&node.container).await,
                logs: engine.logs(&node.container).await,
            });
        }
        env.diagnostics = Some(Diagnostics {
            nodes,
            probes: env.probes.clone(),
            output,
        });
        let env = self.advance(env, Transition::Failed(error)).await;
        self.log(env.id, &env.state.failure().unwrap_or_default());
        env
    }
}

/// The root cause a script's output gives: the message of the last Nushell error in it
/// (the line after its `Error:` header and the `|` lines under it, joined into one line),
/// else its last line that is not part of an error's frame.
pub(super) fn root_cause(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let message = lines
        .iter()
        .rposition(|l| l.starts_with("Error:"))
        .and_then(|header| {
            let start = header
                + 1
                + lines[header + 1..]
                    .iter()
                    .position(|l| !l.trim().is_empty())?;
            let first = lines[start].trim_start();
            let first = first
                .strip_prefix("x ")
                .or_else(|| first.strip_prefix("× "))?;
            let mut parts = vec![first.trim()];
            for line in &lines[start + 1..] {
                let line = line.trim_start();
                match line.strip_prefix('|').or_else(|| line.strip_prefix('│')) {
                    Some(rest) => parts.push(rest.trim()),
                    None => break,
                }
            }
            Some(parts.join(" ").trim().to_string())
        });
    match message {
        Some(message) if !message.is_empty() => message,
        _ => lines
            .iter()
            .rev()
            .map(|l| l.trim())
            .find(|l| l.chars().any(char::is_alphanumeric) && !is_frame(l))
            .unwrap_or("")
            .to_string(),
    }
}

/// Whether a line is part of the frame Nushell draws around an error's source.
fn is_frame(line: &str) -> bool {
    line.starts_with(",-[")
        || line.starts_with("╭─[")
        || line.starts_with('`')
        || line.starts_with('╰')
        || line.starts_with(':')
        || line.chars().next().is_some_and(|c| c.is_ascii_digit()) && line.contains(" | ")
}

/// The last line of `output` that is not blank, trimmed.
pub(super) fn last_line(output: &str) -> String {
    output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_cause_is_the_last_nushell_errors_message_in_one_line() {
        let output = "installing\nError: nu::shell::error\n\n  x needs network: kubernetes\n  | needs kubeadm\n   ,-[/t/install.nu:3:5]\n 3 |     error make {msg: ...}\n   `----\n";
        assert_eq!(
            root_cause(output),
            "needs network: kubernetes needs kubeadm"
        );
        let unicode =
            "Error: nu::shell::error\n\n  × boom\n   ╭─[/x.nu:1:1]\n 1 │ error make\n   ╰────\n";
        assert_eq!(root_cause(unicode), "boom");
    }

    #[test]
    fn without_an_error_the_root_cause_is_the_last_line_outside_a_frame() {
        assert_eq!(
            root_cause("starting\npg_ctl: could not start\n\n"),
            "pg_ctl: could not start"
        );
        assert_eq!(root_cause("   `----\n"), "");
        assert_eq!(last_line("a\nb  \n\n"), "b");
    }
}
