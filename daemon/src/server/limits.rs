//! What a client may hold open: timeouts, connection caps and the budget of request bytes
//! buffered across all connections (socket and HTTP).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use orch_protocol::{ErrorKind, ErrorReply};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a refused client is given to read its refusal before the connection closes.
const REFUSAL_GRACE: Duration = Duration::from_secs(1);

/// How many refusals may be in flight at once; past it connections are dropped unanswered.
const MAX_REFUSALS_IN_FLIGHT: usize = 64;

/// A listener the adapters accept connections from (the Unix socket, the HTTP port).
pub trait Listener {
    /// What an accepted connection is.
    type Stream: Send + 'static;
    /// The next connection.
    fn next(&self) -> impl std::future::Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Listener for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn next(&self) -> std::io::Result<Self::Stream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

impl Listener for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn next(&self) -> std::io::Result<Self::Stream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

/// Accepts connections from `listener` until `shutdown` is cancelled, at most as many at
/// once as `slots` has permits: each is handed to `serve`, holding its slot until that
/// ends; past the cap it goes to `refuse`. A failed accept (typically out of file
/// descriptors) is logged and retried after a pause instead of spinning. Both the socket
/// and the HTTP adapter accept this way.
pub async fn accept_until<L: Listener, F>(
    listener: &L,
    shutdown: tokio_util::sync::CancellationToken,
    slots: Arc<Semaphore>,
    interface: &'static str,
    mut serve: impl FnMut(L::Stream) -> F,
    mut refuse: impl FnMut(L::Stream),
) where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.next() => accepted,
        };
        match accepted {
            Ok(stream) => match slots.clone().try_acquire_owned() {
                Ok(slot) => {
                    let connection = serve(stream);
                    tokio::spawn(async move {
                        connection.await;
                        drop(slot);
                    });
                }
                Err(_) => refuse(stream),
            },
            Err(e) => {
                tracing::warn!(interface, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The limits every connection is held to (from the command line).
#[derive(Debug)]
pub struct Limits {
    /// The whole socket handshake must arrive within this.
    pub handshake_timeout: Duration,
    /// A request that has started must be complete within this.
    pub read_timeout: Duration,
    /// A socket connection silent between requests for this long is closed.
    pub idle_timeout: Duration,
    /// At most this many socket connections at once.
    pub max_socket_connections: usize,
    /// At most this many HTTP connections at once.
    pub max_http_connections: usize,
    /// Request bytes buffered across all connections.
    pub budget: ByteBudget,
    refusals: Semaphore,
    refused: AtomicU64,
}

impl Limits {
    /// The limits from the daemon's flags.
    pub fn from_cli(cli: &crate::config::Cli) -> Limits {
        Limits {
            handshake_timeout: cli.handshake_timeout,
            read_timeout: cli.read_timeout,
            idle_timeout: cli.idle_timeout,
            max_socket_connections: cli.max_socket_connections as usize,
            max_http_connections: cli.max_http_connections as usize,
            budget: ByteBudget::new(usize::try_from(cli.max_buffered_bytes).unwrap_or(usize::MAX)),
            refusals: Semaphore::new(MAX_REFUSALS_IN_FLIGHT),
            refused: AtomicU64::new(0),
        }
    }

    /// How many connections were refused since the start (both interfaces).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Refuses a connection over a cap: writes `answer`, stops writing, and lets the client
    /// read it (draining what it sends) for a moment before closing. At most
    /// [`MAX_REFUSALS_IN_FLIGHT`] refusals run at once; past that the connection is
    /// dropped at once, so a flood cannot hold descriptors through its refusals.
    pub fn refuse<S>(self: &Arc<Self>, stream: S, interface: &'static str, answer: Vec<u8>)
    where
        S: tokio::io::AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let total = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if total.is_power_of_two() {
            tracing::warn!(
                interface,
                refused_so_far = total,
                "a connection was refused: the connection cap is reached"
            );
        }
        let Ok(slot) = self.refusals.try_acquire() else {
            return;
        };
        slot.forget();
        let limits = self.clone();
        tokio::spawn(async move {
            send_refusal(stream, &answer).await;
            limits.refusals.add_permits(1);
        });
    }
}

async fn send_refusal<S>(mut stream: S, answer: &[u8])
where
    S: tokio::io::AsyncRead + AsyncWrite + Unpin,
{
    let drain = async {
        stream.write_all(answer).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        std::io::Result::Ok(())
    };
    let _ = tokio::time::timeout(REFUSAL_GRACE, drain).await;
}

/// A budget of bytes shared by every connection: a request's declared length is taken
/// from it before its body is read, and given back once the body is dropped.
#[derive(Debug)]
pub struct ByteBudget {
    bytes: Arc<Semaphore>,
    total: usize,
}

/// Bytes taken from a [`ByteBudget`]; given back on drop.
#[derive(Debug)]
pub struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
}

impl ByteBudget {
    /// A budget of `total` bytes.
    pub fn new(total: usize) -> ByteBudget {
        let total = total.min(Semaphore::MAX_PERMITS);
        ByteBudget {
            bytes: Arc::new(Semaphore::new(total)),
            total,
        }
    }

    /// The whole budget.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Takes `len` bytes, waiting up to `patience` for them to be free. The error names
    /// the limit (`--max-buffered-bytes`).
    pub async fn reserve(&self, len: usize, patience: Duration) -> Result<Reservation, ErrorReply> {
        if len == 0 {
            return Ok(Reservation { _permit: None });
        }
        let refused = || {
            ErrorReply::new(
                ErrorKind::Unavailable,
                format!(
                    "the daemon is busy: a request of {len} bytes does not fit in the {} bytes all clients together may have in transit (--max-buffered-bytes) within {}; try again",
                    self.total,
                    humantime::format_duration(patience)
                ),
            )
        };
        let permits = u32::try_from(len).map_err(|_| refused())?;
        if len > self.total {
            return Err(refused());
        }
        match tokio::time::timeout(patience, self.bytes.clone().acquire_many_owned(permits)).await {
            Ok(Ok(permit)) => Ok(Reservation {
                _permit: Some(permit),
            }),
            _ => Err(refused()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reservation_is_given_back_on_drop() {
        let budget = ByteBudget::new(100);
        let first = budget.reserve(80, Duration::from_millis(10)).await.unwrap();
        let refused = budget
            .reserve(30, Duration::from_millis(10))
            .await
            .unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Unavailable);
        assert!(
            refused.message.contains("--max-buffered-bytes"),
            "{}",
            refused.message
        );
        drop(first);
        budget.reserve(30, Duration::from_millis(10)).await.unwrap();
    }

    #[tokio::test]
    async fn a_request_larger_than_the_budget_is_refused_at_once() {
        let budget = ByteBudget::new(100);
        let err = budget
            .reserve(101, Duration::from_secs(60))
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unavailable);
    }
}
