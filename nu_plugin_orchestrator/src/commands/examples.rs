//! The check every command's `test_examples()` runs on its examples.

use nu_plugin::PluginCommand;

use crate::OrchestratorPlugin;

/// Parse errors caused by builtins the test harness does not load (`where`, and the
/// closure parameters of `each`).
fn caused_by_missing_builtin(error: &nu_protocol::ParseError) -> bool {
    use nu_protocol::ParseError;
    match error {
        ParseError::UnknownState(message, _) => message.contains("declaration not found"),
        ParseError::VariableNotFound(..) => true,
        _ => false,
    }
}

/// Checks a command's examples: every example must parse against the plugin's real
/// signatures (flags, their types, arity), and those with an expected value must produce it.
pub fn test_examples(command: &impl PluginCommand<Plugin = OrchestratorPlugin>) {
    let mut test = nu_plugin_test_support::PluginTest::new(
        "orchestrator",
        OrchestratorPlugin::default().into(),
    )
    .expect("the plugin loads in the test harness");
    for example in command.examples() {
        let mut working_set = nu_protocol::engine::StateWorkingSet::new(test.engine_state());
        nu_parser::parse(&mut working_set, None, example.example.as_bytes(), false);
        // The harness knows the language core and this plugin, not filters such as `where`
        // or `each`: errors that only come from those missing commands are not the
        // example's fault. Everything about our own commands (flags, types, arity) counts.
        let errors: Vec<_> = working_set
            .parse_errors
            .iter()
            .filter(|e| !caused_by_missing_builtin(e))
            .collect();
        assert!(
            errors.is_empty(),
            "example `{}` of `{}` does not parse: {errors:?}",
            example.example,
            command.name(),
        );
    }
    test.test_command_examples(command)
        .expect("the examples with expected values pass");
}
