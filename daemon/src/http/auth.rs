//! Bearer tokens and roles for the HTTP shim.
//!
//! Tokens live in `tokens.json` in the data directory (mode 0600), created at the first
//! start with `--port`: one token per role. Each request's token gives its role; each
//! route needs one ([`Role::for_route`]): viewer reads, operator also submits, cancels
//! and runs tests, admin may do everything, including reading the audit log and making
//! tokens.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Read anything but the audit log.
    Viewer,
    /// Also submit, cancel, roll back, create and run test environments.
    Operator,
    /// Everything, including the audit log and tokens.
    Admin,
}

impl Role {
    /// The role a request needs: reads need viewer, changes operator, the audit log and
    /// tokens admin.
    pub fn for_route(method: &axum::http::Method, path: &str) -> Role {
        if path.starts_with("/audit") || path.starts_with("/auth") {
            Role::Admin
        } else if method == axum::http::Method::GET || method == axum::http::Method::HEAD {
            Role::Viewer
        } else {
            Role::Operator
        }
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

/// One token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Token {
    /// A name for the audit log.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// The secret.
    pub token: String,
}

#[derive(Serialize, Deserialize)]
struct TokenFile {
    tokens: Vec<Token>,
}

/// The tokens, from their file.
pub struct Tokens {
    path: PathBuf,
    tokens: RwLock<Vec<Token>>,
}

impl Tokens {
    /// Reads `path`, creating it (mode 0600) with one token per role when missing.
    pub fn load_or_create(path: &Path) -> std::io::Result<Tokens> {
        let tokens = match std::fs::read_to_string(path) {
            Ok(text) => {
                serde_json::from_str::<TokenFile>(&text)
                    .map_err(|e| {
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("{} is not a token file: {e}", path.display()),
                        )
                    })?
                    .tokens
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let tokens: Vec<Token> = [Role::Admin, Role::Operator, Role::Viewer]
                    .into_iter()
                    .map(|role| Token {
                        name: role.as_str().to_string(),
                        role,
                        token: new_secret(),
                    })
                    .collect();
                write(path, &tokens)?;
                tokens
            }
            Err(e) => return Err(e),
        };
        Ok(Tokens {
            path: path.to_path_buf(),
            tokens: RwLock::new(tokens),
        })
    }

    /// The token matching `secret` (compared in constant time).
    pub fn find(&self, secret: &str) -> Option<Token> {
        let presented = Sha256::digest(secret.as_bytes());
        let tokens = self.tokens.read().unwrap_or_else(|p| p.into_inner());
        tokens
            .iter()
            .find(|t| {
                let known = Sha256::digest(t.token.as_bytes());
                known
                    .iter()
                    .zip(presented.iter())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
            })
            .cloned()
    }

    /// Makes a new token (persisted before it is returned).
    pub fn create(&self, name: &str, role: Role) -> std::io::Result<Token> {
        let token = Token {
            name: name.to_string(),
            role,
            token: new_secret(),
        };
        let mut tokens = self.tokens.write().unwrap_or_else(|p| p.into_inner());
        let mut next = tokens.clone();
        next.push(token.clone());
        write(&self.path, &next)?;
        *tokens = next;
        Ok(token)
    }

    /// Names and roles, without the secrets.
    pub fn list(&self) -> Vec<(String, Role)> {
        let tokens = self.tokens.read().unwrap_or_else(|p| p.into_inner());
        tokens.iter().map(|t| (t.name.clone(), t.role)).collect()
    }
}

/// 32 random bytes as hex.
fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_err()
    {
        bytes.iter_mut().for_each(|b| *b = fastrand::u8(..));
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes the token file atomically, mode 0600 from its creation.
fn write(path: &Path, tokens: &[Token]) -> std::io::Result<()> {
    let body = serde_json::to_vec_pretty(&TokenFile {
        tokens: tokens.to_vec(),
    })
    .expect("tokens serialize");
    crate::files::write_atomically(path, &body, 0o600)
}
