package io.broker.javatests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** KafkaProducer (defaults: idempotent, acks=all; and each codec) to KafkaConsumer. */
class ProducerConsumerTest {
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

    private static void roundTrip(String topic, Map<String, Object> producerSettings) throws Exception {
        Kafka.createTopic(broker, topic, 3);
        int n = 300;
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        try (KafkaProducer<String, String> producer = Kafka.producer(broker, producerSettings)) {
            for (int i = 0; i < n; i++) {
                // compressible values, so a codec has something to do
                acks.add(producer.send(new ProducerRecord<>(topic, "key-" + i, "value-" + i + "-" + "x".repeat(100))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : acks) {
                RecordMetadata md = f.get(30, TimeUnit.SECONDS);
                assertTrue(md.hasOffset() && md.offset() >= 0, "acknowledged with an offset: " + md);
            }
        }
        try (KafkaConsumer<String, String> consumer = Kafka.consumer(broker, Map.of())) {
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1),
                    new TopicPartition(topic, 2));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            List<ConsumerRecord<String, String>> records = Kafka.pollUntil(consumer, n, Duration.ofSeconds(30));
            assertEquals(n, records.size(), "every record exactly once");
            java.util.Set<String> keys = new java.util.HashSet<>();
            for (ConsumerRecord<String, String> r : records) {
                int i = Integer.parseInt(r.key().substring(4));
                assertEquals("value-" + i + "-" + "x".repeat(100), r.value());
                keys.add(r.key());
            }
            assertEquals(n, keys.size(), "no duplicates");
            // per partition, offsets are 0..count-1 in order (idempotent producer: no gaps, no dups)
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            long total = 0;
            for (TopicPartition tp : tps) {
                long expect = 0;
                for (ConsumerRecord<String, String> r : records) {
                    if (r.partition() == tp.partition()) {
                        assertEquals(expect++, r.offset(), "offsets of " + tp + " are dense and ordered");
                    }
                }
                assertEquals(expect, end.get(tp), "end offset of " + tp);
                total += expect;
            }
            assertEquals(n, total);
        }
    }

    @Test
    void defaultProducerIsIdempotentAcksAll() throws Exception {
        // Kafka 3.0+ defaults: enable.idempotence=true, acks=all; set nothing.
        roundTrip("java-default", Map.of());
    }

    @ParameterizedTest(name = "compression.type={0}")
    @ValueSource(strings = {"gzip", "snappy", "lz4", "zstd"})
    void codecRoundTrip(String codec) throws Exception {
        roundTrip("java-codec-" + codec, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                ProducerConfig.LINGER_MS_CONFIG, 20));
    }
}
