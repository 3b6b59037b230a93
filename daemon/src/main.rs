//! The `provisioning-orchestrator` binary: parses flags and runs the daemon (or, given a
//! tool such as `audit verify-segment`, `migrate`, `checkpoint`, `completions`, or
//! `supervise` for a data directory, runs that instead).

use provisioning_orchestrator::config::{AuditTool, Tool, layers};

fn main() -> std::process::ExitCode {
    provisioning_orchestrator::child::remember_the_start();
    let mut cli = layers::from_process();
    // SAFETY: no other thread exists yet.
    unsafe { cli.take_database_url_env() };
    if let Some(Tool::Audit(AuditTool::VerifySegment { file, sha256 })) = &cli.tool {
        return provisioning_orchestrator::audit::offline::run(file, sha256.as_deref());
    }
    if let Some(Tool::Migrate { from, to }) = &cli.tool {
        return provisioning_orchestrator::migrate::run(from, to);
    }
    if let Some(Tool::Checkpoint { dir }) = &cli.tool {
        return provisioning_orchestrator::store::checkpoint_tool(dir);
    }
    if let Some(Tool::Completions { shell }) = &cli.tool {
        return provisioning_orchestrator::completions::print(*shell);
    }
    if let Some(Tool::Supervise { dir }) = &cli.tool {
        return provisioning_orchestrator::runner::supervisor_main(dir);
    }
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
