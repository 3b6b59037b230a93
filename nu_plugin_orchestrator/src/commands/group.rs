//! `orch` and `orch daemon`: command groups that list their sub-commands.

use nu_plugin::{EngineInterface, EvaluatedCall, SimplePluginCommand};
use nu_protocol::{Category, Example, LabeledError, Signature, Type, Value};

use crate::OrchestratorPlugin;

/// A command that only shows the help of its group.
pub struct Group {
    name: &'static str,
    description: &'static str,
    extra_description: &'static str,
}

/// `orch`
pub const ORCH: Group = Group {
    name: "orch",
    description: "Drive the provisioning orchestrator: a durable task queue and runner.",
    extra_description: "Start the daemon with `orch daemon start`, submit work with `orch submit`, and follow it with `orch tasks`, `orch watch` and `orch logs`.",
};

/// `orch group`
pub const GROUP: Group = Group {
    name: "orch group",
    description: "Groups of tasks, each with its own parallel limit and pause.",
    extra_description: "Every task runs in a group: the one `orch submit --group` (or a workflow's --group) names, else `default`. Change a limit at run time with `orch parallel N --group NAME`; hold a group with `orch pause --group NAME`.",
};

/// `orch schedule`
pub const SCHEDULE: Group = Group {
    name: "orch schedule",
    description: "Tasks and workflows submitted at the times of a cron pattern, in a time zone (durable; missed times by policy).",
    extra_description: "Add one with `orch schedule add NAME CRON ...`, see them with `orch schedule list` and `orch schedule next NAME`, and pause, resume or remove one by name.",
};

/// `orch notify`
pub const NOTIFY: Group = Group {
    name: "orch notify",
    description: "Notifications of task and workflow events to webhooks (signed) and local commands, through a durable outbox (at least once, with an idempotency key).",
    extra_description: "Add one with `orch notify add NAME --url http://... --secret S` or `--command [...]`; `orch notify test NAME` sends a test; `orch notify list` shows deliveries and failures. Admins only.",
};

/// `orch daemon`
pub const DAEMON: Group = Group {
    name: "orch daemon",
    description: "Start, stop and inspect the orchestrator daemon.",
    extra_description: "",
};

/// `orch cluster`
pub const CLUSTER: Group = Group {
    name: "orch cluster",
    description: "The cluster of daemons sharing one PostgreSQL store: its nodes and leader.",
    extra_description: "",
};

/// `orch workflow`
pub const WORKFLOW: Group = Group {
    name: "orch workflow",
    description: "Submit, plan, follow, cancel and roll back workflows (DAGs of provisioning steps).",
    extra_description: "Follow a workflow's events with `orch watch --workflow ID`.",
};

/// `orch workflow submit`
pub const WORKFLOW_SUBMIT: Group = Group {
    name: "orch workflow submit",
    description: "Submit a workflow: servers, taskserv, cluster or batch.",
    extra_description: "",
};

/// `orch extensions`
pub const EXTENSIONS: Group = Group {
    name: "orch extensions",
    description: "The providers, taskservs and cluster definitions the daemon knows.",
    extra_description: "",
};

/// `orch test`
pub const TEST: Group = Group {
    name: "orch test",
    description: "Test environments: taskservs, servers and cluster topologies in real containers.",
    extra_description: "",
};

/// `orch test env`
pub const TEST_ENV: Group = Group {
    name: "orch test env",
    description: "Create, list, show, run, follow and delete test environments.",
    extra_description: "",
};

/// `orch test topology`
pub const TEST_TOPOLOGY: Group = Group {
    name: "orch test topology",
    description: "The topology templates of cluster test environments.",
    extra_description: "",
};

impl SimplePluginCommand for Group {
    type Plugin = OrchestratorPlugin;

    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        self.description
    }

    fn extra_description(&self) -> &str {
        self.extra_description
    }

    fn signature(&self) -> Signature {
        Signature::build(self.name)
            .input_output_type(Type::Nothing, Type::String)
            .category(Category::Custom("orchestrator".into()))
    }

    fn examples(&self) -> Vec<Example<'_>> {
        vec![Example {
            example: self.name,
            description: "List the commands of this group",
            result: None,
        }]
    }

    fn run(
        &self,
        _plugin: &OrchestratorPlugin,
        engine: &EngineInterface,
        call: &EvaluatedCall,
        _input: &Value,
    ) -> Result<Value, LabeledError> {
        Ok(Value::string(engine.get_help()?, call.head))
    }
}

#[test]
fn test_examples() {
    super::examples::test_examples(&ORCH);
    super::examples::test_examples(&DAEMON);
    super::examples::test_examples(&WORKFLOW);
    super::examples::test_examples(&WORKFLOW_SUBMIT);
    super::examples::test_examples(&EXTENSIONS);
    super::examples::test_examples(&TEST);
    super::examples::test_examples(&TEST_ENV);
    super::examples::test_examples(&TEST_TOPOLOGY);
}
