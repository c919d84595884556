package io.broker.javatests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** AdminClient against our broker: every admin API it serves. */
class AdminTest {
    static BrokerProcess broker;
    static Admin admin;

    @BeforeAll
    static void start() throws Exception {
        broker = BrokerProcess.start();
        admin = Kafka.admin(broker);
    }

    @AfterAll
    static void stop() {
        if (admin != null) {
            admin.close(Duration.ofSeconds(10));
        }
        if (broker != null) {
            broker.close();
        }
    }

    static <T> T get(org.apache.kafka.common.KafkaFuture<T> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    static void produce(String topic, int partition, int n) throws Exception {
        try (KafkaProducer<String, String> p = Kafka.producer(broker, Map.of())) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, partition, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void createListDescribeDeleteTopics() throws Exception {
        get(admin.createTopics(List.of(new NewTopic("java-admin-a", 3, (short) 1),
                new NewTopic("java-admin-b", 1, (short) 1).configs(Map.of("cleanup.policy", "compact")))).all());
        ExecutionException dup = assertThrows(ExecutionException.class,
                () -> get(admin.createTopics(List.of(new NewTopic("java-admin-a", 1, (short) 1))).all()));
        assertInstanceOf(TopicExistsException.class, dup.getCause());

        Set<String> names = get(admin.listTopics().names());
        assertTrue(names.containsAll(Set.of("java-admin-a", "java-admin-b")), "listed: " + names);
        assertFalse(names.stream().anyMatch(n -> n.startsWith("__")), "internal topics hidden by default: " + names);

        Map<String, TopicDescription> d = get(admin.describeTopics(List.of("java-admin-a", "java-admin-b")).allTopicNames());
        TopicDescription a = d.get("java-admin-a");
        assertEquals(3, a.partitions().size());
        assertFalse(a.isInternal());
        assertNotNull(a.topicId());
        for (var p : a.partitions()) {
            assertNotNull(p.leader(), "partition " + p.partition() + " has a leader");
            assertEquals(1, p.replicas().size());
            assertEquals(p.replicas(), p.isr());
        }
        assertEquals(1, d.get("java-admin-b").partitions().size());

        get(admin.deleteTopics(List.of("java-admin-a", "java-admin-b")).all());
        long deadline = System.currentTimeMillis() + 30_000;
        while (get(admin.listTopics().names()).contains("java-admin-a") && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        assertFalse(get(admin.listTopics().names()).contains("java-admin-a"), "deleted topic still listed");
        ExecutionException gone = assertThrows(ExecutionException.class,
                () -> get(admin.describeTopics(List.of("java-admin-a")).allTopicNames()));
        assertInstanceOf(UnknownTopicOrPartitionException.class, gone.getCause());
    }

    @Test
    void describeAndIncrementallyAlterTopicConfigs() throws Exception {
        get(admin.createTopics(List.of(new NewTopic("java-admin-cfg", 1, (short) 1)
                .configs(Map.of("retention.ms", "3600000")))).all());
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, "java-admin-cfg");
        Config cfg = get(admin.describeConfigs(List.of(res)).all()).get(res);
        ConfigEntry retention = cfg.get("retention.ms");
        assertNotNull(retention, "retention.ms described");
        assertEquals("3600000", retention.value());
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source());
        assertNotNull(cfg.get("cleanup.policy"), "defaults described too");
        assertEquals("delete", cfg.get("cleanup.policy").value());

        get(admin.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "2097152"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all());
        Config after = get(admin.describeConfigs(List.of(res)).all()).get(res);
        assertEquals("2097152", after.get("max.message.bytes").value());
        assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, after.get("max.message.bytes").source());
        assertTrue(after.get("retention.ms").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "retention.ms back to its default: " + after.get("retention.ms"));

        // an invalid value is refused and changes nothing
        assertThrows(ExecutionException.class, () -> get(admin.incrementalAlterConfigs(Map.of(res, List.of(
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "bogus"), AlterConfigOp.OpType.SET)))).all()));
        assertEquals("delete", get(admin.describeConfigs(List.of(res)).all()).get(res).get("cleanup.policy").value());

        // the broker's own configs
        Collection<Node> nodes = get(admin.describeCluster().nodes());
        ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(nodes.iterator().next().id()));
        Config brokerCfg = get(admin.describeConfigs(List.of(brokerRes)).all()).get(brokerRes);
        assertFalse(brokerCfg.entries().isEmpty(), "broker configs described");
    }

    @Test
    void createPartitions() throws Exception {
        get(admin.createTopics(List.of(new NewTopic("java-admin-parts", 1, (short) 1))).all());
        get(admin.createPartitions(Map.of("java-admin-parts", NewPartitions.increaseTo(4))).all());
        TopicDescription d = get(admin.describeTopics(List.of("java-admin-parts")).allTopicNames()).get("java-admin-parts");
        assertEquals(4, d.partitions().size());
        // fewer than now is refused
        assertThrows(ExecutionException.class,
                () -> get(admin.createPartitions(Map.of("java-admin-parts", NewPartitions.increaseTo(2))).all()));
        produce("java-admin-parts", 3, 1); // the new partition takes writes
    }

    @Test
    void deleteRecordsMovesLogStartOffset() throws Exception {
        get(admin.createTopics(List.of(new NewTopic("java-admin-del", 1, (short) 1))).all());
        produce("java-admin-del", 0, 10);
        TopicPartition tp = new TopicPartition("java-admin-del", 0);
        var lw = get(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(6))).lowWatermarks().get(tp));
        assertEquals(6, lw.lowWatermark());
        ListOffsetsResult.ListOffsetsResultInfo earliest = get(admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp));
        assertEquals(6, earliest.offset());
        ListOffsetsResult.ListOffsetsResultInfo latest = get(admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp));
        assertEquals(10, latest.offset());
        try (KafkaConsumer<String, String> c = Kafka.consumer(broker, Map.of())) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            var recs = Kafka.pollUntil(c, 4, Duration.ofSeconds(20));
            assertEquals(6, recs.get(0).offset(), "the first record left is at the new log start");
        }
    }

    @Test
    void listAndAlterConsumerGroupOffsets() throws Exception {
        get(admin.createTopics(List.of(new NewTopic("java-admin-offs", 2, (short) 1))).all());
        produce("java-admin-offs", 0, 5);
        produce("java-admin-offs", 1, 5);
        TopicPartition p0 = new TopicPartition("java-admin-offs", 0);
        TopicPartition p1 = new TopicPartition("java-admin-offs", 1);
        get(admin.alterConsumerGroupOffsets("java-admin-group", Map.of(
                p0, new OffsetAndMetadata(3, "from-admin"), p1, new OffsetAndMetadata(5))).all());
        Map<TopicPartition, OffsetAndMetadata> offs = get(admin.listConsumerGroupOffsets("java-admin-group").partitionsToOffsetAndMetadata());
        assertEquals(3, offs.get(p0).offset());
        assertEquals("from-admin", offs.get(p0).metadata());
        assertEquals(5, offs.get(p1).offset());
        var groups = get(admin.listGroups().all());
        assertTrue(groups.stream().anyMatch(g -> g.groupId().equals("java-admin-group")), "listed groups: " + groups);
        // a consumer of the group starts at the committed offsets
        try (KafkaConsumer<String, String> c = Kafka.consumer(broker, Map.of(ConsumerConfig.GROUP_ID_CONFIG, "java-admin-group",
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false))) {
            c.assign(List.of(p0, p1));
            var recs = Kafka.pollUntil(c, 2, Duration.ofSeconds(20));
            assertEquals(2, recs.size());
            assertTrue(recs.stream().allMatch(r -> r.partition() == 0 && r.offset() >= 3), "from offset 3 of p0: " + recs);
        }
        get(admin.deleteConsumerGroupOffsets("java-admin-group", Set.of(p1)).all());
        offs = get(admin.listConsumerGroupOffsets("java-admin-group").partitionsToOffsetAndMetadata());
        assertFalse(offs.containsKey(p1), "p1's offset deleted: " + offs);
        get(admin.deleteConsumerGroups(List.of("java-admin-group")).all());
    }

    @Test
    void describeProducers() throws Exception {
        get(admin.createTopics(List.of(new NewTopic("java-admin-prod", 1, (short) 1))).all());
        produce("java-admin-prod", 0, 3); // one idempotent producer, three records
        TopicPartition tp = new TopicPartition("java-admin-prod", 0);
        var states = get(admin.describeProducers(List.of(tp)).partitionResult(tp)).activeProducers();
        assertEquals(1, states.size(), "one active producer: " + states);
        var s = states.get(0);
        assertTrue(s.producerId() >= 0, "a producer id: " + s);
        assertEquals(2, s.lastSequence(), "sequence of the third record: " + s);
        assertFalse(s.currentTransactionStartOffset().isPresent(), "no open transaction: " + s);
    }

    @Test
    void describeCluster() throws Exception {
        DescribeClusterResult r = admin.describeCluster();
        Collection<Node> nodes = get(r.nodes());
        assertEquals(1, nodes.size(), "one broker: " + nodes);
        Node n = nodes.iterator().next();
        assertEquals("127.0.0.1", n.host());
        assertEquals(broker.port, n.port());
        assertNotNull(get(r.clusterId()), "a cluster id");
        assertNotNull(get(r.controller()), "a controller");
    }

    @Test
    void describeMetadataQuorumIsASingleNodeQuorum() throws Exception {
        QuorumInfo q = get(admin.describeMetadataQuorum().quorumInfo());
        assertTrue(q.leaderId() >= 0, "a leader: " + q);
        assertEquals(1, q.voters().size(), "one voter: " + q);
        assertEquals(q.leaderId(), q.voters().get(0).replicaId());
        assertTrue(q.highWatermark() >= 0, "a high watermark: " + q);
        assertTrue(q.voters().get(0).logEndOffset() >= q.highWatermark() - 1, "voter's end offset: " + q);
    }
}
