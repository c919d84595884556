//! KRaft node roles and the metadata quorum's settings: `process.roles`, `node.id`,
//! `controller.quorum.*`, `controller.listener.names`, `broker.*.ms`, with Kafka's names,
//! defaults, parse rules and error messages (`KafkaConfig.validateValues`, `QuorumConfig`,
//! `KRaftConfigs`, Kafka 4.0). This module only reads and checks them; the quorum that acts on
//! them lives elsewhere.
//!
//! Without `process.roles` (and then with no quorum key either) the node is what it has
//! always been here: one combined broker and controller that is its own quorum
//! ([`QuorumConfig::kraft`] false). Kafka has no such mode (it would be ZooKeeper mode, gone
//! in 4.0); we keep it so the one-line start needs no configuration.

use super::listeners::{Listener, SecurityProtocol};
use super::properties::list_items;

/// What this process runs (`process.roles`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessRoles {
    /// `broker`: serves clients, follows the quorum.
    Broker,
    /// `controller`: a quorum member only, no client traffic.
    Controller,
    /// `broker,controller` (and the single node without `process.roles`).
    Combined,
}

impl ProcessRoles {
    pub fn is_broker(self) -> bool {
        matches!(self, ProcessRoles::Broker | ProcessRoles::Combined)
    }
    pub fn is_controller(self) -> bool {
        matches!(self, ProcessRoles::Controller | ProcessRoles::Combined)
    }
}

/// One entry of `controller.quorum.voters`: `id@host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Voter {
    pub id: i32,
    /// IPv6 without brackets.
    pub host: String,
    pub port: u16,
}

/// One entry of `controller.quorum.bootstrap.servers`: `host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

/// The listener this node reaches the controllers through (the first of
/// `controller.listener.names`, as Kafka's broker uses), and, on a controller, listens on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerListener {
    /// Upper case, like listener names.
    pub name: String,
    pub protocol: SecurityProtocol,
    /// On a node with the controller role: its entry in `listeners` (where it binds).
    /// `None` on a broker-only node, which must not listen on it.
    pub listener: Option<Listener>,
    /// On a node with the controller role: the address other nodes are told (its
    /// `advertised.listeners` entry, else the listener's own).
    pub advertised: Option<Listener>,
}

/// The typed KRaft settings (see the module comment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumConfig {
    /// Whether `process.roles` was set (Kafka's KRaft mode). false = the implicit single
    /// combined node, its own quorum, with no controller listener.
    pub kraft: bool,
    pub roles: ProcessRoles,
    /// `controller.quorum.voters` (static quorum), in the order given.
    pub voters: Vec<Voter>,
    /// `controller.quorum.bootstrap.servers` (dynamic quorum, KIP-853).
    pub bootstrap_servers: Vec<HostPort>,
    /// `controller.listener.names`, upper case, in order.
    pub controller_listener_names: Vec<String>,
    /// `None` without `process.roles`.
    pub controller_listener: Option<ControllerListener>,
    /// `broker.heartbeat.interval.ms` (2000).
    pub broker_heartbeat_interval_ms: i32,
    /// `broker.session.timeout.ms` (9000).
    pub broker_session_timeout_ms: i32,
    /// `controller.quorum.election.timeout.ms` (1000).
    pub election_timeout_ms: i32,
    /// `controller.quorum.fetch.timeout.ms` (2000).
    pub fetch_timeout_ms: i32,
    /// `controller.quorum.election.backoff.max.ms` (1000).
    pub election_backoff_max_ms: i32,
    /// `controller.quorum.request.timeout.ms` (2000).
    pub request_timeout_ms: i32,
    /// `controller.quorum.retry.backoff.ms` (20).
    pub retry_backoff_ms: i32,
    /// `controller.quorum.append.linger.ms` (25).
    pub append_linger_ms: i32,
}

impl QuorumConfig {
    /// Whether this node alone is the quorum: no `process.roles` (today's single node), or a
    /// combined node whose static voters are itself only.
    pub fn is_single_node(&self, node_id: i32) -> bool {
        !self.kraft
            || (self.roles == ProcessRoles::Combined
                && self.bootstrap_servers.is_empty()
                && self.voters.len() == 1
                && self.voters[0].id == node_id)
    }

    /// Whether listener `name` is a controller listener (not served to clients).
    pub fn is_controller_listener(&self, name: &str) -> bool {
        self.controller_listener_names.iter().any(|n| n == name)
    }
}

/// The KRaft rules Kafka enforces at start, each with Kafka's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuorumError {
    #[error("Unknown process role '{0}' (only 'broker' and 'controller' are allowed roles)")]
    UnknownRole(String),
    #[error("Duplicate role names found in `process.roles`: {0}")]
    DuplicateRole(String),
    #[error(
        "Invalid configuration value for controller.quorum.voters. Each entry should be in the \
         form `{{id}}@{{host}}:{{port}}`."
    )]
    VoterForm,
    #[error("Failed to parse voter ID as an integer from {0}")]
    VoterId(String),
    #[error(
        "Failed to parse host name from entry {0} for the configuration controller.quorum.voters. \
         Each entry should be in the form `{{id}}@{{host}}:{{port}}`."
    )]
    VoterHost(String),
    #[error(
        "Failed to parse host port from entry {0} for the configuration controller.quorum.voters. \
         Each entry should be in the form `{{id}}@{{host}}:{{port}}`."
    )]
    VoterPort(String),
    /// Ours: Kafka keeps the last entry of an id silently; two addresses for one voter is
    /// always a mistake.
    #[error("controller.quorum.voters names voter {0} more than once")]
    DuplicateVoter(i32),
    #[error("Host string ({0}) is not routeable")]
    NotRoutable(String),
    #[error(
        "Failed to parse host name from {0} for the configuration \
         controller.quorum.bootstrap.servers. Each entry should be in the form \"{{host}}:{{port}}\""
    )]
    BootstrapHost(String),
    #[error(
        "Failed to parse host port from {0} for the configuration \
         controller.quorum.bootstrap.servers. Each entry should be in the form \"{{host}}:{{port}}\""
    )]
    BootstrapPort(String),
    #[error(
        "Missing configuration `node.id` which is required when `process.roles` is defined \
         (i.e. when running in KRaft mode)."
    )]
    MissingNodeId,
    #[error(
        "If using process.roles, either controller.quorum.bootstrap.servers must contain the set \
         of bootstrap controllers or controller.quorum.voters must contain a parseable set of \
         controllers."
    )]
    NoQuorum,
    #[error(
        "If process.roles contains just the 'broker' role, the node id {node_id} must not be \
         included in the set of voters controller.quorum.voters={voters}"
    )]
    BrokerIsVoter { node_id: i32, voters: String },
    #[error(
        "controller.listener.names must contain at least one value when running KRaft with just \
         the broker role"
    )]
    BrokerNoControllerListener,
    #[error(
        "controller.listener.names must not contain a value appearing in the 'listeners' \
         configuration when running KRaft with just the broker role"
    )]
    BrokerListensOnController,
    #[error(
        "Controller listener with name {0} defined in controller.listener.names not found in \
         listener.security.protocol.map  (an explicit security mapping for each controller \
         listener is required if listener.security.protocol.map is non-empty, or if there are \
         security protocols other than PLAINTEXT in use)"
    )]
    ControllerListenerNotMapped(String),
    /// Ours: the listener's protocol is a SASL one, which this broker does not speak.
    #[error(
        "Controller listener {name} uses security protocol {protocol}, which is not supported \
         (PLAINTEXT or SSL)"
    )]
    ControllerListenerSasl { name: String, protocol: String },
    #[error(
        "The listeners config must only contain KRaft controller listeners from \
         controller.listener.names when process.roles=controller"
    )]
    ControllerOnlyHasBrokerListener,
    #[error(
        "If process.roles contains the 'controller' role, the node id {node_id} must be included \
         in the set of voters controller.quorum.voters={voters}"
    )]
    ControllerNotVoter { node_id: i32, voters: String },
    #[error(
        "controller.listener.names must contain at least one value appearing in the 'listeners' \
         configuration when running the KRaft controller role"
    )]
    ControllerNoListener,
    #[error(
        "controller.listener.names must only contain values appearing in the 'listeners' \
         configuration when running the KRaft controller role"
    )]
    ControllerListenerMissing,
    #[error(
        "There must be at least one broker advertised listener. Perhaps all listeners appear in \
         controller.listener.names?"
    )]
    NoBrokerListener,
    /// Kafka's message for a node outside KRaft mode; here, a node without `process.roles`.
    #[error("controller.listener.names must be empty when not running in KRaft mode: [{0}]")]
    ControllerNamesWithoutKraft(String),
    /// Ours: without `process.roles` the node is its own quorum; voters would be ignored.
    #[error(
        "{0} is set but process.roles is not: set process.roles (broker, controller or both), or \
         remove {0} to run this node as a single node that is its own quorum"
    )]
    QuorumWithoutRoles(&'static str),
}

impl QuorumError {
    /// The key to fix (for `ConfigError::key`).
    pub fn key(&self) -> &'static str {
        use QuorumError as E;
        match self {
            E::UnknownRole(_) | E::DuplicateRole(_) => "process.roles",
            E::VoterForm
            | E::VoterId(_)
            | E::VoterHost(_)
            | E::VoterPort(_)
            | E::DuplicateVoter(_)
            | E::NotRoutable(_)
            | E::NoQuorum
            | E::BrokerIsVoter { .. }
            | E::ControllerNotVoter { .. } => "controller.quorum.voters",
            E::BootstrapHost(_) | E::BootstrapPort(_) => "controller.quorum.bootstrap.servers",
            E::MissingNodeId => "node.id",
            E::BrokerListensOnController | E::ControllerOnlyHasBrokerListener => "listeners",
            E::NoBrokerListener => "advertised.listeners",
            E::QuorumWithoutRoles(key) => key,
            E::BrokerNoControllerListener
            | E::ControllerListenerNotMapped(_)
            | E::ControllerListenerSasl { .. }
            | E::ControllerNoListener
            | E::ControllerListenerMissing
            | E::ControllerNamesWithoutKraft(_) => "controller.listener.names",
        }
    }
}

/// `process.roles` (a comma list; Kafka's match is case-sensitive).
pub fn parse_roles(value: &str) -> Result<ProcessRoles, QuorumError> {
    let items = list_items(value);
    let mut broker = false;
    let mut controller = false;
    for item in &items {
        let seen = match *item {
            "broker" => &mut broker,
            "controller" => &mut controller,
            other => return Err(QuorumError::UnknownRole(other.to_string())),
        };
        if *seen {
            return Err(QuorumError::DuplicateRole(format!(
                "[{}]",
                items.join(", ")
            )));
        }
        *seen = true;
    }
    Ok(match (broker, controller) {
        (true, true) => ProcessRoles::Combined,
        (false, true) => ProcessRoles::Controller,
        // An empty list is no KRaft mode; the caller treats it as unset.
        _ => ProcessRoles::Broker,
    })
}

/// Kafka's `Utils.getHost` / `getPort` on `host:port` (`[v6]:port` too): the host's
/// characters are letters, digits and `-%._:`; the port is decimal.
fn split_host_port(address: &str) -> (Option<String>, Option<u16>) {
    let (host, port) = if let Some(rest) = address.strip_prefix('[') {
        match rest.split_once("]:") {
            Some((h, p)) => (h, p),
            None => return (None, None),
        }
    } else {
        match address.rsplit_once(':') {
            Some((h, p)) => (h, p),
            None => return (None, None),
        }
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-%._:".contains(c));
    let port = if !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()) {
        port.parse::<u16>().ok()
    } else {
        None
    };
    (host_ok.then(|| host.to_string()), port)
}

/// `controller.quorum.voters`: `id@host:port,...` (empty: no static voters). A voter on the
/// non-routable `0.0.0.0` is refused, as Kafka's raft client refuses it at start.
pub fn parse_voters(value: &str) -> Result<Vec<Voter>, QuorumError> {
    let mut voters: Vec<Voter> = Vec::new();
    for entry in list_items(value) {
        // Java's split("@") drops a trailing empty part: `1@` has one part.
        let parts: Vec<&str> = entry.split('@').collect();
        let parts: &[&str] = match parts.as_slice() {
            [id, ""] => &[id],
            p => p,
        };
        let [id, address] = parts else {
            return Err(QuorumError::VoterForm);
        };
        let id: i32 = id
            .parse()
            .map_err(|_| QuorumError::VoterId(id.to_string()))?;
        let (host, port) = split_host_port(address);
        let host = host.ok_or_else(|| QuorumError::VoterHost(entry.to_string()))?;
        let port = port.ok_or_else(|| QuorumError::VoterPort(entry.to_string()))?;
        if host == "0.0.0.0" {
            return Err(QuorumError::NotRoutable(host));
        }
        if voters.iter().any(|v| v.id == id) {
            return Err(QuorumError::DuplicateVoter(id));
        }
        voters.push(Voter { id, host, port });
    }
    Ok(voters)
}

/// `controller.quorum.bootstrap.servers`: `host:port,...`.
pub fn parse_bootstrap_servers(value: &str) -> Result<Vec<HostPort>, QuorumError> {
    list_items(value)
        .into_iter()
        .map(|entry| {
            let (host, port) = split_host_port(entry);
            let host = host.ok_or_else(|| QuorumError::BootstrapHost(entry.to_string()))?;
            let port = port.ok_or_else(|| QuorumError::BootstrapPort(entry.to_string()))?;
            Ok(HostPort { host, port })
        })
        .collect()
}

/// `controller.listener.names`, normalised to upper case like listener names.
pub(super) fn controller_names(value: Option<&str>) -> Vec<String> {
    value
        .map(list_items)
        .unwrap_or_default()
        .into_iter()
        .map(str::to_ascii_uppercase)
        .collect()
}

/// Kafka's `effectiveListenerSecurityProtocolMap`: in KRaft mode with the map left at its
/// default, each controller listener name gets PLAINTEXT, unless a controller listener or a
/// listener is named after SSL or a SASL protocol (then the map must say). Returns the map's
/// text with those entries appended.
pub(super) fn effective_protocol_map(
    kraft: bool,
    map_set: Option<&str>,
    default_map: &str,
    controller_names: &[String],
    listeners: &str,
) -> String {
    let Some(map) = map_set else {
        let secure = |name: &str| matches!(name, "SSL" | "SASL_SSL" | "SASL_PLAINTEXT");
        let listener_names = list_items(listeners).into_iter().filter_map(|l| {
            l.split_once("://")
                .map(|(n, _)| n.trim().to_ascii_uppercase())
        });
        if !kraft
            || controller_names.iter().any(|n| secure(n))
            || listener_names.into_iter().any(|n| secure(&n))
        {
            return default_map.to_string();
        }
        let mut out = default_map.to_string();
        for name in controller_names.iter().filter(|n| *n != "PLAINTEXT") {
            out.push_str(&format!(",{name}:PLAINTEXT"));
        }
        return out;
    };
    map.to_string()
}

/// What [`build`] reads besides the raw quorum keys.
pub(super) struct Inputs<'a> {
    /// `process.roles` as set (None: unset or empty).
    pub roles: Option<&'a str>,
    pub node_id: i32,
    /// `node.id` or `broker.id` was set (Kafka's default is -1: required in KRaft mode).
    pub node_id_set: bool,
    pub voters: Option<&'a str>,
    pub bootstrap_servers: Option<&'a str>,
    pub controller_listener_names: Option<&'a str>,
    pub listeners: &'a [Listener],
    /// `advertised.listeners` as set (None: it defaults to `listeners`).
    pub advertised: Option<&'a [Listener]>,
    /// The effective `listener.security.protocol.map`, parsed.
    pub protocol_map: &'a [(String, SecurityProtocol)],
    /// The timing keys, as numbers: heartbeat, session, election, fetch, backoff, request,
    /// retry backoff, linger.
    pub timings: [i32; 8],
}

/// Builds the typed settings and applies Kafka's rules for the roles (`validateValues`).
pub(super) fn build(i: Inputs<'_>) -> Result<QuorumConfig, QuorumError> {
    let names = controller_names(i.controller_listener_names);
    let [heartbeat, session, election, fetch, backoff, request, retry, linger] = i.timings;
    let mut config = QuorumConfig {
        kraft: false,
        roles: ProcessRoles::Combined,
        voters: parse_voters(i.voters.unwrap_or(""))?,
        bootstrap_servers: parse_bootstrap_servers(i.bootstrap_servers.unwrap_or(""))?,
        controller_listener_names: names.clone(),
        controller_listener: None,
        broker_heartbeat_interval_ms: heartbeat,
        broker_session_timeout_ms: session,
        election_timeout_ms: election,
        fetch_timeout_ms: fetch,
        election_backoff_max_ms: backoff,
        request_timeout_ms: request,
        retry_backoff_ms: retry,
        append_linger_ms: linger,
    };
    let advertised = i.advertised.unwrap_or(i.listeners);
    let Some(roles) = i.roles.filter(|r| !list_items(r).is_empty()) else {
        // The implicit single node: nothing of a quorum may be configured.
        if !names.is_empty() {
            return Err(QuorumError::ControllerNamesWithoutKraft(names.join(", ")));
        }
        if !config.voters.is_empty() {
            return Err(QuorumError::QuorumWithoutRoles("controller.quorum.voters"));
        }
        if !config.bootstrap_servers.is_empty() {
            return Err(QuorumError::QuorumWithoutRoles(
                "controller.quorum.bootstrap.servers",
            ));
        }
        return Ok(config);
    };
    let roles = parse_roles(roles)?;
    config.kraft = true;
    config.roles = roles;
    if !i.node_id_set {
        return Err(QuorumError::MissingNodeId);
    }
    if config.voters.is_empty() && config.bootstrap_servers.is_empty() {
        return Err(QuorumError::NoQuorum);
    }
    let voter_ids = || {
        let ids: Vec<String> = config.voters.iter().map(|v| v.id.to_string()).collect();
        format!("Set({})", ids.join(", "))
    };
    let is_voter = config.voters.iter().any(|v| v.id == i.node_id);
    let in_listeners = |name: &String| i.listeners.iter().any(|l| &l.name == name);
    match roles {
        ProcessRoles::Broker => {
            if is_voter {
                return Err(QuorumError::BrokerIsVoter {
                    node_id: i.node_id,
                    voters: voter_ids(),
                });
            }
            if names.is_empty() {
                return Err(QuorumError::BrokerNoControllerListener);
            }
            if names.iter().any(in_listeners) {
                return Err(QuorumError::BrokerListensOnController);
            }
            // Every name must have a protocol; the first is the one used.
            for name in &names {
                protocol_of(i.protocol_map, name)?;
            }
            if names.len() > 1 {
                tracing::warn!(
                    "controller.listener.names has multiple entries; only the first will be \
                     used since process.roles=broker: {names:?}"
                );
            }
            config.controller_listener = Some(ControllerListener {
                name: names[0].clone(),
                protocol: protocol_of(i.protocol_map, &names[0])?,
                listener: None,
                advertised: None,
            });
        }
        ProcessRoles::Controller | ProcessRoles::Combined => {
            // Kafka's effectiveAdvertisedControllerListeners: per controller name, its
            // advertised entry, else its listener.
            let advertised_controllers: Vec<&Listener> = names
                .iter()
                .filter_map(|n| {
                    advertised
                        .iter()
                        .find(|l| &l.name == n)
                        .or_else(|| i.listeners.iter().find(|l| &l.name == n))
                })
                .collect();
            if roles == ProcessRoles::Controller
                && advertised_controllers.len() != i.listeners.len()
            {
                return Err(QuorumError::ControllerOnlyHasBrokerListener);
            }
            if !config.voters.is_empty() && !is_voter {
                return Err(QuorumError::ControllerNotVoter {
                    node_id: i.node_id,
                    voters: voter_ids(),
                });
            }
            if advertised_controllers.is_empty() {
                return Err(QuorumError::ControllerNoListener);
            }
            if !names.iter().all(in_listeners) {
                return Err(QuorumError::ControllerListenerMissing);
            }
            let name = &names[0];
            let listener = i.listeners.iter().find(|l| &l.name == name).cloned();
            config.controller_listener = Some(ControllerListener {
                name: name.clone(),
                protocol: protocol_of(i.protocol_map, name)?,
                listener,
                advertised: advertised_controllers.first().map(|l| (*l).clone()),
            });
        }
    }
    if roles.is_broker()
        && !advertised
            .iter()
            .any(|l| !config.is_controller_listener(&l.name))
    {
        return Err(QuorumError::NoBrokerListener);
    }
    Ok(config)
}

/// A controller listener's protocol in the effective map.
fn protocol_of(
    map: &[(String, SecurityProtocol)],
    name: &str,
) -> Result<SecurityProtocol, QuorumError> {
    match map.iter().find(|(n, _)| n == name) {
        // The quorum's own connections do not authenticate (yet).
        Some((_, protocol)) if protocol.is_sasl() => Err(QuorumError::ControllerListenerSasl {
            name: name.to_string(),
            protocol: protocol.name().to_string(),
        }),
        Some((_, protocol)) => Ok(*protocol),
        None => Err(QuorumError::ControllerListenerNotMapped(name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{from_pairs, BrokerConfig, ConfigError};

    fn cfg(pairs: &[&str]) -> Result<BrokerConfig, ConfigError> {
        from_pairs(pairs.iter().map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        }))
    }

    fn quorum_err(pairs: &[&str]) -> QuorumError {
        match cfg(pairs) {
            Err(ConfigError::Quorum(e)) => e,
            other => panic!("{pairs:?}: expected a quorum error, got {other:?}"),
        }
    }

    /// Kafka's combined-mode quickstart (`config/server.properties` of 4.0).
    const COMBINED: &[&str] = &[
        "process.roles=broker,controller",
        "node.id=1",
        "controller.quorum.voters=1@localhost:9093",
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
        "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
        "controller.listener.names=CONTROLLER",
    ];

    fn with(base: &[&'static str], extra: &[&'static str]) -> Vec<&'static str> {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    }

    #[test]
    fn default_is_the_single_node_its_own_quorum() {
        let c = cfg(&[]).unwrap();
        let q = &c.quorum;
        assert!(!q.kraft);
        assert_eq!(q.roles, ProcessRoles::Combined);
        assert!(q.is_single_node(c.node_id));
        assert!(q.voters.is_empty() && q.bootstrap_servers.is_empty());
        assert_eq!(q.controller_listener, None);
        assert_eq!(
            (
                q.broker_heartbeat_interval_ms,
                q.broker_session_timeout_ms,
                q.election_timeout_ms,
                q.fetch_timeout_ms,
                q.election_backoff_max_ms,
                q.request_timeout_ms,
                q.retry_backoff_ms,
                q.append_linger_ms,
            ),
            (2000, 9000, 1000, 2000, 1000, 2000, 20, 25)
        );
        assert_eq!(c.metadata_log_dir(), c.data_dir());
        // An empty process.roles is unset, as Kafka's empty list.
        assert!(!cfg(&["process.roles="]).unwrap().quorum.kraft);
    }

    #[test]
    fn combined_quickstart() {
        let c = cfg(COMBINED).unwrap();
        let q = &c.quorum;
        assert!(q.kraft);
        assert_eq!(q.roles, ProcessRoles::Combined);
        assert_eq!(
            q.voters,
            vec![Voter {
                id: 1,
                host: "localhost".into(),
                port: 9093
            }]
        );
        assert!(q.is_single_node(1));
        let l = q.controller_listener.as_ref().unwrap();
        assert_eq!(l.name, "CONTROLLER");
        // Not in the default map: KRaft mode makes it PLAINTEXT.
        assert_eq!(l.protocol, SecurityProtocol::Plaintext);
        assert_eq!(l.listener.as_ref().unwrap().port, 9093);
        assert_eq!(l.advertised.as_ref().unwrap().host, "localhost");
        assert!(q.is_controller_listener("CONTROLLER"));
        assert!(!q.is_controller_listener("PLAINTEXT"));
        // The broker serves (and advertises) only its own listener; the controller listener
        // is the quorum's.
        let names = |ls: &[Listener]| ls.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&c.listeners), vec!["PLAINTEXT"]);
        assert_eq!(names(&c.advertised_listeners), vec!["PLAINTEXT"]);
        assert_eq!(c.advertised_for("PLAINTEXT").host, "localhost");
    }

    #[test]
    fn roles_parse() {
        assert_eq!(parse_roles("broker").unwrap(), ProcessRoles::Broker);
        assert_eq!(parse_roles("controller").unwrap(), ProcessRoles::Controller);
        assert_eq!(
            parse_roles(" controller , broker ").unwrap(),
            ProcessRoles::Combined
        );
        assert_eq!(
            quorum_err(&["process.roles=broker,zookeeper"]),
            QuorumError::UnknownRole("zookeeper".into())
        );
        // Kafka's role names are case-sensitive.
        assert_eq!(
            quorum_err(&["process.roles=Broker"]),
            QuorumError::UnknownRole("Broker".into())
        );
        assert_eq!(
            quorum_err(&["process.roles=broker,broker"]),
            QuorumError::DuplicateRole("[broker, broker]".into())
        );
        let e = quorum_err(&["process.roles=x"]);
        assert_eq!(
            e.to_string(),
            "Unknown process role 'x' (only 'broker' and 'controller' are allowed roles)"
        );
        assert_eq!(ConfigError::from(e).key(), Some("process.roles"));
    }

    #[test]
    fn voters_parse() {
        let v = parse_voters("1@a:9093, 2@[::1]:9094,3@10.0.0.3:1").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!((v[1].id, v[1].host.as_str(), v[1].port), (2, "::1", 9094));
        assert_eq!(v[2].host, "10.0.0.3");
        assert!(parse_voters("").unwrap().is_empty());
        assert_eq!(parse_voters("1-a:1"), Err(QuorumError::VoterForm));
        assert_eq!(parse_voters("1@"), Err(QuorumError::VoterForm));
        assert_eq!(parse_voters("1@a@b:1"), Err(QuorumError::VoterForm));
        assert_eq!(parse_voters("x@a:1"), Err(QuorumError::VoterId("x".into())));
        assert_eq!(
            parse_voters("1@:9093"),
            Err(QuorumError::VoterHost("1@:9093".into()))
        );
        assert_eq!(
            parse_voters("1@a/b:9093"),
            Err(QuorumError::VoterHost("1@a/b:9093".into()))
        );
        assert_eq!(
            parse_voters("1@host"),
            Err(QuorumError::VoterHost("1@host".into()))
        );
        assert_eq!(
            parse_voters("1@host:"),
            Err(QuorumError::VoterPort("1@host:".into()))
        );
        assert_eq!(
            parse_voters("1@host:70000"),
            Err(QuorumError::VoterPort("1@host:70000".into()))
        );
        assert_eq!(
            parse_voters("1@0.0.0.0:9093"),
            Err(QuorumError::NotRoutable("0.0.0.0".into()))
        );
        assert_eq!(
            parse_voters("1@a:1,1@b:2"),
            Err(QuorumError::DuplicateVoter(1))
        );
        assert_eq!(
            QuorumError::VoterForm.to_string(),
            "Invalid configuration value for controller.quorum.voters. Each entry should be in \
             the form `{id}@{host}:{port}`."
        );
        // The key's check runs them as the value is read, naming the key.
        let e = cfg(&["controller.quorum.voters=1@h"]).unwrap_err();
        assert_eq!(e.key(), Some("controller.quorum.voters"));
    }

    #[test]
    fn bootstrap_servers_parse() {
        let b = parse_bootstrap_servers("a:9093,[::1]:9094").unwrap();
        assert_eq!(
            b,
            vec![
                HostPort {
                    host: "a".into(),
                    port: 9093
                },
                HostPort {
                    host: "::1".into(),
                    port: 9094
                }
            ]
        );
        assert_eq!(
            parse_bootstrap_servers("a"),
            Err(QuorumError::BootstrapHost("a".into()))
        );
        assert_eq!(
            parse_bootstrap_servers("a:x"),
            Err(QuorumError::BootstrapPort("a:x".into()))
        );
        // A dynamic quorum: bootstrap servers instead of voters.
        let c = cfg(&with(
            &COMBINED[..1],
            &[
                "node.id=1",
                "controller.quorum.bootstrap.servers=localhost:9093",
                "listeners=PLAINTEXT://:9092,CONTROLLER://:9093",
                "controller.listener.names=CONTROLLER",
            ],
        ))
        .unwrap();
        assert!(c.quorum.voters.is_empty());
        assert!(!c.quorum.is_single_node(1));
    }

    #[test]
    fn kraft_needs_node_id_and_a_quorum() {
        let no_id: Vec<&str> = COMBINED
            .iter()
            .copied()
            .filter(|p| !p.starts_with("node.id"))
            .collect();
        assert_eq!(quorum_err(&no_id), QuorumError::MissingNodeId);
        // broker.id is node.id's alias.
        let mut legacy = no_id.clone();
        legacy.push("broker.id=1");
        assert!(cfg(&legacy).is_ok());
        let no_voters: Vec<&str> = COMBINED
            .iter()
            .copied()
            .filter(|p| !p.starts_with("controller.quorum.voters"))
            .collect();
        assert_eq!(quorum_err(&no_voters), QuorumError::NoQuorum);
    }

    #[test]
    fn controller_roles_must_be_voters_with_a_listener() {
        let e = quorum_err(&with(COMBINED, &["node.id=2"]));
        assert_eq!(
            e,
            QuorumError::ControllerNotVoter {
                node_id: 2,
                voters: "Set(1)".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "If process.roles contains the 'controller' role, the node id 2 must be included in \
             the set of voters controller.quorum.voters=Set(1)"
        );
        // No controller listener named: none of the listeners is one.
        let no_names: Vec<&str> = COMBINED
            .iter()
            .copied()
            .filter(|p| !p.starts_with("controller.listener.names"))
            .collect();
        assert_eq!(
            quorum_err(&with(
                &no_names,
                &["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"]
            )),
            QuorumError::ControllerNoListener
        );
        // A name not among the listeners.
        assert_eq!(
            quorum_err(&with(
                COMBINED,
                &["controller.listener.names=CONTROLLER,OTHER"]
            )),
            QuorumError::ControllerListenerMissing
        );
    }

    #[test]
    fn controller_only_listens_on_controller_listeners() {
        let base = [
            "process.roles=controller",
            "node.id=1",
            "controller.quorum.voters=1@localhost:9093",
            "controller.listener.names=CONTROLLER",
        ];
        let c = cfg(&with(&base, &["listeners=CONTROLLER://:9093"])).unwrap();
        assert_eq!(c.quorum.roles, ProcessRoles::Controller);
        assert!(c.quorum.roles.is_controller() && !c.quorum.roles.is_broker());
        assert_eq!(
            quorum_err(&with(
                &base,
                &["listeners=PLAINTEXT://:9092,CONTROLLER://:9093"]
            )),
            QuorumError::ControllerOnlyHasBrokerListener
        );
    }

    #[test]
    fn broker_only_rules() {
        let base = [
            "process.roles=broker",
            "node.id=4",
            "controller.quorum.voters=1@c1:9093,2@c2:9093,3@c3:9093",
        ];
        let ok = with(
            &base,
            &[
                "controller.listener.names=CONTROLLER",
                "listeners=PLAINTEXT://:9092",
            ],
        );
        let c = cfg(&ok).unwrap();
        let l = c.quorum.controller_listener.as_ref().unwrap();
        assert_eq!(
            (l.name.as_str(), l.protocol, l.listener.clone()),
            ("CONTROLLER", SecurityProtocol::Plaintext, None)
        );
        assert!(!c.quorum.is_single_node(4));
        // The node id is a voter.
        assert_eq!(
            quorum_err(&with(&ok, &["node.id=2"])),
            QuorumError::BrokerIsVoter {
                node_id: 2,
                voters: "Set(1, 2, 3)".into()
            }
        );
        // No controller listener name.
        assert_eq!(
            quorum_err(&with(&base, &["listeners=PLAINTEXT://:9092"])),
            QuorumError::BrokerNoControllerListener
        );
        // Listening on the controller listener.
        assert_eq!(
            quorum_err(&with(
                &ok,
                &["listeners=PLAINTEXT://:9092,CONTROLLER://:9093"]
            )),
            QuorumError::BrokerListensOnController
        );
        // An explicit map must name the controller listener.
        assert_eq!(
            quorum_err(&with(
                &ok,
                &["listener.security.protocol.map=PLAINTEXT:PLAINTEXT"]
            )),
            QuorumError::ControllerListenerNotMapped("CONTROLLER".into())
        );
        // A SASL controller listener is named as such.
        assert!(matches!(
            quorum_err(&with(
                &ok,
                &["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL"]
            )),
            QuorumError::ControllerListenerSasl { .. }
        ));
        // With an SSL listener the default map gains nothing: the map must say.
        assert_eq!(
            quorum_err(&with(
                &ok,
                &[
                    "listeners=SSL://:9093",
                    "ssl.keystore.location=/nonexistent.pem"
                ]
            )),
            QuorumError::ControllerListenerNotMapped("CONTROLLER".into())
        );
    }

    #[test]
    fn a_broker_needs_a_listener_that_is_not_the_controllers() {
        let e = quorum_err(&[
            "process.roles=broker,controller",
            "node.id=1",
            "controller.quorum.voters=1@localhost:9093",
            "listeners=CONTROLLER://:9093",
            "controller.listener.names=CONTROLLER",
        ]);
        assert_eq!(e, QuorumError::NoBrokerListener);
        assert_eq!(ConfigError::from(e).key(), Some("advertised.listeners"));
    }

    #[test]
    fn quorum_keys_without_roles_are_refused() {
        assert_eq!(
            quorum_err(&["controller.listener.names=CONTROLLER"]),
            QuorumError::ControllerNamesWithoutKraft("CONTROLLER".into())
        );
        assert_eq!(
            quorum_err(&["controller.quorum.voters=1@localhost:9093"]),
            QuorumError::QuorumWithoutRoles("controller.quorum.voters")
        );
        assert_eq!(
            quorum_err(&["controller.quorum.bootstrap.servers=localhost:9093"]),
            QuorumError::QuorumWithoutRoles("controller.quorum.bootstrap.servers")
        );
        // Without process.roles a CONTROLLER listener is just a listener, and needs a map
        // entry as before.
        assert!(matches!(
            cfg(&["listeners=PLAINTEXT://:9092,CONTROLLER://:9093"]),
            Err(ConfigError::InvalidValue { .. })
        ));
    }

    #[test]
    fn timings_and_metadata_dir() {
        let c = cfg(&[
            "broker.heartbeat.interval.ms=100",
            "broker.session.timeout.ms=600",
            "controller.quorum.election.timeout.ms=50",
            "controller.quorum.fetch.timeout.ms=70",
            "controller.quorum.election.backoff.max.ms=30",
            "controller.quorum.request.timeout.ms=40",
            "metadata.log.dir=/var/lib/meta",
        ])
        .unwrap();
        let q = &c.quorum;
        assert_eq!(
            (
                q.broker_heartbeat_interval_ms,
                q.broker_session_timeout_ms,
                q.election_timeout_ms,
                q.fetch_timeout_ms,
                q.election_backoff_max_ms,
                q.request_timeout_ms
            ),
            (100, 600, 50, 70, 30, 40)
        );
        assert_eq!(c.metadata_log_dir(), std::path::Path::new("/var/lib/meta"));
        assert!(matches!(
            cfg(&["broker.session.timeout.ms=soon"]),
            Err(ConfigError::InvalidValue { .. })
        ));
    }

    #[test]
    fn described_like_any_key() {
        let c = cfg(COMBINED).unwrap();
        let entries = crate::describe_broker(&c);
        let find = |k: &str| entries.iter().find(|e| e.name == k).unwrap();
        assert_eq!(
            find("process.roles").value.as_deref(),
            Some("broker,controller")
        );
        assert_eq!(
            find("controller.quorum.voters").source,
            crate::ConfigSource::StaticBroker
        );
        assert_eq!(
            find("broker.session.timeout.ms").value.as_deref(),
            Some("9000")
        );
        assert!(find("controller.quorum.election.timeout.ms").read_only);
    }
}
