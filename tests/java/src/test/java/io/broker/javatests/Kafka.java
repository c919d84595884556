package io.broker.javatests;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/** Client settings and small helpers shared by the tests. */
public final class Kafka {
    private Kafka() {}

    public static Properties adminProps(BrokerProcess b) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        return p;
    }

    public static Admin admin(BrokerProcess b) {
        return Admin.create(adminProps(b));
    }

    /** A producer with Kafka's defaults (idempotent, acks=all) plus the given settings. */
    public static KafkaProducer<String, String> producer(BrokerProcess b, Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    public static KafkaConsumer<String, String> consumer(BrokerProcess b, Map<String, Object> extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    public static void createTopic(BrokerProcess b, String topic, int partitions) throws Exception {
        try (Admin admin = admin(b)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all()
                    .get(30, TimeUnit.SECONDS);
        }
    }

    /** Polls until {@code count} records arrived (or fails after {@code timeout}). */
    public static List<ConsumerRecord<String, String>> pollUntil(
            KafkaConsumer<String, String> consumer, int count, Duration timeout) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (out.size() < count && System.nanoTime() < deadline) {
            consumer.poll(Duration.ofMillis(200)).forEach(out::add);
        }
        if (out.size() < count) {
            throw new AssertionError("consumed " + out.size() + " of " + count + " records within " + timeout);
        }
        return out;
    }

    /**
     * The broker's ApiVersions answer (request v0, sent raw so no client's own filtering is in
     * the way): api key -> [min, max].
     */
    public static Map<Integer, int[]> apiVersions(BrokerProcess b) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", b.port), 5_000);
            s.setSoTimeout(10_000);
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            byte[] clientId = "java-tests".getBytes(StandardCharsets.UTF_8);
            out.writeInt(2 + 2 + 4 + 2 + clientId.length);
            out.writeShort(18); // ApiVersions
            out.writeShort(0);
            out.writeInt(7); // correlation id
            out.writeShort(clientId.length);
            out.write(clientId);
            out.flush();
            DataInputStream in = new DataInputStream(s.getInputStream());
            int size = in.readInt();
            if (size < 10) {
                throw new IOException("short ApiVersions response: " + size + " bytes");
            }
            int correlation = in.readInt();
            if (correlation != 7) {
                throw new IOException("ApiVersions correlation id " + correlation + ", sent 7");
            }
            short error = in.readShort();
            if (error != 0) {
                throw new IOException("ApiVersions error code " + error);
            }
            int n = in.readInt();
            Map<Integer, int[]> apis = new TreeMap<>();
            for (int i = 0; i < n; i++) {
                int key = in.readShort();
                int min = in.readShort();
                int max = in.readShort();
                apis.put(key, new int[] {min, max});
            }
            return apis;
        }
    }

    public static boolean advertisesAll(BrokerProcess b, Collection<Integer> keys) throws IOException {
        return apiVersions(b).keySet().containsAll(keys);
    }
}
