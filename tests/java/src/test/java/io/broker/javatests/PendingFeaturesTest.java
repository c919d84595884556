package io.broker.javatests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Features the broker does not have yet. Each test is skipped (JUnit assumption, with the
 * reason) while the broker does not advertise the feature's APIs in ApiVersions, and runs (and
 * must pass) as soon as it advertises any of them: advertising an API commits the broker to
 * serving it, and advertising part of a feature's APIs fails.
 */
class PendingFeaturesTest {
    static BrokerProcess broker;

    @BeforeAll
    static void start() throws Exception {
        broker = BrokerProcess.start();
    }

    @AfterAll
    static void stop() {
        if (broker != null) {
            broker.close();
        }
    }

    static void assumeAdvertised(String feature, Map<Integer, String> apis) throws Exception {
        Map<Integer, int[]> advertised = Kafka.apiVersions(broker);
        StringBuilder missing = new StringBuilder();
        apis.forEach((key, name) -> {
            if (!advertised.containsKey(key)) {
                missing.append(missing.length() == 0 ? "" : ", ").append(name).append(" (").append(key).append(')');
            }
        });
        boolean none = apis.keySet().stream().noneMatch(advertised::containsKey);
        assumeTrue(!none, feature + " not served yet: the broker does not advertise " + missing + " in ApiVersions");
        // some of the feature's APIs but not all: a half-served feature fails rather than skips
        assertEquals("", missing.toString(), feature + ": the broker advertises some of its APIs but not these");
    }

    @Test
    void transactions() throws Exception {
        // InitProducerId (22) is served already, for idempotent producers: not a sign of transactions
        assumeAdvertised("transactions", Map.of(24, "AddPartitionsToTxn",
                25, "AddOffsetsToTxn", 26, "EndTxn", 28, "TxnOffsetCommit"));
        Kafka.createTopic(broker, "java-txn", 1);
        try (KafkaProducer<String, String> p = Kafka.producer(broker, Map.of(
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, "java-txn-1"))) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>("java-txn", "aborted", "a"));
            p.abortTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>("java-txn", "committed", "c"));
            p.commitTransaction();
        }
        try (KafkaConsumer<String, String> c = Kafka.consumer(broker, Map.of(
                ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed"))) {
            TopicPartition tp = new TopicPartition("java-txn", 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            var recs = Kafka.pollUntil(c, 1, Duration.ofSeconds(20));
            recs.addAll(c.poll(Duration.ofSeconds(1)).records(tp));
            assertEquals(1, recs.size(), "read_committed sees only the committed record: " + recs);
            assertEquals("committed", recs.get(0).key());
        }
    }

    @Test
    void acls() throws Exception {
        assumeAdvertised("ACLs", Map.of(29, "DescribeAcls", 30, "CreateAcls", 31, "DeleteAcls"));
        // The ACL APIs answer SECURITY_DISABLED without an authorizer (as Kafka's): a broker of
        // its own runs Kafka's StandardAuthorizer, this PLAINTEXT client a super user.
        try (BrokerProcess secured = BrokerProcess.start(Map.of(
                "authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users", "User:ANONYMOUS"));
                Admin admin = Kafka.admin(secured)) {
            AclBinding binding = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "java-acl", PatternType.LITERAL),
                    new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
            admin.createAcls(List.of(binding)).all().get(30, TimeUnit.SECONDS);
            var found = admin.describeAcls(AclBindingFilter.ANY).values().get(30, TimeUnit.SECONDS);
            assertTrue(found.contains(binding), "described: " + found);
            var deleted = admin.deleteAcls(List.of(new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, "java-acl", PatternType.LITERAL),
                    AccessControlEntryFilter.ANY))).all().get(30, TimeUnit.SECONDS);
            assertEquals(1, deleted.size());
        }
    }

    @Test
    void scramCredentials() throws Exception {
        assumeAdvertised("SCRAM credentials", Map.of(50, "DescribeUserScramCredentials", 51, "AlterUserScramCredentials"));
        try (Admin admin = Kafka.admin(broker)) {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion("alice",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "alice-secret")))
                    .all().get(30, TimeUnit.SECONDS);
            Map<String, UserScramCredentialsDescription> d = admin.describeUserScramCredentials(List.of("alice"))
                    .all().get(30, TimeUnit.SECONDS);
            assertEquals(List.of(new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)),
                    d.get("alice").credentialInfos());
        }
    }

    @Test
    void clientQuotas() throws Exception {
        assumeAdvertised("client quotas", Map.of(48, "DescribeClientQuotas", 49, "AlterClientQuotas"));
        try (Admin admin = Kafka.admin(broker)) {
            ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, "java-quota"));
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                    List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0)))))
                    .all().get(30, TimeUnit.SECONDS);
            var quotas = admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get(30, TimeUnit.SECONDS);
            assertEquals(Map.of("producer_byte_rate", 1048576.0), quotas.get(entity), "described: " + quotas);
        }
    }

    /**
     * KIP-599 as the AdminClient sees it: under controller_mutation_rate=1 (a burst of 11
     * partitions), CreateTopics v7 creates a first topic of 20 partitions (within the burst
     * when asked for) and refuses the next with THROTTLING_QUOTA_EXCEEDED and its throttle
     * time (retries on quota violation off, as a tool that reports them would set).
     */
    @Test
    void controllerMutationQuota() throws Exception {
        assumeAdvertised("client quotas", Map.of(48, "DescribeClientQuotas", 49, "AlterClientQuotas"));
        var props = Kafka.adminProps(broker);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "java-mutator");
        try (Admin admin = Admin.create(props)) {
            ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, "java-mutator"));
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
                    List.of(new ClientQuotaAlteration.Op("controller_mutation_rate", 1.0)))))
                    .all().get(30, TimeUnit.SECONDS);
            CreateTopicsResult created = admin.createTopics(
                    List.of(new NewTopic("java-mutation-a", 20, (short) 1),
                            new NewTopic("java-mutation-b", 1, (short) 1)),
                    new CreateTopicsOptions().retryOnQuotaViolation(false));
            created.values().get("java-mutation-a").get(30, TimeUnit.SECONDS);
            ExecutionException refused = assertThrows(ExecutionException.class,
                    () -> created.values().get("java-mutation-b").get(30, TimeUnit.SECONDS));
            assertTrue(refused.getCause() instanceof ThrottlingQuotaExceededException, refused.toString());
            int throttle = ((ThrottlingQuotaExceededException) refused.getCause()).throttleTimeMs();
            assertTrue(throttle > 0, "throttle " + throttle);
        }
    }
}
