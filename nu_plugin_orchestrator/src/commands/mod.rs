//! The registry of `orch` commands: one file per command, and the modules they share.
//!
//! Shared: [`args`] (reading arguments), [`by_id`] (the shape of the commands about one
//! task, workflow or environment), [`workflow_args`] (the flags and shape of the
//! `orch workflow submit` commands), [`task_draft`] (a task spec from flags and records).

mod args;
mod audit;
mod audit_compact;
mod audit_export;
mod audit_segments;
mod audit_verify;
mod batch_file;
mod by_id;
mod cancel;
mod clean;
mod cluster_nodes;
mod daemon_handover;
mod daemon_install;
mod daemon_start;
mod daemon_status;
mod daemon_stop;
mod edit;
mod enqueue;
#[cfg(test)]
mod examples;
mod extensions;
mod group;
mod group_add;
mod group_list;
mod group_remove;
mod health;
mod help;
mod kill;
pub mod logs;
mod notify;
mod parallel;
mod pause;
mod queue_change;
mod resubmit;
mod retry;
mod schedule_add;
mod schedule_change;
mod schedule_list;
mod send;
mod stash;
mod submit;
mod task;
mod task_draft;
mod tasks;
mod test_env_by_id;
mod test_env_create;
mod test_topology_show;
mod version;
mod wait;
mod watch;
mod workflow_args;
mod workflow_batch;
mod workflow_cluster;
mod workflow_list;
mod workflow_plan;
mod workflow_restart;
mod workflow_servers;
mod workflow_show;
mod workflow_taskserv;

use nu_plugin::PluginCommand;

use crate::OrchestratorPlugin;

/// Every command of the plugin.
pub fn all() -> Vec<Box<dyn PluginCommand<Plugin = OrchestratorPlugin>>> {
    vec![
        Box::new(group::ORCH),
        Box::new(health::Health),
        Box::new(version::Version),
        Box::new(submit::Submit),
        Box::new(tasks::Tasks),
        Box::new(task::TASK),
        Box::new(wait::Wait),
        Box::new(cancel::CANCEL),
        Box::new(kill::Kill),
        Box::new(send::Send),
        Box::new(retry::RETRY),
        Box::new(resubmit::Resubmit),
        Box::new(stash::STASH),
        Box::new(enqueue::Enqueue),
        Box::new(edit::Edit),
        Box::new(pause::PAUSE),
        Box::new(pause::RESUME),
        Box::new(parallel::Parallel),
        Box::new(group::GROUP),
        Box::new(group_list::GroupList),
        Box::new(group_add::GroupAdd),
        Box::new(group_remove::GroupRemove),
        Box::new(group::SCHEDULE),
        Box::new(schedule_add::ScheduleAdd),
        Box::new(schedule_list::ScheduleList),
        Box::new(schedule_list::ScheduleNext),
        Box::new(schedule_change::PAUSE),
        Box::new(schedule_change::RESUME),
        Box::new(schedule_change::REMOVE),
        Box::new(group::NOTIFY),
        Box::new(notify::NotifyAdd),
        Box::new(notify::NotifyList),
        Box::new(notify::REMOVE),
        Box::new(notify::TEST),
        Box::new(watch::Watch),
        Box::new(logs::Logs),
        Box::new(clean::Clean),
        Box::new(audit::Audit),
        Box::new(audit_verify::AuditVerify),
        Box::new(audit_segments::AuditSegments),
        Box::new(audit_compact::AuditCompact),
        Box::new(audit_export::AuditExport),
        Box::new(group::DAEMON),
        Box::new(daemon_start::DaemonStart),
        Box::new(daemon_install::DaemonInstall),
        Box::new(daemon_install::DaemonUninstall),
        Box::new(daemon_stop::DaemonStop),
        Box::new(daemon_handover::DaemonRestart),
        Box::new(daemon_handover::DaemonUpgrade),
        Box::new(daemon_status::DaemonStatus),
        Box::new(group::CLUSTER),
        Box::new(cluster_nodes::ClusterNodes),
        Box::new(group::WORKFLOW),
        Box::new(group::WORKFLOW_SUBMIT),
        Box::new(workflow_servers::SERVERS),
        Box::new(workflow_taskserv::TASKSERV),
        Box::new(workflow_cluster::CLUSTER),
        Box::new(workflow_batch::SubmitBatch),
        Box::new(workflow_list::WorkflowList),
        Box::new(workflow_show::WorkflowShow),
        Box::new(workflow_restart::WorkflowRestart),
        Box::new(workflow_plan::WorkflowPlan),
        Box::new(workflow_show::CANCEL),
        Box::new(workflow_show::ROLLBACK),
        Box::new(group::EXTENSIONS),
        Box::new(extensions::PROVIDERS),
        Box::new(extensions::TASKSERVS),
        Box::new(extensions::CLUSTERS),
        Box::new(group::TEST),
        Box::new(group::TEST_ENV),
        Box::new(test_env_create::TestEnvCreate),
        Box::new(test_env_by_id::EnvList),
        Box::new(test_env_by_id::SHOW),
        Box::new(test_env_by_id::RUN),
        Box::new(test_env_by_id::EnvLogs),
        Box::new(test_env_by_id::DELETE),
        Box::new(group::TEST_TOPOLOGY),
        Box::new(test_topology_show::TopologyList),
        Box::new(test_topology_show::TopologyShow),
    ]
}
