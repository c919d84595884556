//! `broker log-level --bootstrap-server HOST:PORT [--logger NAME] [LEVEL | --reset]`: reads or
//! changes a broker's log levels over the Kafka protocol, as `kafka-configs.sh --entity-type
//! broker-loggers` does (DescribeConfigs and IncrementalAlterConfigs on the BROKER_LOGGER
//! resource named by the broker's id), so it works on any Kafka broker too.

use std::io::Write;

use anyhow::{bail, Context};
use serde_json::json;
use wire::generated::api::ApiKey;
use wire::generated::describe_configs_request::DescribeConfigsResource;
use wire::generated::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use wire::generated::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, MetadataRequest, MetadataResponse,
};

use super::client::{error_message, error_name, Client};
use super::CommonArgs;
use config::log_levels::RESOURCE_BROKER_LOGGER;
use config::log_levels::{Level, ROOT};

/// `AlterConfigOp.OpType` ids.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// What to do, from the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct LogLevelArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The logger: a module path such as api::connection, or root. Changing: root when
    /// not given; describing: every logger when not given.
    #[arg(long)]
    pub logger: Option<String>,
    /// The broker's id (default: the id Metadata gives the broker at --bootstrap-server).
    #[arg(long, value_name = "ID")]
    pub broker: Option<i32>,
    /// Remove the logger's own level: it follows the module above it (or root) again.
    #[arg(long, conflicts_with = "level")]
    pub reset: bool,
    /// The new level: TRACE, DEBUG, INFO, WARN, ERROR, FATAL or OFF (any case). Without it
    /// (and without --reset) the loggers and their levels are printed.
    pub level: Option<String>,
}

/// A Kafka error the broker answered, by name, with its message.
#[derive(Debug, thiserror::Error)]
#[error("{name}: {message}")]
pub struct KafkaError {
    pub name: String,
    pub message: String,
}

fn kafka_error(code: i16, message: Option<&str>) -> KafkaError {
    KafkaError {
        name: error_name(code),
        message: message.unwrap_or_else(|| error_message(code)).to_owned(),
    }
}

/// Runs the command, printing to `out`.
pub fn run(args: &LogLevelArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut client = Client::connect(&args.common.bootstrap_server)?;
    let broker = match args.broker {
        Some(id) => id,
        None => broker_id(&mut client, &args.common.bootstrap_server)?,
    };
    let change = match (&args.level, args.reset) {
        (Some(level), _) => {
            // Kafka takes its upper-case names only; any case here. A name that is no
            // level goes as it is: the broker's INVALID_CONFIG says what it takes.
            let level =
                Level::parse(level).map_or_else(|| level.clone(), |l| l.kafka_name().to_string());
            Some((OP_SET, Some(level)))
        }
        (None, true) => Some((OP_DELETE, Some(String::new()))),
        (None, false) => None,
    };
    if let Some((operation, value)) = change {
        let logger = args.logger.clone().unwrap_or_else(|| ROOT.to_string());
        alter(&mut client, broker, &logger, operation, value)?;
        let levels = describe(&mut client, broker, Some(&logger))?;
        print(&levels, broker, args.common.json, out)
    } else {
        let levels = describe(&mut client, broker, args.logger.as_deref())?;
        if let (Some(logger), true) = (&args.logger, levels.is_empty()) {
            bail!("broker {broker} has no logger {logger}");
        }
        print(&levels, broker, args.common.json, out)
    }
}

fn print(
    levels: &[(String, String)],
    broker: i32,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if json {
        let loggers: serde_json::Map<String, serde_json::Value> = levels
            .iter()
            .map(|(name, level)| (name.clone(), json!(level)))
            .collect();
        writeln!(out, "{}", json!({ "broker": broker, "loggers": loggers }))?;
        return Ok(());
    }
    let width = levels.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    writeln!(out, "{:<width$}  LEVEL", "LOGGER")?;
    for (name, level) in levels {
        writeln!(out, "{name:<width$}  {level}")?;
    }
    Ok(())
}

/// The id of the broker we are connected to: the Metadata broker whose address is the one we
/// dialled, or the only one.
fn broker_id(client: &mut Client, bootstrap: &str) -> anyhow::Result<i32> {
    let version = client.version(ApiKey::Metadata, 1, 12)?;
    let metadata: MetadataResponse = client
        .request(
            ApiKey::Metadata,
            version,
            &MetadataRequest {
                topics: Some(Vec::new()),
                ..Default::default()
            },
        )
        .context("asking for the broker's id")?;
    let brokers = &metadata.brokers;
    if let Some(broker) = brokers
        .iter()
        .find(|b| format!("{}:{}", b.host, b.port) == bootstrap)
    {
        return Ok(broker.node_id);
    }
    match brokers.as_slice() {
        [only] => Ok(only.node_id),
        _ => bail!(
            "{} brokers answer at {bootstrap} and none advertises that address: pass --broker ID",
            brokers.len()
        ),
    }
}

/// The BROKER_LOGGER resource of one broker, named by its id: the one resource both requests
/// of this command are about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Loggers {
    broker: i32,
}

impl Loggers {
    fn name(self) -> String {
        self.broker.to_string()
    }

    /// DescribeConfigs of `logger`, or of every logger.
    fn describe_request(self, logger: Option<&str>) -> DescribeConfigsRequest {
        DescribeConfigsRequest {
            resources: vec![DescribeConfigsResource {
                resource_type: RESOURCE_BROKER_LOGGER,
                resource_name: self.name(),
                configuration_keys: logger.map(|l| vec![l.to_string()]),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// IncrementalAlterConfigs of one logger.
    fn alter_request(
        self,
        logger: &str,
        operation: i8,
        value: Option<String>,
    ) -> IncrementalAlterConfigsRequest {
        IncrementalAlterConfigsRequest {
            resources: vec![AlterConfigsResource {
                resource_type: RESOURCE_BROKER_LOGGER,
                resource_name: self.name(),
                configs: vec![AlterableConfig {
                    name: logger.to_string(),
                    config_operation: operation,
                    value,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            validate_only: false,
            ..Default::default()
        }
    }
}

/// The one resource's result of a configs response, failing on its error code.
fn only_result<T>(
    results: Vec<T>,
    api: &str,
    error: impl Fn(&T) -> (i16, Option<&str>),
) -> anyhow::Result<T> {
    let Some(result) = results.into_iter().next() else {
        bail!("{api}: the broker answered no resource");
    };
    let (code, message) = error(&result);
    if code != 0 {
        return Err(kafka_error(code, message).into());
    }
    Ok(result)
}

fn describe(
    client: &mut Client,
    broker: i32,
    logger: Option<&str>,
) -> anyhow::Result<Vec<(String, String)>> {
    let version = client.version(ApiKey::DescribeConfigs, 1, 4)?;
    let request = Loggers { broker }.describe_request(logger);
    let response: DescribeConfigsResponse =
        client.request(ApiKey::DescribeConfigs, version, &request)?;
    let result = only_result(response.results, "DescribeConfigs", |r| {
        (r.error_code, r.error_message.as_deref())
    })?;
    Ok(result
        .configs
        .into_iter()
        .map(|c| (c.name, c.value.unwrap_or_default()))
        .collect())
}

fn alter(
    client: &mut Client,
    broker: i32,
    logger: &str,
    operation: i8,
    value: Option<String>,
) -> anyhow::Result<()> {
    let version = client.version(ApiKey::IncrementalAlterConfigs, 0, 1)?;
    let request = Loggers { broker }.alter_request(logger, operation, value);
    let response: IncrementalAlterConfigsResponse =
        client.request(ApiKey::IncrementalAlterConfigs, version, &request)?;
    only_result(response.responses, "IncrementalAlterConfigs", |r| {
        (r.error_code, r.error_message.as_deref())
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_requests_name_the_brokers_logger_resource() {
        let loggers = Loggers { broker: 7 };
        let d = loggers.describe_request(Some("broker::fetch"));
        let a = loggers.alter_request("broker::fetch", OP_SET, Some("DEBUG".into()));
        let (d, a) = (&d.resources[0], &a.resources[0]);
        assert_eq!(
            (d.resource_type, d.resource_name.as_str()),
            (RESOURCE_BROKER_LOGGER, "7")
        );
        assert_eq!(
            (a.resource_type, a.resource_name.as_str()),
            (RESOURCE_BROKER_LOGGER, "7")
        );
        assert_eq!(
            d.configuration_keys,
            Some(vec!["broker::fetch".to_string()])
        );
        assert_eq!(a.configs[0].name, "broker::fetch");
        assert_eq!(a.configs[0].config_operation, OP_SET);
        assert_eq!(
            loggers.describe_request(None).resources[0].configuration_keys,
            None
        );
    }

    #[test]
    fn a_resource_error_is_reported_by_name() {
        let err = only_result(vec![(42i16, None::<&str>)], "DescribeConfigs", |r| {
            (r.0, r.1)
        })
        .unwrap_err();
        assert!(err.to_string().starts_with("INVALID_REQUEST"), "{err}");
        let err = only_result(Vec::<(i16, Option<&str>)>::new(), "X", |r| (r.0, r.1)).unwrap_err();
        assert!(err.to_string().contains("no resource"), "{err}");
    }
}
