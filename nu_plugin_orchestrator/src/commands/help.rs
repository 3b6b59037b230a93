//! What `help` shows of the commands described by a table (a const per command): their
//! examples, listed as pairs.

use nu_protocol::Example;

/// Examples from (command line, what it does) pairs, without expected values.
pub fn examples(listed: &'static [(&'static str, &'static str)]) -> Vec<Example<'static>> {
    listed
        .iter()
        .map(|(example, description)| Example {
            example,
            description,
            result: None,
        })
        .collect()
}
