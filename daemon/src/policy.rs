//! Who may do what, whatever the interface: the roles, what an operation needs
//! ([`Access`], given per operation in [`crate::ops::OPERATIONS`]), who sees secrets, who
//! may name directories, and the role of a socket peer.
//!
//! Nothing here knows HTTP or frames: the socket and HTTP adapters ask these rules and
//! word the refusal their own way.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// What a caller may do (a token's role over HTTP, a peer's on the socket).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
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
    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// The role named `name` (as [`Role::as_str`] gives it).
    pub fn from_name(name: &str) -> Option<Role> {
        [Role::Viewer, Role::Operator, Role::Admin]
            .into_iter()
            .find(|role| role.as_str() == name)
    }

    /// Whether it sees submitted values as they are (below admin, secrets are redacted:
    /// [`crate::redact`]).
    pub fn sees_secrets(self) -> bool {
        self >= Role::Admin
    }
}

/// What an operation needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone who reaches the interface (HTTP: without a token).
    Anyone,
    /// A caller with at least this role.
    Needs(Role),
}

impl Access {
    /// `Err(the role needed)` when a caller with `role` may not.
    pub fn check(self, role: Role) -> Result<(), Role> {
        match self {
            Access::Needs(needed) if role < needed => Err(needed),
            Access::Anyone | Access::Needs(_) => Ok(()),
        }
    }

    /// The role needed, if any.
    pub fn role(self) -> Option<Role> {
        match self {
            Access::Anyone => None,
            Access::Needs(role) => Some(role),
        }
    }
}

/// The role of a socket peer: the daemon's owner is admin, a user granted a role
/// (`--allow-user`) has it, anyone else none (refused).
pub fn socket_role(peer_uid: Option<u32>, grants: &HashMap<u32, Role>) -> Option<Role> {
    match peer_uid {
        Some(uid) if uid == crate::socket::owner_uid() => Some(Role::Admin),
        Some(uid) => grants.get(&uid).copied(),
        None => None,
    }
}

/// Who submits a workflow, for the directories its request may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitter {
    /// The daemon's own user on the socket: may name any workspace and batch directory
    /// (it can read them anyway).
    Owner,
    /// A token over HTTP, or a user granted a role on the socket: the daemon's workspace
    /// only.
    Confined,
}

impl Submitter {
    /// The submitter behind a socket peer: the owner when it is the daemon's user.
    pub fn of_socket_peer(uid: u32) -> Submitter {
        if uid == crate::socket::owner_uid() {
            Submitter::Owner
        } else {
            Submitter::Confined
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_admits_its_role_and_those_above_and_names_what_it_needs() {
        let operator = Access::Needs(Role::Operator);
        assert_eq!(operator.check(Role::Viewer), Err(Role::Operator));
        assert_eq!(operator.check(Role::Operator), Ok(()));
        assert_eq!(operator.check(Role::Admin), Ok(()));
        assert_eq!(Access::Anyone.check(Role::Viewer), Ok(()));
        assert!(Role::Admin.sees_secrets() && !Role::Operator.sees_secrets());
    }

    #[test]
    fn the_owner_is_admin_a_granted_user_has_its_role_and_others_none() {
        let owner = crate::socket::owner_uid();
        let other = owner.wrapping_add(1);
        let grants = HashMap::from([(other, Role::Viewer)]);
        assert_eq!(socket_role(Some(owner), &grants), Some(Role::Admin));
        assert_eq!(socket_role(Some(other), &grants), Some(Role::Viewer));
        assert_eq!(socket_role(Some(other.wrapping_add(1)), &grants), None);
        assert_eq!(socket_role(None, &grants), None);
        assert_eq!(Submitter::of_socket_peer(owner), Submitter::Owner);
        assert_eq!(Submitter::of_socket_peer(other), Submitter::Confined);
    }
}
