//! How the daemon steers an attempt it launched, and the launch's end of it: its cancel
//! token, whether it is paused (a `watch`, level-triggered: the latest value counts), and
//! its nudges (signals and input, in order).

use orch_protocol::{Nudge, TaskId, TaskSpec};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// One attempt to start.
pub struct Launch {
    /// The task.
    pub id: TaskId,
    /// Which attempt (1-based).
    pub attempt: u32,
    /// What to run.
    pub spec: TaskSpec,
    /// Cancelled to stop the attempt.
    pub token: CancellationToken,
    /// True while the attempt is to be paused (its process group stopped).
    pub paused: watch::Receiver<bool>,
    /// Signals for its process group and input for its standard input.
    pub nudges: mpsc::UnboundedReceiver<Nudge>,
}

/// How the daemon steers an attempt it launched: its cancel, and whether it is paused.
pub struct Steering {
    /// Cancelled to stop the attempt.
    pub token: CancellationToken,
    /// True while the attempt is to be paused.
    paused: watch::Sender<bool>,
    /// Signals for its process group and input for its standard input.
    nudges: mpsc::UnboundedSender<Nudge>,
    /// An adopted attempt's: whatever it is, its first value is passed on (its processes
    /// may be stopped or not whatever the daemon last asked).
    unsure: std::sync::atomic::AtomicBool,
}

impl Steering {
    /// A new attempt's steering (running, not paused) and the launch's end of it: its
    /// pause and its nudges.
    pub fn new() -> (Steering, Steered) {
        let (paused, paused_rx) = watch::channel(false);
        let (nudges, nudges_rx) = mpsc::unbounded_channel();
        let steering = Steering {
            token: CancellationToken::new(),
            paused,
            nudges,
            unsure: false.into(),
        };
        (steering, (paused_rx, nudges_rx))
    }

    /// An adopted attempt's steering: its first [`Self::set_paused`] is passed on even if
    /// it says what the steering says already.
    pub fn of(
        token: CancellationToken,
        paused: watch::Sender<bool>,
        nudges: mpsc::UnboundedSender<Nudge>,
    ) -> Steering {
        Steering {
            token,
            paused,
            nudges,
            unsure: true.into(),
        }
    }

    /// Passes `nudge` on to the attempt (nothing once it has ended).
    pub fn nudge(&self, nudge: Nudge) {
        let _ = self.nudges.send(nudge);
    }

    /// Pauses (`true`) or resumes the attempt; nothing is sent when it is so already
    /// (except the first time for an adopted attempt).
    pub fn set_paused(&self, paused: bool) {
        if self.unsure.swap(false, std::sync::atomic::Ordering::SeqCst) {
            self.paused.send_replace(paused);
            return;
        }
        self.paused
            .send_if_modified(|now| std::mem::replace(now, paused) != paused);
    }
}

/// The launch's end of a [`Steering`]: whether it is paused, and its nudges.
pub type Steered = (watch::Receiver<bool>, mpsc::UnboundedReceiver<Nudge>);
