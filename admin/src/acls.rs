//! `broker acls add|list|remove`: ACLs as kafka-acls.sh manages them (`--add`, `--list`,
//! `--remove`), over CreateAcls (API 30), DescribeAcls (29) and DeleteAcls (31) to one broker
//! (which sends a change on to the active controller).
//!
//! Flags are kafka-acls.sh's: `--allow-principal`/`--deny-principal` (each with
//! `--allow-host`/`--deny-host`, `*` when none is given), `--operation` (Kafka's names in any
//! case, `All` when none is given), the resources `--topic`, `--group`, `--cluster`,
//! `--transactional-id`, and `--resource-pattern-type` (literal by default; list and remove
//! also take `any` and `match`). `list` with no resource lists every ACL, `--principal`
//! keeps one principal's. `remove` with no principal removes every ACL of the resources,
//! without kafka-acls.sh's confirmation prompt (as with its `--force`). Output follows
//! kafka-acls.sh: "Adding ACLs for resource `ResourcePattern(...)`:" and "Current ACLs for
//! resource `ResourcePattern(...)`:" with one `(principal=..., host=..., operation=...,
//! permissionType=...)` line per ACL; `--json` prints one object per ACL. A refused ACL or
//! filter is reported by Kafka's error name and makes the exit status 1.

use std::io::Write;

use acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
    ResourcePattern, ResourceType,
};
use anyhow::{bail, Context};
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::create_acls_request::AclCreation;
use wire::generated::delete_acls_request::DeleteAclsFilter;
use wire::generated::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};

use super::client::Client;
use super::CommonArgs;
use kclient::error::refusal;

/// The newest version of the three APIs (each 0..=3; 1 added pattern types).
const ACL_API_VERSION: i16 = 3;

/// `broker acls ...`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AclsCommand {
    /// Adds ACLs (kafka-acls.sh --add).
    Add(AclArgs),
    /// Lists ACLs (kafka-acls.sh --list): every ACL, or those of the resources named.
    List(AclArgs),
    /// Removes ACLs (kafka-acls.sh --remove): those named, or with no principal every ACL of
    /// the resources named.
    Remove(AclArgs),
}

/// kafka-acls.sh's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct AclArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// A principal allowed (`User:alice`); repeatable.
    #[arg(long)]
    pub allow_principal: Vec<String>,
    /// A principal denied; repeatable.
    #[arg(long)]
    pub deny_principal: Vec<String>,
    /// A host the allowing ACLs name (default `*`); repeatable.
    #[arg(long)]
    pub allow_host: Vec<String>,
    /// A host the denying ACLs name (default `*`); repeatable.
    #[arg(long)]
    pub deny_host: Vec<String>,
    /// An operation (Read, Write, Create, Delete, Alter, Describe, ClusterAction,
    /// DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, All);
    /// repeatable, `All` when none is given.
    #[arg(long)]
    pub operation: Vec<String>,
    /// A topic resource (`*` for every topic); repeatable.
    #[arg(long)]
    pub topic: Vec<String>,
    /// A consumer group resource; repeatable.
    #[arg(long)]
    pub group: Vec<String>,
    /// The cluster resource (`kafka-cluster`).
    #[arg(long)]
    pub cluster: bool,
    /// A transactional id resource; repeatable.
    #[arg(long)]
    pub transactional_id: Vec<String>,
    /// literal or prefixed; list and remove also any or match.
    #[arg(long, default_value = "literal", value_parser = parse_pattern_type)]
    pub resource_pattern_type: PatternType,
    /// list: only this principal's ACLs; repeatable.
    #[arg(long)]
    pub principal: Vec<String>,
}

fn parse_pattern_type(text: &str) -> Result<PatternType, String> {
    match PatternType::parse(text) {
        PatternType::Unknown => Err(format!(
            "unknown resource pattern type '{text}' (literal, prefixed, any or match)"
        )),
        pattern_type => Ok(pattern_type),
    }
}

impl AclArgs {
    /// The resources named, as (type, name).
    fn resources(&self) -> Vec<(ResourceType, String)> {
        let mut resources: Vec<(ResourceType, String)> = Vec::new();
        resources.extend(self.topic.iter().map(|t| (ResourceType::Topic, t.clone())));
        resources.extend(self.group.iter().map(|g| (ResourceType::Group, g.clone())));
        if self.cluster {
            resources.push((ResourceType::Cluster, acl::CLUSTER_NAME.to_string()));
        }
        resources.extend(
            self.transactional_id
                .iter()
                .map(|t| (ResourceType::TransactionalId, t.clone())),
        );
        resources
    }

    fn operations(&self) -> anyhow::Result<Vec<AclOperation>> {
        if self.operation.is_empty() {
            return Ok(vec![AclOperation::All]);
        }
        let mut operations = Vec::new();
        for text in &self.operation {
            match AclOperation::parse(text.trim()) {
                AclOperation::Unknown => bail!("unknown operation '{text}'"),
                operation if !operations.contains(&operation) => operations.push(operation),
                _ => {}
            }
        }
        Ok(operations)
    }

    /// The entries the principal, host and operation flags make: each allowed principal on
    /// each allowed host for each operation, then the same for denials.
    fn entries(&self) -> anyhow::Result<Vec<AccessControlEntry>> {
        let operations = self.operations()?;
        let star = vec![acl::WILDCARD.to_string()];
        let mut entries = Vec::new();
        for (principals, hosts, permission) in [
            (
                &self.allow_principal,
                &self.allow_host,
                AclPermissionType::Allow,
            ),
            (
                &self.deny_principal,
                &self.deny_host,
                AclPermissionType::Deny,
            ),
        ] {
            let hosts = if hosts.is_empty() { &star } else { hosts };
            for principal in principals {
                for host in hosts {
                    for operation in &operations {
                        entries.push(AccessControlEntry::new(
                            principal.clone(),
                            host.clone(),
                            *operation,
                            permission,
                        ));
                    }
                }
            }
        }
        Ok(entries)
    }

    /// The filters that select the resources named (every ACL when none is named).
    fn resource_filters(&self) -> Vec<AclBindingFilter> {
        let resources = self.resources();
        if resources.is_empty() {
            return vec![AclBindingFilter::ANY];
        }
        resources
            .into_iter()
            .map(|(resource_type, name)| AclBindingFilter {
                resource_type,
                name: Some(name),
                pattern_type: self.resource_pattern_type,
                ..AclBindingFilter::ANY
            })
            .collect()
    }
}

impl AclsCommand {
    pub fn run(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            AclsCommand::Add(args) => {
                let resources = args.resources();
                if resources.is_empty() {
                    bail!("you must specify a resource: --topic, --group, --cluster or --transactional-id");
                }
                let entries = args.entries()?;
                if entries.is_empty() {
                    bail!("you must specify --allow-principal or --deny-principal to add ACLs");
                }
                let mut client = Client::connect(&args.common.bootstrap_server)?;
                for (resource_type, name) in resources {
                    let pattern =
                        ResourcePattern::new(resource_type, name, args.resource_pattern_type);
                    let bindings: Vec<AclBinding> = entries
                        .iter()
                        .map(|entry| AclBinding::new(pattern.clone(), entry.clone()))
                        .collect();
                    if !args.common.json {
                        writeln!(out, "Adding ACLs for resource `{pattern}`: ")?;
                        for entry in &entries {
                            writeln!(out, " \t{entry}")?;
                        }
                        writeln!(out)?;
                    }
                    create(&mut client, &bindings)?;
                }
                list(&mut client, &args, out)
            }
            AclsCommand::List(args) => {
                let mut client = Client::connect(&args.common.bootstrap_server)?;
                list(&mut client, &args, out)
            }
            AclsCommand::Remove(args) => {
                if args.resources().is_empty() {
                    bail!("you must specify a resource: --topic, --group, --cluster or --transactional-id");
                }
                let entries = args.entries()?;
                let filters: Vec<AclBindingFilter> = args
                    .resource_filters()
                    .into_iter()
                    .flat_map(|filter| {
                        if entries.is_empty() {
                            return vec![filter];
                        }
                        entries
                            .iter()
                            .map(|entry| AclBindingFilter {
                                principal: Some(entry.principal.clone()),
                                host: Some(entry.host.clone()),
                                operation: entry.operation,
                                permission: entry.permission,
                                ..filter.clone()
                            })
                            .collect()
                    })
                    .collect();
                let mut client = Client::connect(&args.common.bootstrap_server)?;
                let removed = delete(&mut client, &filters)?;
                if !args.common.json {
                    for binding in &removed {
                        writeln!(
                            out,
                            "Removed ACL from resource `{}`: {}",
                            binding.pattern, binding.entry
                        )?;
                    }
                }
                list(&mut client, &args, out)
            }
        }
    }
}

/// Lists the ACLs of the resources `args` names, grouped by resource as kafka-acls.sh prints
/// them.
fn list(client: &mut Client, args: &AclArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut described: Vec<AclBinding> = Vec::new();
    for filter in args.resource_filters() {
        for binding in describe(client, &filter)? {
            if !described.contains(&binding) {
                described.push(binding);
            }
        }
    }
    if !args.principal.is_empty() {
        described.retain(|b| args.principal.contains(&b.entry.principal));
    }
    print_acls(&described, args.common.json, out)
}

/// kafka-acls.sh's "Current ACLs for resource" blocks (bindings of one resource kept
/// together, in the order first seen), or one JSON object per ACL.
pub fn print_acls(bindings: &[AclBinding], json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        for b in bindings {
            let line = json!({
                "resource_type": b.pattern.resource_type.name(),
                "name": b.pattern.name,
                "pattern_type": b.pattern.pattern_type.name(),
                "principal": b.entry.principal,
                "host": b.entry.host,
                "operation": b.entry.operation.name(),
                "permission_type": b.entry.permission.name(),
            });
            writeln!(out, "{line}")?;
        }
        return Ok(());
    }
    let mut patterns: Vec<&ResourcePattern> = Vec::new();
    for b in bindings {
        if !patterns.contains(&&b.pattern) {
            patterns.push(&b.pattern);
        }
    }
    for pattern in patterns {
        writeln!(out, "Current ACLs for resource `{pattern}`: ")?;
        for b in bindings.iter().filter(|b| b.pattern == *pattern) {
            writeln!(out, " \t{}", b.entry)?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// One CreateAcls of `bindings`; the first refusal as an error.
pub fn create(client: &mut Client, bindings: &[AclBinding]) -> anyhow::Result<()> {
    let version = client
        .version(ApiKey::CreateAcls, 1, ACL_API_VERSION)
        .context("the broker does not serve CreateAcls")?;
    let request = CreateAclsRequest {
        creations: bindings
            .iter()
            .map(|b| AclCreation {
                resource_type: b.pattern.resource_type.code(),
                resource_name: b.pattern.name.clone(),
                resource_pattern_type: b.pattern.pattern_type.code(),
                principal: b.entry.principal.clone(),
                host: b.entry.host.clone(),
                operation: b.entry.operation.code(),
                permission_type: b.entry.permission.code(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let response: CreateAclsResponse = client.request(ApiKey::CreateAcls, version, &request)?;
    if let Some(refused) = response.results.iter().find(|r| r.error_code != 0) {
        bail!(refusal(
            refused.error_code,
            refused.error_message.as_deref()
        ));
    }
    Ok(())
}

/// One DescribeAcls of `filter`: the bindings it selects, in the broker's order.
pub fn describe(client: &mut Client, filter: &AclBindingFilter) -> anyhow::Result<Vec<AclBinding>> {
    let version = client
        .version(ApiKey::DescribeAcls, 1, ACL_API_VERSION)
        .context("the broker does not serve DescribeAcls")?;
    let request = DescribeAclsRequest {
        resource_type_filter: filter.resource_type.code(),
        resource_name_filter: filter.name.clone(),
        pattern_type_filter: filter.pattern_type.code(),
        principal_filter: filter.principal.clone(),
        host_filter: filter.host.clone(),
        operation: filter.operation.code(),
        permission_type: filter.permission.code(),
        ..Default::default()
    };
    let response: DescribeAclsResponse = client.request(ApiKey::DescribeAcls, version, &request)?;
    if response.error_code != 0 {
        bail!(refusal(
            response.error_code,
            response.error_message.as_deref()
        ));
    }
    let mut bindings = Vec::new();
    for resource in response.resources {
        let pattern = ResourcePattern::new(
            ResourceType::from_code(resource.resource_type),
            resource.resource_name,
            PatternType::from_code(resource.pattern_type),
        );
        for acl in resource.acls {
            bindings.push(AclBinding::new(
                pattern.clone(),
                AccessControlEntry::new(
                    acl.principal,
                    acl.host,
                    AclOperation::from_code(acl.operation),
                    AclPermissionType::from_code(acl.permission_type),
                ),
            ));
        }
    }
    Ok(bindings)
}

/// One DeleteAcls of `filters`: the bindings removed; the first refusal as an error.
pub fn delete(
    client: &mut Client,
    filters: &[AclBindingFilter],
) -> anyhow::Result<Vec<AclBinding>> {
    let version = client
        .version(ApiKey::DeleteAcls, 1, ACL_API_VERSION)
        .context("the broker does not serve DeleteAcls")?;
    let request = DeleteAclsRequest {
        filters: filters
            .iter()
            .map(|f| DeleteAclsFilter {
                resource_type_filter: f.resource_type.code(),
                resource_name_filter: f.name.clone(),
                pattern_type_filter: f.pattern_type.code(),
                principal_filter: f.principal.clone(),
                host_filter: f.host.clone(),
                operation: f.operation.code(),
                permission_type: f.permission.code(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let response: DeleteAclsResponse = client.request(ApiKey::DeleteAcls, version, &request)?;
    let mut removed = Vec::new();
    for result in response.filter_results {
        if result.error_code != 0 {
            bail!(refusal(result.error_code, result.error_message.as_deref()));
        }
        for acl in result.matching_acls {
            let binding = AclBinding::new(
                ResourcePattern::new(
                    ResourceType::from_code(acl.resource_type),
                    acl.resource_name,
                    PatternType::from_code(acl.pattern_type),
                ),
                AccessControlEntry::new(
                    acl.principal,
                    acl.host,
                    AclOperation::from_code(acl.operation),
                    AclPermissionType::from_code(acl.permission_type),
                ),
            );
            if !removed.contains(&binding) {
                removed.push(binding);
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: AclsCommand,
    }

    fn parse(args: &[&str]) -> AclArgs {
        let cli = Cli::try_parse_from(
            ["acls"]
                .iter()
                .chain(args)
                .chain(&["--bootstrap-server", "h:1"]),
        )
        .unwrap();
        match cli.command {
            AclsCommand::Add(a) | AclsCommand::List(a) | AclsCommand::Remove(a) => a,
        }
    }

    #[test]
    fn flags_make_kafka_acls_entries() {
        let args = parse(&[
            "add",
            "--allow-principal",
            "User:alice",
            "--allow-principal",
            "User:bob",
            "--deny-principal",
            "User:eve",
            "--deny-host",
            "10.0.0.1",
            "--operation",
            "read",
            "--operation",
            "DescribeConfigs",
            "--topic",
            "t",
            "--cluster",
            "--resource-pattern-type",
            "PREFIXED",
        ]);
        assert_eq!(args.resource_pattern_type, PatternType::Prefixed);
        assert_eq!(
            args.resources(),
            [
                (ResourceType::Topic, "t".to_string()),
                (ResourceType::Cluster, "kafka-cluster".to_string())
            ]
        );
        let entries = args.entries().unwrap();
        assert_eq!(entries.len(), 6);
        assert_eq!(
            entries[0],
            AccessControlEntry::new(
                "User:alice",
                "*",
                AclOperation::Read,
                AclPermissionType::Allow
            )
        );
        assert_eq!(
            entries[5],
            AccessControlEntry::new(
                "User:eve",
                "10.0.0.1",
                AclOperation::DescribeConfigs,
                AclPermissionType::Deny
            )
        );
        let all = parse(&["list"]);
        assert_eq!(all.resource_filters(), [AclBindingFilter::ANY]);
        assert_eq!(all.operations().unwrap(), [AclOperation::All]);
        assert!(parse(&["add", "--operation", "fly"]).operations().is_err());
    }

    #[test]
    fn list_prints_as_kafka_acls() {
        let pattern = ResourcePattern::new(ResourceType::Topic, "t", PatternType::Literal);
        let bindings = vec![AclBinding::new(
            pattern,
            AccessControlEntry::new("User:a", "*", AclOperation::Read, AclPermissionType::Allow),
        )];
        let mut out = Vec::new();
        print_acls(&bindings, false, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, \
             patternType=LITERAL)`: \n \t(principal=User:a, host=*, operation=READ, \
             permissionType=ALLOW)\n\n"
        );
        let mut out = Vec::new();
        print_acls(&bindings, true, &mut out).unwrap();
        let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(line["operation"], "READ");
    }
}
