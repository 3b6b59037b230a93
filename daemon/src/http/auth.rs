//! Bearer tokens for the HTTP shim.
//!
//! Tokens live in `tokens.json` in the data directory (mode 0600), created at the first
//! start with `--port`: one token per role. Each request's token gives its [`Role`]; each
//! route needs the one its operation's row says ([`crate::ops::OPERATIONS`]): viewer
//! reads, operator also submits, cancels and runs tests, admin may do everything,
//! including reading the audit log and making, listing and revoking tokens. Secrets come
//! from the operating system's RNG (`getrandom`, no fallback); a token is named by a
//! public id (a prefix of its secret's SHA-256) and revoked by that id, effective at once.
//! The last admin token cannot be revoked (409), so the admins cannot lock themselves out.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::policy::Role;

/// One token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Token {
    /// A name for the audit log.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// The secret.
    pub token: String,
    /// When it was made (absent for tokens from files written before this was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

impl Token {
    /// A new token with a fresh secret (fails closed when the system's RNG cannot serve).
    fn new(name: &str, role: Role) -> Result<Token, TokenError> {
        Ok(Token {
            name: name.to_string(),
            role,
            token: new_secret()?,
            created_at: Some(Utc::now()),
        })
    }

    /// Its public identifier: the first 16 hex digits of the secret's SHA-256 (stable,
    /// and it reveals nothing usable about the secret).
    pub fn id(&self) -> String {
        hex(&Sha256::digest(self.token.as_bytes())[..8])
    }

    /// What may be shown of it: everything but the secret.
    pub fn summary(&self) -> TokenSummary {
        TokenSummary {
            id: self.id(),
            name: self.name.clone(),
            role: self.role,
            created_at: self.created_at,
        }
    }
}

/// A token without its secret, as `GET /auth/tokens` lists it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TokenSummary {
    /// Its identifier (for `DELETE /auth/tokens/{id}`).
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// When it was made (absent for tokens made before this was recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
}

/// Why a token could not be made or revoked.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// No token has this id.
    #[error("there is no token with the id `{0}`")]
    NotFound(String),
    /// Revoking it would leave no admin token (nobody could manage tokens any more).
    #[error("the token `{0}` is the last admin token; make another admin token before revoking it")]
    LastAdmin(String),
    /// The system's random number generator failed (no token is made without it).
    #[error("no secure random bytes for a token secret: {0}")]
    Random(getrandom::Error),
    /// The token file could not be read or written.
    #[error("the token file: {0}")]
    Io(#[from] std::io::Error),
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
    pub fn load_or_create(path: &Path) -> Result<Tokens, TokenError> {
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
                let tokens = [Role::Admin, Role::Operator, Role::Viewer]
                    .into_iter()
                    .map(|role| Token::new(role.as_str(), role))
                    .collect::<Result<Vec<Token>, TokenError>>()?;
                write(path, &tokens)?;
                tokens
            }
            Err(e) => return Err(e.into()),
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
    pub fn create(&self, name: &str, role: Role) -> Result<Token, TokenError> {
        let token = Token::new(name, role)?;
        self.change(|tokens| {
            tokens.push(token.clone());
            Ok(())
        })?;
        Ok(token)
    }

    /// Revokes the token `id`: removed from the file (atomically) before it stops working,
    /// at once. The last admin token cannot be revoked.
    pub fn revoke(&self, id: &str) -> Result<Token, TokenError> {
        let mut revoked = None;
        self.change(|tokens| {
            let index = tokens
                .iter()
                .position(|t| t.id() == id)
                .ok_or_else(|| TokenError::NotFound(id.to_string()))?;
            let admins = tokens.iter().filter(|t| t.role == Role::Admin).count();
            if tokens[index].role == Role::Admin && admins == 1 {
                return Err(TokenError::LastAdmin(tokens[index].name.clone()));
            }
            revoked = Some(tokens.remove(index));
            Ok(())
        })?;
        Ok(revoked.expect("set when the change succeeded"))
    }

    /// The tokens without their secrets.
    pub fn list(&self) -> Vec<TokenSummary> {
        let tokens = self.tokens.read().unwrap_or_else(|p| p.into_inner());
        tokens.iter().map(Token::summary).collect()
    }

    /// Applies `edit` to a copy of the tokens, writes the copy, then makes it current (so
    /// the file never lags what is in force).
    fn change(
        &self,
        edit: impl FnOnce(&mut Vec<Token>) -> Result<(), TokenError>,
    ) -> Result<(), TokenError> {
        let mut tokens = self.tokens.write().unwrap_or_else(|p| p.into_inner());
        let mut next = tokens.clone();
        edit(&mut next)?;
        write(&self.path, &next)?;
        *tokens = next;
        Ok(())
    }
}

/// 32 bytes from the operating system's secure RNG, as hex; an error when it fails
/// (never a weaker fallback).
fn new_secret() -> Result<String, TokenError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(TokenError::Random)?;
    Ok(hex(&bytes))
}

fn hex(bytes: &[u8]) -> String {
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
