//! The socket adapter's requests: each is checked against its row of the operations
//! table (the role it needs), handed to its operation in [`crate::ops`], and the domain
//! value that comes back is sent as [`Response`] frames (long lists in parts, streams
//! item by item, then `stream_end`). Secrets are redacted in [`Connection`], where every
//! answer is sent.

use orch_protocol::{ErrorKind, ErrorReply, Request, Response};

use super::Connection;
use crate::ops::{self, AppError, Context, RequestKind};

/// Checks that the connection's role may make `request` (its row of the operations
/// table); the `permission_denied` answer if not.
pub fn check_access(conn: &Connection, request: &Request) -> Result<(), ErrorReply> {
    let operation = ops::for_request(RequestKind::of(request));
    operation.access.check(conn.role).map_err(|needed| {
        ErrorReply::new(
            ErrorKind::PermissionDenied,
            format!(
                "permission denied: uid {} has the role {}; this request needs {}",
                conn.actor.uid,
                conn.role.as_str(),
                needed.as_str()
            ),
        )
    })
}

/// Runs the operation `request` asks for and sends its answer. An `Err` means the
/// connection is gone.
pub async fn dispatch(
    ctx: &Context,
    conn: &mut Connection,
    request: Request,
) -> std::io::Result<()> {
    if let Err(reply) = check_access(conn, &request) {
        return conn.send(&Response::Error(reply)).await;
    }
    let operation = ops::for_request(RequestKind::of(&request));
    if ctx.standby && !operation.served_on_standby() && !conn.placed {
        if let Some(relay) = ctx.relay.as_ref().filter(|_| operation.forwarded()) {
            return relay.forward(conn, &request).await;
        }
        return conn.send(&Response::Error(ctx.not_leader())).await;
    }
    let actor = conn.actor.clone();
    let origin = if conn.placed {
        ops::envs::Origin::Leader
    } else {
        ops::envs::Origin::Client(conn.role)
    };
    let answer = match request {
        Request::Health => ops::daemon::health(ctx).map(Response::Health),
        Request::Cluster => ops::daemon::cluster(ctx).map(Response::Cluster),
        Request::Submit { tasks, stashed } => {
            let tasks = ops::tasks::submit(ctx, actor, tasks, stashed).await;
            return send_tasks(conn, tasks).await;
        }
        Request::List { filter } => return send_tasks(conn, ops::tasks::list(ctx, &filter)).await,
        Request::Get { id } => ops::tasks::get(ctx, id).map(task),
        Request::Wait { ids } => {
            let tasks = tokio::select! {
                tasks = ops::tasks::wait(ctx, ids) => tasks,
                () = conn.closed() => return Ok(()),
            };
            return send_tasks(conn, tasks).await;
        }
        Request::Cancel { id } => ops::tasks::cancel(ctx, actor, id).await.map(task),
        Request::Retry { id } => ops::tasks::retry(ctx, actor, id).await.map(task),
        Request::ChangeTask { id, change } => {
            ops::tasks::change(ctx, actor, id, change).await.map(task)
        }
        Request::Watch {
            since,
            task,
            workflow,
        } => return super::streams::watch(ctx, conn, since, task, workflow).await,
        Request::Logs { id, follow } => {
            return super::streams::task_log(ctx, conn, id, follow).await;
        }
        Request::Shutdown => return shutdown(ctx, conn, false).await,
        Request::Handover => return shutdown(ctx, conn, true).await,
        Request::Clean { filter } => {
            ops::tasks::clean(ctx, actor, filter)
                .await
                .map(|removed| Response::Removed {
                    ids: removed.tasks,
                    workflows: removed.workflows,
                })
        }
        Request::Audit { filter } => {
            ops::audit::list(ctx, &filter).map(|entries| Response::Audit { entries })
        }
        Request::AuditVerify => ops::audit::verify(ctx).await.map(Response::AuditReport),
        Request::AuditSegments => {
            ops::audit::segments(ctx).map(|segments| Response::AuditSegments { segments })
        }
        Request::AuditCompact { before } => ops::audit::compact(ctx, actor, before)
            .await
            .map(|segment| Response::AuditCompacted { segment }),
        Request::AuditExport { seq } => return super::streams::audit_export(ctx, conn, seq).await,
        Request::WorkflowSubmit { workflow } => {
            let submitter = conn.submitter;
            // Stops waiting when the client hangs up (the workflow, once created, goes on).
            tokio::select! {
                answer = ops::workflow_submit::submit(ctx, actor, submitter, workflow) => {
                    answer.map(|answer| Response::WorkflowSubmitted(Box::new(answer)))
                }
                () = conn.closed() => return Ok(()),
            }
        }
        Request::WorkflowPlan { workflow } => {
            let submitter = conn.submitter;
            ops::workflow_submit::plan(ctx, &workflow, submitter)
                .map(|plan| Response::Plan(Box::new(plan)))
        }
        Request::Workflows { limit, before } => match ops::workflows::list(ctx, limit, before) {
            Ok(summaries) => return conn.send_list("workflows", &summaries).await,
            Err(e) => Err(e),
        },
        Request::Workflow { id, offset, limit } => ops::workflows::get(ctx, id, offset, limit)
            .map(|page| Response::Workflow(Box::new(page))),
        Request::WorkflowCancel { id } => ops::workflows::cancel(ctx, actor, id)
            .await
            .map(|summary| Response::WorkflowSummary(Box::new(summary))),
        Request::WorkflowRollback { id } => ops::workflows::rollback(ctx, actor, id)
            .await
            .map(|summary| Response::WorkflowSummary(Box::new(summary))),
        Request::WorkflowRestart { id, step } => ops::workflows::restart(ctx, actor, id, &step)
            .await
            .map(|summary| Response::WorkflowSummary(Box::new(summary))),
        Request::Extensions => Ok(Response::Extensions(Box::new(ops::daemon::extensions(ctx)))),
        Request::EnvCreate { env } => ops::envs::create(ctx, actor, origin, env)
            .await
            .map(test_env),
        Request::Envs { filter } => {
            ops::envs::list(ctx, &filter).map(|envs| Response::Envs { envs })
        }
        Request::Env { id } => ops::envs::get(ctx, id).map(test_env),
        Request::EnvRun { id } => ops::envs::run(ctx, actor, origin, id).await.map(test_env),
        Request::EnvDelete { id } => ops::envs::delete(ctx, actor, origin, id)
            .await
            .map(test_env),
        Request::EnvLogs { id, follow } => {
            return super::streams::env_log(ctx, conn, id, follow).await;
        }
        Request::Topologies => Ok(Response::Topologies(Box::new(ops::envs::topologies(ctx)))),
        Request::Queue => ops::queue::view(ctx).map(Response::Queue),
        Request::QueueChange { change } => ops::queue::change(ctx, actor, change)
            .await
            .map(Response::Queue),
        Request::PauseTask { id } => ops::queue::pause_task(ctx, actor, id).await.map(task),
        Request::ResumeTask { id } => ops::queue::resume_task(ctx, actor, id).await.map(task),
        Request::SendInput { id, data, eof } => ops::queue::send_input(ctx, actor, id, data, eof)
            .await
            .map(task),
        Request::SignalTask { id, signal } => ops::queue::signal_task(ctx, actor, id, signal)
            .await
            .map(task),
        Request::ScheduleAdd { schedule } => {
            ops::schedules::add(ctx, actor, conn.submitter, schedule)
                .await
                .map(|s| Response::Schedule(Box::new(s)))
        }
        Request::NotifierAdd { notifier } => ops::notify::add(ctx, actor, notifier)
            .await
            .map(|n| Response::Notifier(Box::new(n))),
        Request::Notifiers => ops::notify::list(ctx)
            .map(|(notifiers, waiting)| Response::Notifiers { notifiers, waiting }),
        Request::NotifierChange { name, change } => ops::notify::change(ctx, actor, name, change)
            .await
            .map(|n| Response::Notifier(Box::new(n))),
        Request::Schedules { upcoming } => {
            ops::schedules::list(ctx, upcoming).map(|schedules| Response::Schedules { schedules })
        }
        Request::ScheduleChange { name, change } => {
            ops::schedules::change(ctx, actor, name, change)
                .await
                .map(|s| Response::Schedule(Box::new(s)))
        }
    };
    conn.send(&answer.unwrap_or_else(|e| Response::Error(e.reply())))
        .await
}

fn task(task: orch_protocol::Task) -> Response {
    Response::Task {
        task: Box::new(task),
    }
}

fn test_env(env: orch_protocol::TestEnv) -> Response {
    Response::Env(Box::new(env))
}

/// Sends a task list (in parts when it is long), or the error.
async fn send_tasks(
    conn: &mut Connection,
    tasks: Result<Vec<orch_protocol::Task>, AppError>,
) -> std::io::Result<()> {
    match tasks {
        Ok(tasks) => conn.send_tasks(&tasks).await,
        Err(e) => conn.send_error(e).await,
    }
}

/// `Shutdown`: recorded, answered, then the daemon stops; the connection stays open until
/// the process exits, so the client sees its end exactly then.
async fn shutdown(
    ctx: &Context,
    conn: &mut Connection,
    leave_running: bool,
) -> std::io::Result<()> {
    if let Err(e) = ops::daemon::record_shutdown(ctx, conn.actor.clone()).await {
        return conn.send_error(e).await;
    }
    if let Err(e) = conn.hold_open_until_exit() {
        tracing::warn!(error = %e, "cannot hold the stopping client's connection until exit");
    }
    let sent = conn.send(&Response::ShuttingDown).await;
    if leave_running {
        ctx.leave_running
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    ctx.shutdown.cancel();
    sent
}
