//! Names that become paths, URLs or command arguments: a request (or a settings file)
//! may only give plain names, which are then resolved inside the daemon's own directories.

use super::ExpandError;

/// The longest plain name.
const MAX_PLAIN: usize = 128;

/// The longest hostname label (RFC 1123).
const MAX_LABEL: usize = 63;

/// Whether `value` is a plain name: 1 to 128 ASCII letters, digits, `-`, `_` or `.`, not
/// starting with `.` or `-` (so never a path, `..`, or an option).
pub fn is_plain(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_PLAIN
        && !value.starts_with(['.', '-'])
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `Ok` when `value` (the request's `field`) is a plain name, else an error naming both.
pub fn plain(field: &str, value: &str) -> Result<(), ExpandError> {
    if is_plain(value) {
        Ok(())
    } else {
        Err(ExpandError::Invalid(format!(
            "`{field}`: `{}` is not a plain name (1 to {MAX_PLAIN} letters, digits, `-`, `_` or `.`, not starting with `.` or `-`; no `/`)",
            shown(value)
        )))
    }
}

/// Whether `value` is a hostname label as RFC 1123 has it: 1 to 63 ASCII letters, digits
/// or `-`, neither starting nor ending with `-`.
pub fn is_hostname(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_LABEL
        && !value.starts_with('-')
        && !value.ends_with('-')
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Why a value is not a hostname, for messages.
pub const HOSTNAME_RULE: &str = "a hostname is an RFC 1123 label: 1 to 63 letters, digits or `-`, not starting or ending with `-`";

/// At most the first 80 characters of `value` (a hostile value may be megabytes long).
pub fn shown(value: &str) -> String {
    match value.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_never_paths_or_options() {
        for good in ["lab", "web-01", "settings.yaml", "a_b.c", "A9"] {
            assert!(is_plain(good), "{good}");
        }
        for bad in [
            "", ".", "..", "../x", "/etc", "a/b", "-rf", ".hidden", "a b", "a\0b", "é",
        ] {
            assert!(!is_plain(bad), "{bad:?}");
        }
        assert!(!is_plain(&"a".repeat(129)));
    }

    #[test]
    fn hostnames_are_rfc_1123_labels() {
        for good in ["web-01", "h1", "A", "x9-y"] {
            assert!(is_hostname(good), "{good}");
        }
        for bad in [
            "",
            "x/../../containers/victim",
            "-oProxyCommand",
            "web-",
            "a.b",
            "a_b",
            "a%2F",
        ] {
            assert!(!is_hostname(bad), "{bad:?}");
        }
        assert!(!is_hostname(&"a".repeat(64)));
    }
}
