//! `broker scram add|describe|remove`: users' SCRAM credentials (KIP-554), what
//! kafka-configs.sh does with `--entity-type users --add-config 'SCRAM-SHA-256=[...]'`,
//! `--describe` and `--delete-config`, over AlterUserScramCredentials (API 51) and
//! DescribeUserScramCredentials (API 50) to one broker (which sends a change on to the
//! active controller).
//!
//! The password never leaves this process: as Kafka's admin client, `add` draws a random
//! salt and sends SaltedPassword = PBKDF2(password, salt, iterations) (RFC 5802's `Hi`);
//! the broker derives and keeps StoredKey and ServerKey from it. Output follows
//! kafka-configs.sh: "Completed updating config for user U." and "SCRAM credential configs
//! for user-principal 'U' are SCRAM-SHA-256=iterations=8192, ...". A refused change or a
//! user that cannot be described is reported by Kafka's error name and makes the exit status
//! 1 (kafka-configs.sh prints the exception; a user without credentials is left out, as
//! there).

use std::io::Write;

use anyhow::{bail, Context};
use sasl::scram::{salted_password, Nonce, ScramMechanism};
use serde_json::json;
use wire::generated::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use wire::generated::api::ApiKey;
use wire::generated::describe_user_scram_credentials_request::UserName;
use wire::generated::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::client::{error_message, error_name, Client};
use super::CommonArgs;
use kclient::error::refusal;

/// kafka-configs.sh's iterations when `[iterations=...]` is not given.
pub const DEFAULT_ITERATIONS: u32 = 4096;

/// Kafka's RESOURCE_NOT_FOUND: a user with no credential.
const RESOURCE_NOT_FOUND: i16 = 91;

/// `broker scram ...`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ScramCommand {
    /// Creates or replaces a user's credential for one mechanism
    /// (kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=P]').
    Add {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, value_parser = parse_mechanism)]
        mechanism: ScramMechanism,
        /// PBKDF2 iterations (the broker takes 4096 to 16384).
        #[arg(long, default_value_t = DEFAULT_ITERATIONS)]
        iterations: u32,
        #[arg(long)]
        password: String,
    },
    /// Lists users' mechanisms and iterations (every user with a credential, or these).
    Describe {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        user: Vec<String>,
    },
    /// Deletes a user's credential for one mechanism
    /// (kafka-configs.sh --alter --delete-config SCRAM-SHA-256).
    Remove {
        #[command(flatten)]
        common: CommonArgs,
        #[arg(long)]
        user: String,
        #[arg(long, value_parser = parse_mechanism)]
        mechanism: ScramMechanism,
    },
}

fn parse_mechanism(name: &str) -> Result<ScramMechanism, String> {
    ScramMechanism::ALL
        .into_iter()
        .find(|m| m.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| format!("unknown SCRAM mechanism '{name}' (SCRAM-SHA-256 or SCRAM-SHA-512)"))
}

/// One user's credentials as DescribeUserScramCredentials lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub user: String,
    /// (mechanism name, iterations); a mechanism type we do not know shows as its number.
    pub credentials: Vec<(String, i32)>,
}

/// A user that could not be described: (user, Kafka's error code, message).
pub type Failed = (String, i16, String);

impl ScramCommand {
    pub fn run(self, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            ScramCommand::Add {
                common,
                user,
                mechanism,
                iterations,
                password,
            } => {
                let mut client = Client::connect(&common.bootstrap_server)?;
                // As Kafka's admin client: a random printable salt (ours: 18 bytes of the
                // system CSPRNG in Base64).
                let salt = Nonce::random().as_str().as_bytes().to_vec();
                let salted = salted_password(mechanism, &password, &salt, iterations);
                let request = AlterUserScramCredentialsRequest {
                    upsertions: vec![ScramCredentialUpsertion {
                        name: user.clone(),
                        mechanism: mechanism.kafka_type(),
                        iterations: i32::try_from(iterations).unwrap_or(i32::MAX),
                        salt: salt.into(),
                        salted_password: salted.into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                };
                alter(&mut client, &user, &request)?;
                report_altered(&user, common.json, out)
            }
            ScramCommand::Remove {
                common,
                user,
                mechanism,
            } => {
                let mut client = Client::connect(&common.bootstrap_server)?;
                let request = AlterUserScramCredentialsRequest {
                    deletions: vec![ScramCredentialDeletion {
                        name: user.clone(),
                        mechanism: mechanism.kafka_type(),
                        ..Default::default()
                    }],
                    ..Default::default()
                };
                alter(&mut client, &user, &request)?;
                report_altered(&user, common.json, out)
            }
            ScramCommand::Describe { common, user } => {
                let mut client = Client::connect(&common.bootstrap_server)?;
                let (described, failed) = describe(&mut client, &user)?;
                print_described(&described, common.json, out)?;
                for (user, code, message) in &failed {
                    writeln!(
                        out,
                        "Error retrieving SCRAM credential configs for user-principal '{user}': {}: {message}",
                        error_name(*code)
                    )?;
                }
                if !failed.is_empty() {
                    bail!("{} user(s) could not be described", failed.len());
                }
                Ok(())
            }
        }
    }
}

/// Sends one AlterUserScramCredentials naming only `user`; its refusal as an error.
fn alter(
    client: &mut Client,
    user: &str,
    request: &AlterUserScramCredentialsRequest,
) -> anyhow::Result<()> {
    let version = client
        .version(ApiKey::AlterUserScramCredentials, 0, 0)
        .context("the broker does not serve AlterUserScramCredentials")?;
    let response: AlterUserScramCredentialsResponse =
        client.request(ApiKey::AlterUserScramCredentials, version, request)?;
    let Some(result) = response.results.iter().find(|r| r.user == user) else {
        bail!("the broker's answer does not name user '{user}'");
    };
    if result.error_code != 0 {
        bail!(refusal(result.error_code, result.error_message.as_deref()));
    }
    Ok(())
}

fn report_altered(user: &str, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
    if json {
        writeln!(out, "{}", json!({ "user": user, "result": "ok" }))?;
    } else {
        writeln!(out, "Completed updating config for user {user}.")?;
    }
    Ok(())
}

/// DescribeUserScramCredentials of `users` (empty: every user with a credential): the users
/// described, sorted by name, and (user, error code, message) of those that could not be
/// (a user without any credential is left out of both, as kafka-configs.sh leaves it out).
pub fn describe(
    client: &mut Client,
    users: &[String],
) -> anyhow::Result<(Vec<Described>, Vec<Failed>)> {
    let version = client
        .version(ApiKey::DescribeUserScramCredentials, 0, 0)
        .context("the broker does not serve DescribeUserScramCredentials")?;
    let request = DescribeUserScramCredentialsRequest {
        users: (!users.is_empty()).then(|| {
            users
                .iter()
                .map(|name| UserName {
                    name: name.clone(),
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    };
    let response: DescribeUserScramCredentialsResponse =
        client.request(ApiKey::DescribeUserScramCredentials, version, &request)?;
    if response.error_code != 0 {
        bail!(refusal(
            response.error_code,
            response.error_message.as_deref()
        ));
    }
    let mut described = Vec::new();
    let mut failed = Vec::new();
    for result in response.results {
        match result.error_code {
            0 => described.push(Described {
                user: result.user,
                credentials: result
                    .credential_infos
                    .iter()
                    .map(|info| {
                        let name = ScramMechanism::from_kafka_type(info.mechanism)
                            .map_or_else(|| info.mechanism.to_string(), |m| m.name().to_string());
                        (name, info.iterations)
                    })
                    .collect(),
            }),
            RESOURCE_NOT_FOUND => {}
            code => failed.push((
                result.user,
                code,
                result
                    .error_message
                    .unwrap_or_else(|| error_message(code).to_string()),
            )),
        }
    }
    described.sort_by(|a, b| a.user.cmp(&b.user));
    Ok((described, failed))
}

/// kafka-configs.sh's line per user, or one JSON object per user.
pub fn print_described(
    described: &[Described],
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    for d in described {
        if json {
            let credentials: Vec<_> = d
                .credentials
                .iter()
                .map(|(mechanism, iterations)| json!({ "mechanism": mechanism, "iterations": iterations }))
                .collect();
            writeln!(
                out,
                "{}",
                json!({ "user": d.user, "credentials": credentials })
            )?;
        } else {
            let text: Vec<String> = d
                .credentials
                .iter()
                .map(|(mechanism, iterations)| format!("{mechanism}=iterations={iterations}"))
                .collect();
            writeln!(
                out,
                "SCRAM credential configs for user-principal '{}' are {}",
                d.user,
                text.join(", ")
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanisms_parse_by_kafka_name() {
        assert_eq!(parse_mechanism("SCRAM-SHA-256"), Ok(ScramMechanism::Sha256));
        assert_eq!(parse_mechanism("scram-sha-512"), Ok(ScramMechanism::Sha512));
        assert!(parse_mechanism("PLAIN").is_err());
    }

    #[test]
    fn describe_prints_as_kafka_configs() {
        let described = vec![Described {
            user: "alice".into(),
            credentials: vec![
                ("SCRAM-SHA-256".into(), 8192),
                ("SCRAM-SHA-512".into(), 4096),
            ],
        }];
        let mut out = Vec::new();
        print_described(&described, false, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "SCRAM credential configs for user-principal 'alice' are \
             SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
        );
        let mut out = Vec::new();
        print_described(&described, true, &mut out).unwrap();
        let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(line["credentials"][1]["iterations"], 4096);
    }
}
