//! `broker quotas alter|describe`: client quotas (KIP-546), what kafka-configs.sh does with
//! `--entity-type users|clients|ips` and `--add-config 'producer_byte_rate=1048576'`,
//! `--delete-config` and `--describe`, over AlterClientQuotas (API 49) and
//! DescribeClientQuotas (API 48) to one broker (which sends a change on to the active
//! controller).
//!
//! An entity is named as kafka-configs.sh names it: `--user alice` or `--user-default`,
//! `--client-id app` or `--client-default`, either or both; or `--ip 10.0.0.1` /
//! `--ip-default`. A refused change is reported by Kafka's error name and makes the exit
//! status 1.

use std::io::Write;

use anyhow::{bail, Context};
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::{
    alter_client_quotas_request, describe_client_quotas_request, AlterClientQuotasRequest,
    AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};

use super::client::Client;
use super::CommonArgs;
use kclient::error::refusal;

/// Which entity: each type named, set to its default, or left out.
#[derive(Debug, Clone, clap::Args)]
pub struct EntityArgs {
    #[arg(long, conflicts_with = "user_default")]
    user: Option<String>,
    /// The default user entity (every user without a quota of its own).
    #[arg(long)]
    user_default: bool,
    #[arg(long, conflicts_with = "client_default")]
    client_id: Option<String>,
    /// The default client-id entity.
    #[arg(long)]
    client_default: bool,
    #[arg(long, conflicts_with = "ip_default")]
    ip: Option<String>,
    /// The default ip entity.
    #[arg(long)]
    ip_default: bool,
}

/// (entity type, name; `None` the default), in the order kafka-configs.sh prints them.
type Entity = Vec<(&'static str, Option<String>)>;

impl EntityArgs {
    fn entity(&self) -> Entity {
        let mut entity = Vec::new();
        let mut part = |entity_type: &'static str, name: &Option<String>, default: bool| {
            if name.is_some() || default {
                entity.push((entity_type, name.clone()));
            }
        };
        part("user", &self.user, self.user_default);
        part("client-id", &self.client_id, self.client_default);
        part("ip", &self.ip, self.ip_default);
        entity
    }
}

/// `broker quotas ...`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum QuotasCommand {
    /// Sets and removes an entity's quotas (kafka-configs.sh --alter --add-config
    /// 'producer_byte_rate=1048576' --delete-config consumer_byte_rate).
    Alter {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        entity: EntityArgs,
        /// key=value pairs, comma separated: producer_byte_rate, consumer_byte_rate,
        /// request_percentage, controller_mutation_rate (ip: connection_creation_rate).
        #[arg(long)]
        add_config: Option<String>,
        /// Keys to remove, comma separated.
        #[arg(long)]
        delete_config: Option<String>,
        /// Only validate (AlterClientQuotas' validateOnly).
        #[arg(long)]
        validate_only: bool,
    },
    /// Lists quotas: of exactly the entity named, or of every entity.
    Describe {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        entity: EntityArgs,
    },
}

/// The (key, value) operations of `--add-config` and `--delete-config` (`None` removes).
fn operations(
    add: Option<&str>,
    delete: Option<&str>,
) -> anyhow::Result<Vec<(String, Option<f64>)>> {
    let mut ops = Vec::new();
    for pair in add
        .into_iter()
        .flat_map(|a| a.split(','))
        .filter(|p| !p.trim().is_empty())
    {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("'{pair}' is not key=value");
        };
        let value: f64 = value
            .trim()
            .parse()
            .with_context(|| format!("the value of {key} is not a number"))?;
        ops.push((key.trim().to_string(), Some(value)));
    }
    for key in delete
        .into_iter()
        .flat_map(|d| d.split(','))
        .filter(|k| !k.trim().is_empty())
    {
        ops.push((key.trim().to_string(), None));
    }
    if ops.is_empty() {
        bail!("nothing to change: give --add-config or --delete-config");
    }
    Ok(ops)
}

/// kafka-configs.sh's way of naming an entity: "user-principal 'alice', client-id 'app'".
fn describe_entity(entity: &[(impl AsRef<str>, Option<String>)]) -> String {
    let parts: Vec<String> = entity
        .iter()
        .map(|(t, name)| {
            let t = match t.as_ref() {
                "user" => "user-principal",
                other => other,
            };
            match name {
                Some(name) => format!("{t} '{name}'"),
                None => format!("the default {t}"),
            }
        })
        .collect();
    parts.join(", ")
}

impl QuotasCommand {
    pub fn run(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            QuotasCommand::Alter {
                common,
                entity,
                add_config,
                delete_config,
                validate_only,
            } => {
                let entity = entity.entity();
                if entity.is_empty() {
                    bail!("name an entity: --user, --client-id or --ip (or their --*-default)");
                }
                let ops = operations(add_config.as_deref(), delete_config.as_deref())?;
                let mut client = Client::connect(&common.bootstrap_server)?;
                alter(&mut client, &entity, ops, validate_only)?;
                let named = describe_entity(&entity);
                if common.json {
                    writeln!(out, "{}", json!({ "entity": named, "result": "ok" }))?;
                } else {
                    writeln!(out, "Completed updating config for {named}.")?;
                }
                Ok(())
            }
            QuotasCommand::Describe { common, entity } => {
                let entity = entity.entity();
                let mut client = Client::connect(&common.bootstrap_server)?;
                let described = describe(&mut client, &entity)?;
                for (entity, values) in described {
                    let named = describe_entity(&entity);
                    if common.json {
                        let values: serde_json::Map<String, serde_json::Value> =
                            values.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                        let entity: serde_json::Map<String, serde_json::Value> =
                            entity.iter().map(|(t, n)| (t.clone(), json!(n))).collect();
                        writeln!(out, "{}", json!({ "entity": entity, "quotas": values }))?;
                    } else {
                        let values: Vec<String> =
                            values.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
                        writeln!(out, "Quota configs for {named} are {}", values.join(", "))?;
                    }
                }
                Ok(())
            }
        }
    }
}

fn alter(
    client: &mut Client,
    entity: &Entity,
    ops: Vec<(String, Option<f64>)>,
    validate_only: bool,
) -> anyhow::Result<()> {
    let version = client
        .version(ApiKey::AlterClientQuotas, 0, 1)
        .context("the broker does not serve AlterClientQuotas")?;
    let request = AlterClientQuotasRequest {
        entries: vec![alter_client_quotas_request::EntryData {
            entity: (entity.iter())
                .map(|(t, name)| alter_client_quotas_request::EntityData {
                    entity_type: t.to_string(),
                    entity_name: name.clone(),
                    ..Default::default()
                })
                .collect(),
            ops: (ops.into_iter())
                .map(|(key, value)| alter_client_quotas_request::OpData {
                    key,
                    value: value.unwrap_or(0.0),
                    remove: value.is_none(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        validate_only,
        ..Default::default()
    };
    let response: AlterClientQuotasResponse =
        client.request(ApiKey::AlterClientQuotas, version, &request)?;
    let Some(entry) = response.entries.first() else {
        bail!("the broker's answer names no entity");
    };
    if entry.error_code != 0 {
        bail!(refusal(entry.error_code, entry.error_message.as_deref()));
    }
    Ok(())
}

/// A described entity: (entity type, name) pairs and its (key, value) quotas.
pub type Described = (Vec<(String, Option<String>)>, Vec<(String, f64)>);

/// DescribeClientQuotas of exactly `entity` (strict), or of every entity when it is empty.
pub fn describe(client: &mut Client, entity: &Entity) -> anyhow::Result<Vec<Described>> {
    let version = client
        .version(ApiKey::DescribeClientQuotas, 0, 1)
        .context("the broker does not serve DescribeClientQuotas")?;
    let request = DescribeClientQuotasRequest {
        components: (entity.iter())
            .map(|(t, name)| describe_client_quotas_request::ComponentData {
                entity_type: t.to_string(),
                match_type: if name.is_some() { 0 } else { 1 },
                r#match: name.clone(),
                ..Default::default()
            })
            .collect(),
        strict: !entity.is_empty(),
        ..Default::default()
    };
    let response: DescribeClientQuotasResponse =
        client.request(ApiKey::DescribeClientQuotas, version, &request)?;
    if response.error_code != 0 {
        bail!(refusal(
            response.error_code,
            response.error_message.as_deref()
        ));
    }
    let mut described: Vec<Described> = (response.entries.unwrap_or_default().into_iter())
        .map(|e| {
            let entity = (e.entity.into_iter())
                .map(|d| (d.entity_type, d.entity_name))
                .collect();
            let values = e.values.into_iter().map(|v| (v.key, v.value)).collect();
            (entity, values)
        })
        .collect();
    described.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(described)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_parse_as_kafka_configs() {
        let ops = operations(
            Some("producer_byte_rate=1048576, request_percentage=12.5"),
            Some("consumer_byte_rate"),
        )
        .unwrap();
        assert_eq!(
            ops,
            vec![
                ("producer_byte_rate".to_string(), Some(1048576.0)),
                ("request_percentage".to_string(), Some(12.5)),
                ("consumer_byte_rate".to_string(), None),
            ]
        );
        assert!(operations(None, None).is_err());
        assert!(operations(Some("producer_byte_rate"), None).is_err());
        assert!(operations(Some("producer_byte_rate=fast"), None).is_err());
    }

    #[test]
    fn entities_are_named_as_kafka_configs_names_them() {
        let entity = vec![("user", Some("alice".to_string())), ("client-id", None)];
        assert_eq!(
            describe_entity(&entity),
            "user-principal 'alice', the default client-id"
        );
    }
}
