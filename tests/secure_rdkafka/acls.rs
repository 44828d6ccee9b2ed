//! ACLs: what docs/security.md lists for each stage shape, granted with Kafka's AclCommand
//! (`scripts/kafka acl`), and the tests that the documented commands are exactly the ones granted.

/// One `kafka-acls.sh --add` invocation: principal, pattern type, operations, resources.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Grant {
    pattern: &'static str,
    operations: Vec<&'static str>,
    pub(crate) resource: (&'static str, String),
}

impl Grant {
    fn literal(operations: &[&'static str], kind: &'static str, name: &str) -> Self {
        Grant { pattern: "literal", operations: operations.to_vec(), resource: (kind, name.to_owned()) }
    }
    fn prefixed(operations: &[&'static str], kind: &'static str, name: &str) -> Self {
        Grant { pattern: "prefixed", operations: operations.to_vec(), resource: (kind, name.to_owned()) }
    }

    /// The same grant without `operation` (which it must hold).
    pub(crate) fn without(&self, operation: &str) -> Self {
        assert!(self.operations.contains(&operation), "{self:?} does not grant {operation}");
        Grant { operations: self.operations.iter().copied().filter(|o| *o != operation).collect(), ..self.clone() }
    }

    /// The AclCommand arguments after `--add --allow-principal User:<user>`.
    fn args(&self) -> Vec<String> {
        let mut args = vec!["--resource-pattern-type".to_owned(), self.pattern.to_owned()];
        for operation in &self.operations {
            args.push("--operation".into());
            args.push((*operation).into());
        }
        args.push(format!("--{}", self.resource.0));
        args.push(self.resource.1.clone());
        args
    }
}

/// The transformer's ACLs (docs/security.md, "Transformer"): one line each.
pub(crate) fn transformer_acls(app: &str, inputs: &[&str], configs: &[&str], outputs: &[&str]) -> Vec<Grant> {
    let mut grants = Vec::new();
    for input in inputs {
        grants.push(Grant::literal(&["Read", "Describe"], "topic", input));
    }
    for config in configs {
        grants.push(Grant::literal(&["Read", "Describe"], "topic", config));
    }
    for output in outputs {
        grants.push(Grant::literal(&["Write", "Describe"], "topic", output));
    }
    grants.push(Grant::literal(&["Read", "Write", "Describe", "Create"], "topic", &format!("{app}-changelog")));
    grants.push(Grant::literal(&["Read", "Describe"], "group", app));
    grants.push(Grant::prefixed(&["Write", "Describe"], "transactional-id", &format!("{app}-")));
    grants
}

/// The extractor's ACLs (docs/security.md, "Extractor"): one line each.
pub(crate) fn extractor_acls(app: &str, configs: &[&str], outputs: &[&str]) -> Vec<Grant> {
    let mut grants = Vec::new();
    for config in configs {
        grants.push(Grant::literal(&["Read", "Describe"], "topic", config));
    }
    for output in outputs {
        grants.push(Grant::literal(&["Write", "Describe"], "topic", output));
    }
    grants.push(Grant::literal(&["Read", "Write", "Describe", "Create"], "topic", &format!("{app}-changelog")));
    grants.push(Grant::literal(&["Read", "Describe"], "group", app));
    grants.push(Grant::prefixed(&["Write", "Describe"], "transactional-id", &format!("{app}-")));
    grants
}

/// The MQTT bridge's ACLs (docs/security.md, "MQTT bridge"): one line each. No group and no
/// changelog: the broker-dispatched loop takes no lease and keeps no state (EXT-50, EXT-51).
pub(crate) fn mqtt_bridge_acls(app: &str, client_id: &str, configs: &[&str], outputs: &[&str]) -> Vec<Grant> {
    let mut grants = Vec::new();
    for config in configs {
        grants.push(Grant::literal(&["Read", "Describe"], "topic", config));
    }
    for output in outputs {
        grants.push(Grant::literal(&["Write", "Describe"], "topic", output));
    }
    grants.push(Grant::literal(&["Write", "Describe"], "transactional-id", &format!("{app}-{client_id}")));
    grants
}

fn acl_command() -> Vec<String> {
    match std::env::var("KAFKA_ACL_COMMAND") {
        Ok(command) if !command.is_empty() => command.split_whitespace().map(str::to_owned).collect(),
        _ => vec![format!("{}/scripts/kafka", env!("CARGO_MANIFEST_DIR")), "acl".into()],
    }
}

/// Grants `grants` to `user`, one AclCommand run per grant, concurrently.
pub(crate) async fn grant(user: &str, grants: &[Grant]) {
    let runs = grants.iter().map(|g| {
        let mut command = acl_command();
        command.extend(["--add".to_owned(), "--allow-principal".to_owned(), format!("User:{user}")]);
        command.extend(g.args());
        async move {
            let output = tokio::process::Command::new(&command[0])
                .args(&command[1..])
                .output()
                .await
                .unwrap_or_else(|e| panic!("running {command:?}: {e}"));
            assert!(output.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        }
    });
    futures::future::join_all(runs).await;
}

/// docs/security.md lists, as `kafka-acls.sh` commands, exactly what `transformer_acls` grants
/// (the test below grants nothing else).
#[test]
fn the_documented_transformer_acls_are_the_ones_granted() {
    let granted = transformer_acls("APPLICATION_ID", &["INPUT"], &["CONFIG"], &["OUTPUT"]);
    assert_eq!(documented_acls("### Transformer"), commands(&granted), "docs/security.md and transformer_acls differ");
}

/// docs/security.md's extractor commands are exactly what `extractor_acls` grants.
#[test]
fn the_documented_extractor_acls_are_the_ones_granted() {
    let granted = extractor_acls("APPLICATION_ID", &["CONFIG"], &["OUTPUT"]);
    assert_eq!(documented_acls("### Extractor"), commands(&granted), "docs/security.md and extractor_acls differ");
}

/// docs/security.md's MQTT bridge commands are exactly what `mqtt_bridge_acls` grants.
#[test]
fn the_documented_mqtt_bridge_acls_are_the_ones_granted() {
    let granted = mqtt_bridge_acls("APPLICATION_ID", "CLIENT_ID", &["CONFIG"], &["OUTPUT"]);
    assert_eq!(documented_acls("### MQTT bridge"), commands(&granted), "docs/security.md and mqtt_bridge_acls differ");
}

/// The `kafka-acls.sh` lines of one section of docs/security.md.
fn documented_acls(section: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/security.md")).expect("docs");
    let start = doc.find(section).unwrap_or_else(|| panic!("docs/security.md has no {section}"));
    let rest = &doc[start + section.len()..];
    let end = rest.find("\n### ").unwrap_or(rest.len());
    rest[..end]
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("kafka-acls.sh --add --allow-principal User:APP "))
        .map(str::to_owned)
        .collect()
}

fn commands(grants: &[Grant]) -> Vec<String> {
    grants.iter().map(|g| format!("kafka-acls.sh --add --allow-principal User:APP {}", g.args().join(" "))).collect()
}
