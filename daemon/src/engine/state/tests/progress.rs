//! Progress: the latest value per task, written at most once per commit.

use orch_protocol::Progress;
use orch_protocol::TaskStatus::{Running, Succeeded};

use super::*;

fn progress(id: TaskId, percent: f64) -> Input {
    let kind = ReportKind::Progress(Progress {
        percent: Some(percent),
        message: None,
    });
    Input::Report(Report {
        id,
        attempt: 1,
        kind,
    })
}

fn percent(step: &Step) -> Vec<Option<f64>> {
    let writes = step.batch.tasks.iter();
    writes
        .map(|w| w.task.progress.as_ref().and_then(|p| p.percent))
        .collect()
}

#[test]
fn progress_is_coalesced_to_the_latest_value_once_per_commit() {
    let mut h = Harness::new(1);
    h.submit(vec![task()]);
    let step = h.turn(vec![
        progress(1, 10.0),
        progress(1, 20.0),
        progress(1, 30.0),
    ]);
    assert_eq!(step.written(), vec![(1, Running)]);
    assert_eq!(percent(&step), vec![Some(30.0)]);
    assert_eq!(step.events(), events(&[(1, "progress")]));
    assert!(step.effects.progress_written);

    // Until that batch is durable, new values wait in memory.
    assert!(
        h.turn(vec![progress(1, 40.0), progress(1, 50.0)])
            .is_empty()
    );
    assert_eq!(h.task(1).progress.as_ref().unwrap().percent, Some(50.0));
    let step = h.turn(vec![Input::ProgressCommitted]);
    assert_eq!(percent(&step), vec![Some(50.0)]);
}

#[test]
fn the_latest_progress_is_logged_before_the_change_that_ends_the_attempt() {
    let mut h = Harness::new(1);
    h.submit(vec![task()]);
    let end = Input::Report(Report {
        id: 1,
        attempt: 1,
        kind: exited(0),
    });
    let step = h.turn(vec![progress(1, 90.0), end]);
    assert_eq!(step.written(), vec![(1, Succeeded)]);
    assert_eq!(step.events(), events(&[(1, "progress"), (1, "succeeded")]));
    assert!(
        !step.effects.progress_written,
        "written with the change itself"
    );
}

#[test]
fn progress_of_another_attempt_is_ignored() {
    let mut h = Harness::new(1);
    h.submit(vec![task()]);
    let stale = Input::Report(Report {
        id: 1,
        attempt: 7,
        kind: ReportKind::Progress(Progress {
            percent: Some(1.0),
            message: None,
        }),
    });
    assert!(h.turn(vec![stale]).is_empty());
    assert!(h.task(1).progress.is_none());
}
