package io.broker.javatests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Two KafkaConsumers of one group share a topic's partitions: the classic protocol with the
 * eager RangeAssignor and the cooperative-sticky assignor, and the KIP-848 consumer protocol.
 */
class ConsumerGroupTest {
    static BrokerProcess broker;
    static final int PARTITIONS = 4;

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

    /** One member: its own thread polls (KafkaConsumer is single-threaded) and records. */
    static final class Member implements AutoCloseable {
        final String name;
        final Map<String, Object> settings;
        final String topic;
        volatile Set<TopicPartition> assignment = Set.of();
        final List<Set<TopicPartition>> revocations = new CopyOnWriteArrayList<>();
        final Map<String, Integer> consumed = new ConcurrentHashMap<>();
        final Set<Integer> partitionsSeen = ConcurrentHashMap.newKeySet();
        volatile Throwable failure;
        volatile boolean running = true;
        final Thread thread;

        Member(String name, String topic, Map<String, Object> settings) {
            this.name = name;
            this.topic = topic;
            this.settings = settings;
            this.thread = new Thread(this::run, name);
            thread.start();
        }

        private void run() {
            KafkaConsumer<String, String> c = Kafka.consumer(broker, settings);
            try {
                c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        if (!partitions.isEmpty()) {
                            revocations.add(new HashSet<>(partitions));
                        }
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
                });
                while (running) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                        consumed.merge(r.key(), 1, Integer::sum);
                        partitionsSeen.add(r.partition());
                    }
                    assignment = Set.copyOf(c.assignment());
                }
                c.commitSync(Duration.ofSeconds(15));
            } catch (Throwable t) {
                failure = t;
            } finally {
                c.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(15)));
            }
        }

        @Override
        public void close() throws InterruptedException {
            running = false;
            thread.join(45_000);
        }
    }

    static void await(String what, Duration timeout, BooleanSupplier cond, Member... members) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            for (Member m : members) {
                if (m.failure != null) {
                    throw new AssertionError(m.name + " failed while waiting for " + what, m.failure);
                }
            }
            if (System.nanoTime() > deadline) {
                StringBuilder sb = new StringBuilder("timed out after " + timeout + " waiting for " + what);
                for (Member m : members) {
                    sb.append("; ").append(m.name).append(" has ").append(m.assignment);
                }
                throw new AssertionError(sb.toString());
            }
            Thread.sleep(50);
        }
    }

    private static void twoMembersShare(String topic, String group, Map<String, Object> protocol, boolean cooperative)
            throws Exception {
        Kafka.createTopic(broker, topic, PARTITIONS);
        Map<String, Object> settings = new HashMap<>(protocol);
        settings.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        settings.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, 200);
        Set<TopicPartition> all = new HashSet<>();
        for (int p = 0; p < PARTITIONS; p++) {
            all.add(new TopicPartition(topic, p));
        }
        try (Member a = new Member("member-a", topic, settings)) {
            await("member-a to own every partition", Duration.ofSeconds(30), () -> a.assignment.equals(all), a);
            try (Member b = new Member("member-b", topic, settings)) {
                await("the two members to split the partitions", Duration.ofSeconds(45), () -> {
                    Set<TopicPartition> sa = a.assignment;
                    Set<TopicPartition> sb = b.assignment;
                    Set<TopicPartition> union = new HashSet<>(sa);
                    union.addAll(sb);
                    return !sa.isEmpty() && !sb.isEmpty() && sa.size() + sb.size() == PARTITIONS && union.equals(all);
                }, a, b);
                int n = 200;
                try (KafkaProducer<String, String> producer = Kafka.producer(broker, Map.of())) {
                    for (int i = 0; i < n; i++) {
                        producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
                    }
                    producer.flush();
                }
                await("every record consumed by one of the members", Duration.ofSeconds(30), () -> {
                    Set<String> keys = new HashSet<>(a.consumed.keySet());
                    keys.addAll(b.consumed.keySet());
                    return keys.size() == n;
                }, a, b);
                assertFalse(a.consumed.isEmpty(), "member-a consumed records of its partitions");
                assertFalse(b.consumed.isEmpty(), "member-b consumed records of its partitions");
                Set<Integer> aParts = new HashSet<>();
                a.assignment.forEach(tp -> aParts.add(tp.partition()));
                Set<Integer> bParts = new HashSet<>();
                b.assignment.forEach(tp -> bParts.add(tp.partition()));
                assertTrue(aParts.containsAll(a.partitionsSeen), "member-a read only its partitions " + aParts + ": " + a.partitionsSeen);
                assertTrue(bParts.containsAll(b.partitionsSeen), "member-b read only its partitions " + bParts + ": " + b.partitionsSeen);
                if (cooperative) {
                    // incremental rebalancing: when b joined, a gave up only what moved to b
                    for (Set<TopicPartition> revoked : a.revocations) {
                        assertTrue(revoked.size() < PARTITIONS, "cooperative: member-a never revokes everything, revoked " + revoked);
                    }
                } else {
                    assertTrue(a.revocations.stream().anyMatch(r -> r.equals(all)),
                            "eager: member-a revoked all its partitions on the rebalance: " + a.revocations);
                }
            }
            assertEquals(null, a.failure, "member-a failed");
        }
        // the group's committed offsets cover what was consumed
        try (Admin admin = Kafka.admin(broker)) {
            Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
            long sum = committed.values().stream().mapToLong(OffsetAndMetadata::offset).sum();
            assertEquals(200, sum, "committed offsets of " + group + ": " + committed);
        }
    }

    @Test
    void classicEagerRange() throws Exception {
        twoMembersShare("java-grp-eager", "java-eager", Map.of(
                ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic",
                ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500,
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, RangeAssignor.class.getName()), false);
    }

    @Test
    void classicCooperativeSticky() throws Exception {
        twoMembersShare("java-grp-coop", "java-coop", Map.of(
                ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic",
                ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500,
                ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName()), true);
    }

    @Test
    void consumerProtocolKip848() throws Exception {
        twoMembersShare("java-grp-848", "java-848", Map.of(
                ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer"), true);
    }
}
