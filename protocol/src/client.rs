//! A blocking client for the daemon's Unix socket.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::frame::{FrameError, FrameReader, write_frame};
use crate::message::{ErrorKind, ErrorReply, Hello, Request, Response, Welcome};
use crate::{PROTOCOL_VERSION, paths};

/// How often a blocked read wakes up to ask whether the caller was interrupted.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How long a daemon may take to answer the handshake before it counts as not answering.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answers on the socket.
    #[error(
        "the orchestrator daemon is not running (nothing answers on {}). Start it with `orch daemon start`, or point ${} at a running daemon's socket",
        socket.display(),
        paths::SOCKET_ENV
    )]
    NotRunning {
        /// The socket that was tried.
        socket: PathBuf,
    },
    /// Something accepted the connection but did not complete the handshake in time.
    #[error("the daemon on {} accepted the connection but did not answer within {seconds}s", socket.display())]
    NoAnswer {
        /// The socket that was tried.
        socket: PathBuf,
        /// How long the client waited.
        seconds: u64,
    },
    /// The connection failed after it was made.
    #[error("connection to the daemon failed: {0}")]
    Frame(#[from] FrameError),
    /// The daemon refused the request.
    #[error("{0}")]
    Daemon(ErrorReply),
    /// The daemon answered with something this client did not expect.
    #[error("unexpected answer from the daemon: {0}")]
    Unexpected(String),
}

impl ClientError {
    /// True when the caller's interrupt (Ctrl-C) stopped the call.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, ClientError::Frame(FrameError::Interrupted))
    }

    /// True when the connection itself broke (so a fresh connection may succeed).
    pub fn is_connection_lost(&self) -> bool {
        matches!(
            self,
            ClientError::Frame(FrameError::Closed) | ClientError::Frame(FrameError::Io(_))
        )
    }
}

/// A connection to the daemon, after a successful handshake.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    reader: FrameReader,
    socket: PathBuf,
    welcome: Welcome,
}

fn never() -> bool {
    false
}

impl Client {
    /// Connects to the socket at `socket` and performs the version handshake.
    /// `client_name` identifies the caller in the daemon's log.
    pub fn connect(socket: &Path, client_name: &str) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(socket).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => ClientError::NotRunning {
                socket: socket.to_path_buf(),
            },
            _ => ClientError::Frame(FrameError::Io(io::Error::new(
                e.kind(),
                format!("cannot connect to {}: {e}", socket.display()),
            ))),
        })?;
        stream
            .set_read_timeout(Some(POLL_INTERVAL))
            .map_err(FrameError::Io)?;
        let mut client = Client {
            stream,
            reader: FrameReader::new(),
            socket: socket.to_path_buf(),
            welcome: Welcome {
                protocol: 0,
                daemon_version: String::new(),
                pid: 0,
            },
        };
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            client: client_name.to_string(),
        };
        // A daemon that refuses this peer answers and hangs up without reading, so the
        // hello may fail to send while the refusal is already waiting to be read.
        let sent = write_frame(&mut client.stream, &hello);
        let deadline = std::time::Instant::now() + HANDSHAKE_TIMEOUT;
        let late = || std::time::Instant::now() >= deadline;
        let answer = client
            .reader
            .read::<serde_json::Value>(&mut client.stream, &late);
        match (answer, sent) {
            (Ok(answer), _) => {
                client.welcome = parse_welcome(answer)?;
                Ok(client)
            }
            (Err(FrameError::Interrupted), _) => Err(ClientError::NoAnswer {
                socket: socket.to_path_buf(),
                seconds: HANDSHAKE_TIMEOUT.as_secs(),
            }),
            (Err(_), Err(e)) | (Err(e), Ok(())) => Err(e.into()),
        }
    }

    /// Connects to the default socket ([`paths::default_socket_path`]).
    pub fn connect_default(client_name: &str) -> Result<Client, ClientError> {
        Client::connect(&paths::default_socket_path(), client_name)
    }

    /// The daemon's handshake answer.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// The socket this client is connected to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sends a request and waits for its single answer. An error answer becomes
    /// [`ClientError::Daemon`].
    pub fn call(&mut self, request: &Request) -> Result<Response, ClientError> {
        self.call_interruptible(request, &never)
    }

    /// Like [`Client::call`], but stops waiting when `interrupted` returns true.
    pub fn call_interruptible(
        &mut self,
        request: &Request,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Response, ClientError> {
        self.send(request)?;
        self.next(interrupted)
    }

    /// Sends a request without waiting (for streams: read items with [`Client::next`]).
    pub fn send(&mut self, request: &Request) -> Result<(), ClientError> {
        write_frame(&mut self.stream, request)?;
        Ok(())
    }

    /// Reads the remaining parts of a task list whose first part was `first`, and returns
    /// the whole list.
    pub fn collect_tasks(
        &mut self,
        first: Response,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Vec<crate::Task>, ClientError> {
        let mut all = Vec::new();
        let mut part = first;
        loop {
            match part {
                Response::Tasks { tasks, more } => {
                    all.extend(tasks);
                    if !more {
                        return Ok(all);
                    }
                }
                other => return Err(ClientError::Unexpected(format!("{other:?}"))),
            }
            part = self.next(interrupted)?;
        }
    }

    /// Reads the next answer or stream item. An error answer becomes [`ClientError::Daemon`].
    pub fn next(&mut self, interrupted: &dyn Fn() -> bool) -> Result<Response, ClientError> {
        match self.reader.read(&mut self.stream, interrupted)? {
            Response::Error(reply) => Err(ClientError::Daemon(reply)),
            other => Ok(other),
        }
    }
}

/// Accepts a welcome, or turns the daemon's refusal into an error.
fn parse_welcome(answer: serde_json::Value) -> Result<Welcome, ClientError> {
    if let Ok(welcome) = serde_json::from_value::<Welcome>(answer.clone()) {
        return Ok(welcome);
    }
    match serde_json::from_value::<Response>(answer) {
        Ok(Response::Error(reply)) => Err(ClientError::Daemon(reply)),
        Ok(other) => Err(ClientError::Unexpected(format!("{other:?}"))),
        Err(e) => Err(ClientError::Daemon(ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!(
                "the daemon's handshake could not be read ({e}); is it a provisioning-orchestrator of another version?"
            ),
        ))),
    }
}
