package io.broker.javatests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Kafka's own command-line tools (their main classes, as the .sh scripts run them) against our broker. */
class ToolsTest {
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

    static void produce(String topic, int partitions, int perPartition) throws Exception {
        try (KafkaProducer<String, String> p = Kafka.producer(broker, Map.of())) {
            for (int part = 0; part < partitions; part++) {
                for (int i = 0; i < perPartition; i++) {
                    p.send(new ProducerRecord<>(topic, part, "k" + i, "v" + i));
                }
            }
            p.flush();
        }
    }

    static void assertContains(Tool t, String needle) {
        assertTrue(t.stdout.contains(needle), "expected \"" + needle + "\" in the output of " + t);
    }

    @Test
    void kafkaTopics() throws Exception {
        String cls = "org.apache.kafka.tools.TopicCommand";
        Tool create = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--create", "--topic", "java-tool-topics",
                "--partitions", "3", "--replication-factor", "1", "--config", "retention.ms=86400000").ok();
        assertContains(create, "Created topic java-tool-topics.");

        Tool list = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--list").ok();
        assertTrue(Arrays.asList(list.stdout.split("\n")).contains("java-tool-topics"), "listed: " + list);

        Tool describe = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--describe", "--topic", "java-tool-topics").ok();
        assertTrue(Pattern.compile("Topic: java-tool-topics\\s+TopicId: \\S+\\s+PartitionCount: 3\\s+ReplicationFactor: 1\\s+Configs: .*retention.ms=86400000")
                .matcher(describe.stdout).find(), "topic line: " + describe);
        for (int p = 0; p < 3; p++) {
            assertTrue(Pattern.compile("Topic: java-tool-topics\\s+Partition: " + p + "\\s+Leader: (\\d+)\\s+Replicas: \\1\\s+Isr: \\1")
                    .matcher(describe.stdout).find(), "partition " + p + " line: " + describe);
        }

        // creating it again fails, as with Kafka
        Tool again = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--create", "--topic", "java-tool-topics",
                "--partitions", "1", "--replication-factor", "1");
        assertEquals(1, again.exitCode, "second create: " + again);
        assertTrue((again.stdout + again.stderr).contains("already exists"), "second create: " + again);

        Tool alter = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--alter", "--topic", "java-tool-topics",
                "--partitions", "5").ok();
        Tool described = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--describe", "--topic", "java-tool-topics").ok();
        assertContains(described, "PartitionCount: 5");

        Tool delete = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--delete", "--topic", "java-tool-topics").ok();
        assertTrue(alter.exitCode == 0 && delete.exitCode == 0);
    }

    @Test
    void kafkaConfigsForATopic() throws Exception {
        Kafka.createTopic(broker, "java-tool-configs", 1);
        String cls = "org.apache.kafka.tools.ConfigCommand";
        Tool alter = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
                "--entity-name", "java-tool-configs", "--alter", "--add-config", "retention.ms=12345,max.message.bytes=65536").ok();
        assertContains(alter, "Completed updating config for topic java-tool-configs.");

        Tool describe = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
                "--entity-name", "java-tool-configs", "--describe").ok();
        assertContains(describe, "Dynamic configs for topic java-tool-configs are:");
        assertContains(describe, "retention.ms=12345 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=12345");
        assertContains(describe, "max.message.bytes=65536 sensitive=false");

        Tool remove = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
                "--entity-name", "java-tool-configs", "--alter", "--delete-config", "retention.ms").ok();
        assertContains(remove, "Completed updating config for topic java-tool-configs.");
        Tool after = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
                "--entity-name", "java-tool-configs", "--describe").ok();
        assertTrue(!after.stdout.contains("retention.ms=12345"), "retention.ms removed: " + after);
        assertContains(after, "max.message.bytes=65536");

        Tool bad = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
                "--entity-name", "java-tool-configs", "--alter", "--add-config", "cleanup.policy=bogus");
        assertTrue(bad.exitCode != 0, "an invalid value is refused: " + bad);
    }

    @Test
    void kafkaConsumerGroupsDescribeAndResetOffsets() throws Exception {
        try (Admin admin = Kafka.admin(broker)) {
            admin.createTopics(List.of(new NewTopic("java-tool-groups", 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            produce("java-tool-groups", 2, 10);
            admin.alterConsumerGroupOffsets("java-tool-group", Map.of(
                    new TopicPartition("java-tool-groups", 0), new OffsetAndMetadata(4),
                    new TopicPartition("java-tool-groups", 1), new OffsetAndMetadata(7))).all().get(30, TimeUnit.SECONDS);

            String cls = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
            Tool list = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--list").ok();
            assertTrue(Arrays.asList(list.stdout.split("\n")).contains("java-tool-group"), "listed: " + list);

            Tool describe = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--describe", "--group", "java-tool-group").ok();
            // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
            assertTrue(Pattern.compile("java-tool-group\\s+java-tool-groups\\s+0\\s+4\\s+10\\s+6\\s").matcher(describe.stdout).find(),
                    "partition 0 row: " + describe);
            assertTrue(Pattern.compile("java-tool-group\\s+java-tool-groups\\s+1\\s+7\\s+10\\s+3\\s").matcher(describe.stdout).find(),
                    "partition 1 row: " + describe);

            Tool dryRun = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", "java-tool-group",
                    "--topic", "java-tool-groups", "--to-earliest", "--dry-run").ok();
            assertTrue(Pattern.compile("java-tool-group\\s+java-tool-groups\\s+0\\s+0").matcher(dryRun.stdout).find(), "dry run: " + dryRun);
            assertEquals(4, admin.listConsumerGroupOffsets("java-tool-group").partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS).get(new TopicPartition("java-tool-groups", 0)).offset(), "a dry run changes nothing");

            Tool reset = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", "java-tool-group",
                    "--topic", "java-tool-groups", "--to-earliest", "--execute").ok();
            assertTrue(Pattern.compile("java-tool-group\\s+java-tool-groups\\s+1\\s+0").matcher(reset.stdout).find(), "reset: " + reset);
            Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets("java-tool-group")
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            assertEquals(0, offs.get(new TopicPartition("java-tool-groups", 0)).offset());
            assertEquals(0, offs.get(new TopicPartition("java-tool-groups", 1)).offset());
        }
    }

    @Test
    void getOffsetShell() throws Exception {
        Kafka.createTopic(broker, "java-tool-offsets", 2);
        produce("java-tool-offsets", 2, 5);
        String cls = "org.apache.kafka.tools.GetOffsetShell";
        Tool latest = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--topic", "java-tool-offsets").ok();
        assertEquals(List.of("java-tool-offsets:0:5", "java-tool-offsets:1:5"), Arrays.asList(latest.stdout.strip().split("\n")), latest.toString());
        Tool earliest = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--topic", "java-tool-offsets", "--time", "-2").ok();
        assertEquals(List.of("java-tool-offsets:0:0", "java-tool-offsets:1:0"), Arrays.asList(earliest.stdout.strip().split("\n")), earliest.toString());
    }

    @Test
    void metadataQuorumDescribeStatus() throws Exception {
        Tool t = Tool.run("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", broker.bootstrap,
                "describe", "--status").ok();
        Matcher leader = Pattern.compile("LeaderId:\\s+(\\d+)").matcher(t.stdout);
        assertTrue(leader.find(), "LeaderId: " + t);
        assertContains(t, "ClusterId:");
        assertContains(t, "HighWatermark:");
        assertTrue(Pattern.compile("CurrentVoters:\\s+\\[\\{\"id\": " + leader.group(1)).matcher(t.stdout).find(),
                "the leader is the one voter: " + t);
        Tool r = Tool.run("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", broker.bootstrap,
                "describe", "--replication").ok();
        assertTrue(Pattern.compile("(?m)^" + leader.group(1) + "\\s+\\S+\\s+\\d+\\s+\\d+\\s+.*Leader").matcher(r.stdout).find(),
                "replication row of the leader: " + r);
    }

    @Test
    void producerAndConsumerPerformance() throws Exception {
        Kafka.createTopic(broker, "java-tool-perf", 2);
        Tool prod = Tool.run("org.apache.kafka.tools.ProducerPerformance", "--topic", "java-tool-perf",
                "--num-records", "20000", "--record-size", "100", "--throughput", "-1",
                "--producer-props", "bootstrap.servers=" + broker.bootstrap, "acks=all").ok();
        assertTrue(Pattern.compile("(?m)^20000 records sent, [\\d.]+ records/sec").matcher(prod.stdout).find(), "summary: " + prod);

        Tool cons = Tool.run("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", broker.bootstrap,
                "--topic", "java-tool-perf", "--num-records", "20000", "--timeout", "30000").ok();
        // start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
        String[] lines = cons.stdout.strip().split("\n");
        assertTrue(lines[0].startsWith("start.time, end.time, data.consumed.in.MB"), "header: " + cons);
        String[] cols = lines[lines.length - 1].split(",\\s*");
        assertEquals("20000", cols[4], "records consumed: " + cons);
    }

    @Test
    void verifiableProducerAndConsumer() throws Exception {
        // the tools Kafka's own system tests drive (JSON events, one a line)
        Kafka.createTopic(broker, "java-tool-verifiable", 2);
        Tool prod = Tool.run("org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", broker.bootstrap,
                "--topic", "java-tool-verifiable", "--max-messages", "500", "--acks", "-1").ok();
        assertTrue(Pattern.compile("\\{\"timestamp\":\\d+,\"name\":\"tool_data\",\"sent\":500,\"acked\":500,")
                .matcher(prod.stdout).find(), "500 sent and acked: " + prod.stdout.lines().filter(l -> !l.contains("producer_send_success")).toList());
        assertTrue(!prod.stdout.contains("producer_send_error"), "no send errors: " + prod);

        Tool cons = Tool.run("org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", broker.bootstrap,
                "--topic", "java-tool-verifiable", "--group-id", "java-tool-verifiable", "--max-messages", "500").ok();
        Matcher consumed = Pattern.compile("\"name\":\"records_consumed\",\"count\":(\\d+)").matcher(cons.stdout);
        int total = 0;
        while (consumed.find()) {
            total += Integer.parseInt(consumed.group(1));
        }
        assertEquals(500, total, "records consumed: " + cons);
        assertTrue(cons.stdout.contains("\"name\":\"offsets_committed\"") && !cons.stdout.contains("\"success\":false"),
                "offsets committed: " + cons);
        try (Admin admin = Kafka.admin(broker)) {
            long committed = admin.listConsumerGroupOffsets("java-tool-verifiable").partitionsToOffsetAndMetadata()
                    .get(30, TimeUnit.SECONDS).values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            assertEquals(500, committed, "the group's committed offsets");
        }
    }

    @Test
    void logDirs() throws Exception {
        assumeTrue(Kafka.apiVersions(broker).containsKey(35),
                "LogDirsCommand needs DescribeLogDirs (35), which the broker does not advertise in ApiVersions yet");
        Kafka.createTopic(broker, "java-tool-logdirs", 1);
        Tool t = Tool.run("org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", broker.bootstrap,
                "--describe", "--topic-list", "java-tool-logdirs").ok();
        assertContains(t, "\"partition\":\"java-tool-logdirs-0\"");
    }

    @Test
    void kafkaLeaderElection() throws Exception {
        // One node: its replica leads every partition already, so a preferred election has
        // nothing to do (ELECTION_NOT_NEEDED), and an unknown partition is an error.
        Kafka.createTopic(broker, "java-tool-election", 2);
        String cls = "org.apache.kafka.tools.LeaderElectionCommand";
        Tool named = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--election-type", "preferred",
                "--topic", "java-tool-election", "--partition", "1").ok();
        assertContains(named, "Valid replica already elected for partitions java-tool-election-1");
        Tool all = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--election-type", "preferred",
                "--all-topic-partitions").ok();
        assertTrue(!all.stdout.contains("Error"), "every partition: " + all);
        Tool unknown = Tool.run(cls, "--bootstrap-server", broker.bootstrap, "--election-type", "unclean",
                "--topic", "java-tool-election", "--partition", "7");
        assertTrue(unknown.exitCode != 0 && (unknown.stdout + unknown.stderr).contains("UnknownTopicOrPartition"),
                "an unknown partition: " + unknown);
    }
}
