//! The key tables: every broker and topic key we know, with Kafka's name, type, default,
//! validator and documentation. One key = one row; everything else reads these rows. This
//! file holds the broker table and the lookups; what a row is lives in `rows`, the topic
//! table in `topic_keys` (re-exported here).

pub(super) use crate::rows::LONG_MAX;
pub use crate::rows::{Check, ConfigType, Spec};
pub use crate::topic_keys::TOPIC_KEYS;

use crate::rows::{dspec, spec, CLEANUP, COMPRESSION, FLUSH, TS_TYPES};
use ConfigType as T;

/// Broker keys we understand. `spec` rows are static (read-only in DescribeConfigs), `dspec`
/// rows dynamic.
pub const BROKER_KEYS: &[Spec] = &[
    spec(
        "node.id",
        T::Int,
        Some("1"),
        Check::AtLeast(0),
        "The node id of this server.",
    ),
    spec(
        "broker.id",
        T::Int,
        None,
        Check::AtLeast(0),
        "Legacy alias of node.id (node.id wins).",
    ),
    // KRaft roles and the metadata quorum (Kafka's KRaftConfigs / QuorumConfig; read and
    // checked by `quorum`, acted on by the quorum).
    spec(
        "process.roles",
        T::List,
        None,
        Check::ProcessRoles,
        "The roles this process plays: broker, controller, or broker,controller. Unset (ours): \
         one combined node that is its own quorum, with no quorum key set; set, Kafka's KRaft \
         rules apply (node.id required, voters or bootstrap servers, controller listeners).",
    ),
    spec(
        "controller.quorum.voters",
        T::List,
        None,
        Check::Voters,
        "Map of id/endpoint information for the set of voters in a comma-separated list of \
         {id}@{host}:{port} entries. For example: 1@localhost:9092,2@localhost:9093,3@localhost:9094",
    ),
    spec(
        "controller.quorum.bootstrap.servers",
        T::List,
        None,
        Check::BootstrapServers,
        "List of endpoints to use for bootstrapping the cluster metadata. The endpoints are \
         specified in comma-separated list of {host}:{port} entries. For example: \
         localhost:9092,localhost:9093,localhost:9094.",
    ),
    spec(
        "controller.listener.names",
        T::String,
        None,
        Check::None,
        "A comma-separated list of the names of the listeners used by the controller. Required \
         with process.roles. When communicating with the controller quorum, the broker will \
         always use the first listener in this list.",
    ),
    spec(
        "controller.quorum.election.timeout.ms",
        T::Int,
        Some("1000"),
        Check::None,
        "Maximum time in milliseconds to wait without being able to fetch from the leader \
         before triggering a new election.",
    ),
    spec(
        "controller.quorum.fetch.timeout.ms",
        T::Int,
        Some("2000"),
        Check::None,
        "Maximum time without a successful fetch from the current leader before becoming a \
         candidate and triggering an election for voters; maximum time a leader can go without \
         receiving valid fetch or fetchSnapshot request from a majority of the quorum before \
         resigning.",
    ),
    spec(
        "controller.quorum.election.backoff.max.ms",
        T::Int,
        Some("1000"),
        Check::None,
        "Maximum time in milliseconds before starting new elections (the binary exponential \
         backoff that helps prevent gridlocked elections).",
    ),
    spec(
        "controller.quorum.request.timeout.ms",
        T::Int,
        Some("2000"),
        Check::None,
        "How long a quorum request waits for its response before it is retried or failed.",
    ),
    spec(
        "controller.quorum.retry.backoff.ms",
        T::Int,
        Some("20"),
        Check::None,
        "Time to wait before retrying a failed quorum request.",
    ),
    spec(
        "controller.quorum.append.linger.ms",
        T::Int,
        Some("25"),
        Check::None,
        "The duration in milliseconds that the leader will wait for writes to accumulate \
         before flushing them to disk.",
    ),
    spec(
        "broker.heartbeat.interval.ms",
        T::Int,
        Some("2000"),
        Check::None,
        "The length of time in milliseconds between broker heartbeats (KRaft).",
    ),
    spec(
        "broker.session.timeout.ms",
        T::Int,
        Some("9000"),
        Check::None,
        "The length of time in milliseconds that a broker lease lasts if no heartbeats are \
         made (KRaft).",
    ),
    spec(
        "replica.lag.time.max.ms",
        T::Long,
        Some("30000"),
        Check::AtLeast(1),
        "If a follower has not sent any fetch requests or has not consumed up to the leader's \
         log end offset for at least this time, the leader will remove the follower from the ISR.",
    ),
    spec(
        "replica.fetch.wait.max.ms",
        T::Int,
        Some("500"),
        Check::AtLeast(0),
        "The maximum wait time for each fetcher request issued by follower replicas.",
    ),
    spec(
        "replica.fetch.max.bytes",
        T::Int,
        Some("1048576"),
        Check::AtLeast(0),
        "The number of bytes of messages to attempt to fetch for each partition.",
    ),
    spec(
        "replica.fetch.response.max.bytes",
        T::Int,
        Some("10485760"),
        Check::AtLeast(0),
        "Maximum bytes expected for the entire fetch response.",
    ),
    spec(
        "num.replica.fetchers",
        T::Int,
        Some("1"),
        Check::AtLeast(1),
        "Ours: fetcher connections per leader per shard (Kafka: fetcher threads per source broker).",
    ),
    spec(
        "auto.leader.rebalance.enable",
        T::Boolean,
        Some("true"),
        Check::None,
        "The active controller moves leadership back to each partition's preferred replica \
         (its first) where that one is in the ISR and usable, every \
         leader.imbalance.check.interval.seconds.",
    ),
    spec(
        "leader.imbalance.check.interval.seconds",
        T::Long,
        Some("300"),
        Check::AtLeast(1),
        "How often the active controller checks for partitions not led by their preferred \
         replica.",
    ),
    spec(
        "leader.imbalance.per.broker.percentage",
        T::Int,
        Some("10"),
        Check::AtLeast(0),
        "Accepted for Kafka's configurations; as Kafka's KRaft controller, every imbalanced \
         partition is rebalanced whatever its broker's share.",
    ),
    dspec(
        "unclean.leader.election.enable",
        T::Boolean,
        Some("false"),
        Check::None,
        "Default unclean.leader.election.enable for topics: a partition whose in-sync replicas \
         are all down is led by another live replica, losing what it lacks.",
    ),
    spec(
        "metadata.log.dir",
        T::String,
        None,
        Check::None,
        "Where the metadata log is put (its __cluster_metadata-0 directory); unset = the first \
         of log.dirs.",
    ),
    spec(
        "listeners",
        T::String,
        Some("PLAINTEXT://127.0.0.1:9092"),
        Check::Listeners,
        "Comma list of NAME://host:port to listen on (empty host = all interfaces).",
    ),
    spec(
        "advertised.listeners",
        T::String,
        None,
        Check::Listeners,
        "Listeners published to clients, matched to listeners by name (a client gets the \
         brokers' address on the listener it connected through); defaults to listeners.",
    ),
    spec(
        "listener.security.protocol.map",
        T::String,
        Some(super::listeners::DEFAULT_PROTOCOL_MAP),
        Check::ProtocolMap,
        "NAME:PROTOCOL pairs giving each listener name its security protocol (PLAINTEXT, SSL, \
         SASL_PLAINTEXT or SASL_SSL).",
    ),
    spec(
        "ssl.keystore.type",
        T::String,
        Some("PEM"),
        Check::OneOf(&["PEM"]),
        "Format of ssl.keystore.location: PEM only (Kafka's default JKS and PKCS12 are not \
         read; convert with openssl).",
    ),
    spec(
        "ssl.keystore.location",
        T::String,
        None,
        Check::None,
        "PEM file holding the SSL listeners' private key (PKCS#8, PKCS#1 or SEC1, unencrypted) \
         and certificate chain, leaf first. Required when a listener is SSL.",
    ),
    spec(
        "ssl.key.password",
        T::Password,
        None,
        Check::None,
        "Password of an encrypted private key: not supported (start-up fails if set); keep \
         the key unencrypted and the file readable by the broker only.",
    ),
    spec(
        "ssl.truststore.type",
        T::String,
        Some("PEM"),
        Check::OneOf(&["PEM"]),
        "Format of ssl.truststore.location: PEM only.",
    ),
    spec(
        "ssl.truststore.location",
        T::String,
        None,
        Check::None,
        "PEM file of the CA certificates client certificates are verified against (needed \
         when ssl.client.auth is requested or required).",
    ),
    spec(
        "ssl.client.auth",
        T::String,
        Some("none"),
        Check::OneOf(&["none", "requested", "required"]),
        "Client certificates: none (not asked for), requested (verified when sent), required \
         (a client without a valid one fails the handshake). The principal is User: and the \
         certificate's subject DN, else ANONYMOUS.",
    ),
    spec(
        "ssl.enabled.protocols",
        T::List,
        Some("TLSv1.2,TLSv1.3"),
        Check::ListOf(&["TLSv1.2", "TLSv1.3"]),
        "TLS versions the SSL listeners accept.",
    ),
    spec(
        "ssl.cipher.suites",
        T::List,
        None,
        Check::None,
        "Cipher suites, IANA names (TLS_AES_128_GCM_SHA256, \
         TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...); empty = every AES-GCM and \
         ChaCha20-Poly1305 suite of TLS 1.2 (ECDHE) and 1.3.",
    ),
    spec(
        "ssl.ktls.enable",
        T::Boolean,
        Some("true"),
        Check::None,
        "Ours, not Kafka's: after the handshake, hand the session keys to the kernel (kernel \
         TLS) so that fetches keep sendfile. Used per connection where the kernel supports it \
         (tls module loaded); user-space TLS otherwise. false = always user-space TLS.",
    ),
    // Authorization (Kafka's AuthorizerConfig / StandardAuthorizer; read by `authorizer`).
    spec(
        "authorizer.class.name",
        T::String,
        Some(""),
        Check::None,
        "The authorizer: empty (no authorization: every request is allowed and the ACL APIs \
         answer SECURITY_DISABLED) or org.apache.kafka.metadata.authorizer.StandardAuthorizer \
         (requests checked against the ACLs kept in the metadata log, as Kafka's KRaft \
         authorizer does).",
    ),
    spec(
        "super.users",
        T::String,
        None,
        Check::None,
        "Principals allowed every operation on every resource, separated by semicolons \
         (User:admin;User:ops).",
    ),
    spec(
        "allow.everyone.if.no.acl.found",
        T::Boolean,
        Some("false"),
        Check::None,
        "When true, a resource no ACL matches is open to everyone (Kafka's default: false, \
         closed).",
    ),
    spec(
        "ssl.principal.mapping.rules",
        T::String,
        Some("DEFAULT"),
        Check::None,
        "Rules mapping a client certificate's subject DN to the principal's name, as Kafka's: \
         RULE:pattern/replacement/[LU] entries separated by commas, then DEFAULT (the whole DN).",
    ),
    // SASL (Kafka's SaslConfigs / BrokerSecurityConfigs; read by `sasl`). The JAAS
    // configuration is per listener and mechanism:
    // listener.name.<listener>.<mechanism>.sasl.jaas.config (see `sasl::JAAS_SUFFIX`).
    spec(
        "sasl.enabled.mechanisms",
        T::List,
        Some("GSSAPI"),
        Check::None,
        "The SASL mechanisms served on SASL_PLAINTEXT and SASL_SSL listeners: PLAIN, \
         SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. GSSAPI (Kerberos, Kafka's default) is not \
         served: start-up fails when a SASL listener is configured and it is enabled.",
    ),
    spec(
        "sasl.mechanism.inter.broker.protocol",
        T::String,
        Some("GSSAPI"),
        Check::None,
        "SASL mechanism brokers log in with on the inter-broker listener when it is a \
         SASL_PLAINTEXT one (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the username and password \
         options of that listener's JAAS entry for it are the login).",
    ),
    spec(
        "inter.broker.listener.name",
        T::String,
        None,
        Check::None,
        "The listener brokers reach each other on (replica fetches, transaction markers): a \
         PLAINTEXT or SASL_PLAINTEXT listener (TLS between brokers is not served). Unset: the \
         first PLAINTEXT listener.",
    ),
    spec(
        "sasl.server.max.receive.size",
        T::Int,
        Some("524288"),
        Check::AtLeast(1),
        "The maximum receive size allowed before and during initial SASL authentication. A \
         larger frame closes the connection.",
    ),
    spec(
        "connections.max.reauth.ms",
        T::Long,
        Some("0"),
        Check::AtLeast(0),
        "When positive, the most a SASL session lasts before the client must re-authenticate \
         (KIP-368): SaslAuthenticate answers the lifetime (shortened to an OAUTHBEARER \
         token's expiry), and a connection whose session has expired is closed at its next \
         request other than a re-authentication. An OAUTHBEARER token's expiry ends its session \
         even at 0, as in Kafka. listener.name.<listener>.<mechanism>.connections.max.reauth.ms \
         overrides it.",
    ),
    spec(
        "sasl.oauthbearer.jwks.endpoint.url",
        T::String,
        None,
        Check::None,
        "OAUTHBEARER: the JWKS holding the keys that sign accepted tokens, as a file:// URL \
         (read at start-up; https is not fetched). Unset: unsecured (alg none) tokens are \
         accepted, as Kafka's default unsecured validator does; for tests only.",
    ),
    spec(
        "sasl.oauthbearer.expected.audience",
        T::List,
        None,
        Check::None,
        "OAUTHBEARER: audiences (aud) of which a signed token must name one; unset = any.",
    ),
    spec(
        "sasl.oauthbearer.expected.issuer",
        T::String,
        None,
        Check::None,
        "OAUTHBEARER: the issuer (iss) a signed token must name; unset = any.",
    ),
    spec(
        "sasl.oauthbearer.sub.claim.name",
        T::String,
        Some("sub"),
        Check::None,
        "OAUTHBEARER: the claim naming the principal.",
    ),
    spec(
        "sasl.oauthbearer.scope.claim.name",
        T::String,
        Some("scope"),
        Check::None,
        "OAUTHBEARER: the claim holding the token's scopes.",
    ),
    spec(
        "sasl.oauthbearer.clock.skew.seconds",
        T::Int,
        Some("30"),
        Check::AtLeast(0),
        "OAUTHBEARER: seconds of difference allowed between the token issuer's clock and ours.",
    ),
    spec(
        "log.dirs",
        T::List,
        Some("./data"),
        Check::NonEmptyList,
        "Data directories (only the first one is used).",
    ),
    spec(
        "log.dir",
        T::String,
        None,
        Check::NonEmptyList,
        "Used when log.dirs is not set.",
    ),
    spec(
        "num.partitions",
        T::Int,
        Some("1"),
        Check::AtLeast(1),
        "Default number of partitions per topic.",
    ),
    spec(
        "default.replication.factor",
        T::Int,
        Some("1"),
        Check::AtLeast(1),
        "Default replication factor for created topics.",
    ),
    spec(
        "auto.create.topics.enable",
        T::Boolean,
        Some("true"),
        Check::None,
        "Create topics on first metadata request/produce.",
    ),
    dspec(
        "log.segment.bytes",
        T::Int,
        Some("1073741824"),
        Check::AtLeast(14),
        "Maximum size of a single log segment file.",
    ),
    dspec(
        "log.roll.ms",
        T::Long,
        None,
        Check::AtLeast(1),
        "Maximum segment age before rolling; log.roll.hours if unset.",
    ),
    dspec(
        "log.roll.hours",
        T::Int,
        Some("168"),
        Check::AtLeast(1),
        "Maximum segment age before rolling, in hours.",
    ),
    dspec(
        "log.index.interval.bytes",
        T::Int,
        Some("4096"),
        Check::AtLeast(0),
        "Bytes between offset index entries.",
    ),
    dspec(
        "log.index.size.max.bytes",
        T::Int,
        Some("10485760"),
        Check::AtLeast(4),
        "Maximum size of an offset index file.",
    ),
    dspec(
        "message.max.bytes",
        T::Int,
        Some("1048588"),
        Check::AtLeast(0),
        "Largest record batch size allowed.",
    ),
    spec(
        "socket.request.max.bytes",
        T::Int,
        Some("104857600"),
        Check::AtLeast(1),
        "Largest request size accepted on a socket.",
    ),
    spec(
        "fetch.max.bytes",
        T::Int,
        Some("57671680"),
        Check::AtLeast(1024),
        "Most record bytes one Fetch response carries, whatever the request's max_bytes.",
    ),
    dspec(
        "log.retention.ms",
        T::Long,
        None,
        Check::AtLeast(-1),
        "Retention time (-1 = unlimited); falls back to minutes, then hours.",
    ),
    dspec(
        "log.retention.minutes",
        T::Int,
        None,
        Check::AtLeast(-1),
        "Retention time in minutes.",
    ),
    dspec(
        "log.retention.hours",
        T::Int,
        Some("168"),
        Check::AtLeast(-1),
        "Retention time in hours.",
    ),
    dspec(
        "log.retention.bytes",
        T::Long,
        Some("-1"),
        Check::None,
        "Maximum partition size before deleting old segments (-1 = unlimited).",
    ),
    dspec(
        "producer.id.expiration.ms",
        T::Int,
        Some("86400000"),
        Check::AtLeast(1),
        "Time an idempotent producer's state is kept after its last batch.",
    ),
    spec(
        "log.retention.check.interval.ms",
        T::Long,
        Some("300000"),
        Check::AtLeast(1),
        "How often each shard applies retention.ms / retention.bytes.",
    ),
    spec(
        "log.cleaner.dedupe.buffer.size",
        T::Long,
        Some("134217728"),
        Check::AtLeast(1024),
        "Memory of the log cleaners' key maps, split evenly across the shards.",
    ),
    spec(
        "log.fd.cache.size",
        T::Int,
        Some("10000"),
        Check::Between(1, i32::MAX as i64),
        "Ours, not Kafka's: file descriptors of log files (segments, recovery points) held open \
         between requests, all shards together (each shard keeps an equal share, at least 16, \
         and opens the others on demand, closing the least recently used). Bounds the broker's \
         descriptors whatever its partition count: an idle partition holds none. Files in use by \
         a read or a sync stay open until it is done.",
    ),
    spec(
        "log.cleaner.backoff.ms",
        T::Long,
        Some("15000"),
        Check::AtLeast(1),
        "How long a shard's log cleaner sleeps when no compacted log needs cleaning.",
    ),
    dspec(
        "log.flush.interval.messages",
        T::Long,
        Some(LONG_MAX),
        Check::AtLeast(1),
        "Messages accumulated before forcing a flush (replication flush policy).",
    ),
    dspec(
        "log.flush.interval.ms",
        T::Long,
        None,
        Check::AtLeast(0),
        "Maximum time before forcing a flush (null = never).",
    ),
    dspec(
        "log.flush.policy",
        T::String,
        Some("ack"),
        Check::OneOf(FLUSH),
        "ack: fsync before acknowledging produce; replication: flush by interval only.",
    ),
    dspec(
        "log.cleanup.policy",
        T::List,
        Some("delete"),
        Check::ListOf(CLEANUP),
        "Default cleanup policy for topics.",
    ),
    dspec(
        "compression.type",
        T::String,
        Some("producer"),
        Check::OneOf(COMPRESSION),
        "Default compression type for topics.",
    ),
    dspec(
        "log.message.timestamp.type",
        T::String,
        Some("CreateTime"),
        Check::OneOf(TS_TYPES),
        "Default timestamp type for topics.",
    ),
    dspec(
        "log.message.timestamp.before.max.ms",
        T::Long,
        Some(LONG_MAX),
        Check::AtLeast(0),
        "Default message.timestamp.before.max.ms for topics.",
    ),
    dspec(
        "log.message.timestamp.after.max.ms",
        T::Long,
        Some("3600000"),
        Check::AtLeast(0),
        "Default message.timestamp.after.max.ms for topics.",
    ),
    dspec(
        "min.insync.replicas",
        T::Int,
        Some("1"),
        Check::AtLeast(1),
        "Default min.insync.replicas for topics.",
    ),
    spec(
        "delete.topic.enable",
        T::Boolean,
        Some("true"),
        Check::None,
        "Whether DeleteTopics is allowed.",
    ),
    spec(
        "num.shards",
        T::Int,
        Some("0"),
        Check::Between(0, u16::MAX as i64),
        "Number of shards (cores); 0 = one per CPU core.",
    ),
    spec(
        "shard.busy.poll.us",
        T::Long,
        Some("50"),
        Check::Between(0, 1_000_000),
        "Ours, not Kafka's: while requests reach a shard less than this many microseconds apart \
         on average, it keeps polling its sockets for up to this long after the last one instead \
         of sleeping (no park and wake-up per request); otherwise it sleeps at once, so an idle \
         broker uses no CPU. 0 = never poll.",
    ),
    spec(
        "cluster.id",
        T::String,
        None,
        Check::None,
        "Cluster id (generated if unset).",
    ),
    spec(
        "connections.max.idle.ms",
        T::Long,
        Some("600000"),
        Check::AtLeast(-1),
        "Close connections with no bytes read or written for this long (-1 or 0 = never).",
    ),
    spec(
        "max.connections",
        T::Int,
        Some("2147483647"),
        Check::AtLeast(0),
        "Open connections, all listeners; capped at 3/4 of RLIMIT_NOFILE. Extra ones are closed at once.",
    ),
    spec(
        "max.connections.per.ip",
        T::Int,
        Some("2147483647"),
        Check::AtLeast(0),
        "Open connections from one client IP. Extra ones are closed at once.",
    ),
    spec(
        "queued.max.requests",
        T::Int,
        Some("500"),
        Check::AtLeast(1),
        "Requests of one connection read and not yet answered before it stops reading (per connection, not per broker).",
    ),
    spec(
        "queued.max.request.bytes",
        T::Long,
        Some("-1"),
        Check::AtLeast(-1),
        "Bytes of requests and unwritten responses one shard holds before it stops reading sockets (-1 or 0 = 67108864).",
    ),
    spec(
        "offsets.topic.num.partitions",
        T::Int,
        Some("50"),
        Check::Between(1, 1000),
        "Partitions of __consumer_offsets, created on first use (a group's coordinator is the owner of its partition).",
    ),
    spec(
        "offsets.topic.segment.bytes",
        T::Int,
        Some("104857600"),
        Check::AtLeast(1),
        "Segment size of __consumer_offsets.",
    ),
    spec(
        "transaction.state.log.num.partitions",
        T::Int,
        Some("50"),
        Check::Between(1, 1000),
        "Partitions of __transaction_state, created on the first FindCoordinator for a transactional id (a transactional id's coordinator is the owner of its partition).",
    ),
    spec(
        "transaction.state.log.segment.bytes",
        T::Int,
        Some("104857600"),
        Check::AtLeast(1),
        "Segment size of __transaction_state.",
    ),
    spec(
        "transaction.max.timeout.ms",
        T::Int,
        Some("900000"),
        Check::AtLeast(1),
        "The longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it).",
    ),
    spec(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        T::Int,
        Some("10000"),
        Check::AtLeast(1),
        "How often the coordinator aborts transactions open longer than their timeout.",
    ),
    spec(
        "transactional.id.expiration.ms",
        T::Int,
        Some("604800000"),
        Check::AtLeast(1),
        "A transactional id with no transaction for this long is forgotten (its producer id with it).",
    ),
    spec(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        T::Int,
        Some("3600000"),
        Check::AtLeast(1),
        "How often expired transactional ids are removed.",
    ),
    spec(
        "offsets.retention.minutes",
        T::Int,
        Some("10080"),
        Check::AtLeast(1),
        "Committed offsets of a group that has been empty this long are deleted.",
    ),
    spec(
        "offsets.retention.check.interval.ms",
        T::Long,
        Some("600000"),
        Check::AtLeast(1),
        "How often expired committed offsets are looked for.",
    ),
    spec(
        "offset.metadata.max.bytes",
        T::Int,
        Some("4096"),
        Check::AtLeast(0),
        "Largest metadata string of an offset commit (OFFSET_METADATA_TOO_LARGE above it).",
    ),
    spec(
        "group.initial.rebalance.delay.ms",
        T::Int,
        Some("3000"),
        Check::AtLeast(0),
        "How long the first rebalance of an empty classic group waits for more members to join.",
    ),
    spec(
        "group.min.session.timeout.ms",
        T::Int,
        Some("6000"),
        Check::AtLeast(0),
        "Smallest session timeout a classic group member may ask for.",
    ),
    spec(
        "group.max.session.timeout.ms",
        T::Int,
        Some("1800000"),
        Check::AtLeast(0),
        "Largest session timeout a classic group member may ask for.",
    ),
    spec(
        "group.max.size",
        T::Int,
        Some("2147483647"),
        Check::AtLeast(1),
        "Most members of one classic group (GROUP_MAX_SIZE_REACHED beyond).",
    ),
    spec(
        "group.consumer.session.timeout.ms",
        T::Int,
        Some("45000"),
        Check::AtLeast(1),
        "A KIP-848 consumer group member that does not heartbeat for this long is fenced.",
    ),
    spec(
        "group.consumer.heartbeat.interval.ms",
        T::Int,
        Some("5000"),
        Check::AtLeast(1),
        "Heartbeat interval told to KIP-848 consumer group members.",
    ),
    spec(
        "group.consumer.max.size",
        T::Int,
        Some("2147483647"),
        Check::AtLeast(1),
        "Most members of one KIP-848 consumer group (GROUP_MAX_SIZE_REACHED beyond).",
    ),
    spec(
        "group.consumer.assignors",
        T::List,
        Some("uniform,range"),
        Check::ListOf(&["uniform", "range"]),
        "Broker-side assignors of KIP-848 consumer groups; the first is the default.",
    ),
    spec(
        "max.incremental.fetch.session.cache.slots",
        T::Int,
        Some("1000"),
        Check::AtLeast(0),
        "The maximum number of incremental fetch sessions (KIP-227) the broker keeps, all shards together.",
    ),
    spec(
        "fetch.path",
        T::String,
        Some("zerocopy"),
        Check::OneOf(&["zerocopy", "copy"]),
        "How fetched records reach the socket: zerocopy (sendfile from the page cache) or copy (read into a buffer, as Kafka does with TLS; kept to measure).",
    ),
    spec(
        "connection.handoff.enable",
        T::Boolean,
        Some("true"),
        Check::None,
        "Ours, not Kafka's: move a plaintext connection whose Produce and Fetch requests mostly touch partitions of another shard to that shard, so they are served without a hop between cores. TLS connections stay where they were accepted. false = every connection stays on the shard that accepted it.",
    ),
    spec(
        "log.format",
        T::String,
        Some("text"),
        Check::OneOf(&["text", "json"]),
        "Ours, not Kafka's: how log events are written to stderr, one line each: text (time, level, target, message, key=value fields) or json (one JSON object per line).",
    ),
    spec(
        "log.level",
        T::String,
        Some("INFO"),
        Check::None,
        "Ours, not Kafka's: the starting log levels: a level (TRACE, DEBUG, INFO, WARN, ERROR, OFF; FATAL = ERROR) and LOGGER=LEVEL items, comma-separated (INFO,api::connection=DEBUG), a logger being a module path. RUST_LOG, when set, wins. At run time: SIGUSR1/SIGUSR2 or IncrementalAlterConfigs on BROKER_LOGGER.",
    ),
    spec(
        "metrics.listener",
        T::String,
        None,
        Check::HttpListener,
        "Ours, not Kafka's: http://host:port of the Prometheus endpoint (GET /metrics, text format 0.0.4: per shard and API requests, errors, latency, bytes; connections; forwards and handoffs; page cache vs disk fetches; fsyncs; log size per partition; consumer group lag). Unset or empty = no endpoint.",
    ),
];

/// Kafka keys commonly found in `server.properties` that mean nothing to us (thread pools,
/// internal-topic replication): accepted and logged as ignored so an
/// existing Kafka config loads.
pub const IGNORED_KEYS: &[&str] = &[
    "num.network.threads",
    "num.io.threads",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir",
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "ssl.protocol",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.endpoint.identification.algorithm",
];

/// Broker keys whose effective value is derived from several keys (first set wins): a topic
/// default is "StaticBroker" if any of the family was set explicitly.
pub(super) const FAMILIES: &[&[&str]] = &[
    &["node.id", "broker.id"],
    &["log.dirs", "log.dir"],
    &["log.roll.ms", "log.roll.hours"],
    &[
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ],
];

pub(super) fn find(table: &'static [Spec], key: &str) -> Option<&'static Spec> {
    table.iter().find(|s| s.name == key)
}

/// The row of broker key `key`.
pub fn find_broker_key(key: &str) -> Option<&'static Spec> {
    find(BROKER_KEYS, key)
}

/// The row of topic key `key`.
pub fn find_topic_key(key: &str) -> Option<&'static Spec> {
    find(TOPIC_KEYS, key)
}

/// The keys of broker key `key`'s alias/unit family in precedence order (`log.retention.ms`,
/// `log.retention.minutes`, `log.retention.hours`), or just `key`: Kafka's broker synonyms.
pub(super) fn family(key: &'static str) -> Vec<&'static str> {
    FAMILIES
        .iter()
        .find(|f| f.contains(&key))
        .map_or_else(|| vec![key], |f| f.to_vec())
}
