//! The `provisioning-orchestrator` binary: parses flags and runs the daemon.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = provisioning_orchestrator::config::Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("provisioning-orchestrator: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(provisioning_orchestrator::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("provisioning-orchestrator: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
