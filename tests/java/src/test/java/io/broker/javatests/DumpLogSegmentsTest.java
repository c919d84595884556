package io.broker.javatests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Kafka's DumpLogSegments (kafka-dump-log.sh) reads the segment files our broker wrote: the
 * .log (every batch's CRC checked, every record decoded), the offset and time indexes (checked
 * against the log), and the producer-state snapshots. Our on-disk format is Kafka's.
 */
class DumpLogSegmentsTest {
    static BrokerProcess broker;
    static final String TOPIC = "java-dump";
    static final Pattern BATCH = Pattern.compile(
            "(?m)^baseOffset: (\\d+) lastOffset: (\\d+) count: (\\d+) .*producerId: (-?\\d+) .*compresscodec: (\\w+) crc: \\d+ isvalid: (\\w+)$");
    static final Pattern RECORD = Pattern.compile("(?m)^\\| offset: (\\d+) .*payload: (.*)$");
    static int produced;

    @BeforeAll
    static void start() throws Exception {
        broker = BrokerProcess.start();
        try (Admin admin = Kafka.admin(broker)) {
            // 1 MiB segments (Kafka's minimum segment.bytes): the data below rolls a few times
            admin.createTopics(List.of(new NewTopic(TOPIC, 1, (short) 1).configs(Map.of("segment.bytes", "1048576"))))
                    .all().get(30, TimeUnit.SECONDS);
        }
        // idempotent producers (default), one per codec, records with keys and headers
        String[] codecs = {"none", "gzip", "snappy", "lz4", "zstd"};
        java.util.Random random = new java.util.Random(24);
        for (String codec : codecs) {
            try (KafkaProducer<String, String> p = Kafka.producer(broker, Map.of(
                    ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, 5))) {
                for (int i = 0; i < 2000; i++) {
                    RecordHeaders h = new RecordHeaders();
                    h.add("codec", codec.getBytes(StandardCharsets.UTF_8));
                    // random hex (compresses to about half) so the log grows past a few segments
                    StringBuilder value = new StringBuilder(codec + "-" + i + "-");
                    while (value.length() < 500) {
                        value.append(Long.toHexString(random.nextLong()));
                    }
                    p.send(new ProducerRecord<>(TOPIC, 0, "k" + i, value.toString(), h));
                    produced++;
                }
                p.flush();
            }
        }
    }

    @AfterAll
    static void stop() {
        if (broker != null) {
            broker.close();
        }
    }

    static List<Path> files(String suffix) throws Exception {
        try (Stream<Path> s = Files.list(broker.dataDir.resolve(TOPIC + "-0"))) {
            return s.filter(p -> p.getFileName().toString().endsWith(suffix)).sorted().toList();
        }
    }

    static Tool dump(List<Path> files, String... extra) throws Exception {
        List<String> args = new ArrayList<>(List.of(extra));
        args.add("--files");
        args.add(String.join(",", files.stream().map(Path::toString).toList()));
        return Tool.run("org.apache.kafka.tools.DumpLogSegments", args.toArray(new String[0])).ok();
    }

    /** Every batch valid, offsets dense from 0, every record decoded; returns the records seen. */
    static int checkLogDump(Tool t, boolean records) {
        assertFalse(t.stdout.contains("invalid bytes"), "no undecodable bytes: " + t.stdout.lines().filter(l -> l.contains("invalid")).toList());
        assertFalse(t.stderr.contains("Exception"), t.toString());
        Matcher m = BATCH.matcher(t.stdout);
        long next = -1;
        int batches = 0;
        int count = 0;
        java.util.Set<String> codecs = new java.util.TreeSet<>();
        while (m.find()) {
            long base = Long.parseLong(m.group(1));
            long last = Long.parseLong(m.group(2));
            int n = Integer.parseInt(m.group(3));
            assertEquals("true", m.group(6), "batch at " + base + " has a valid CRC");
            assertEquals(last - base + 1, n, "batch at " + base + ": count matches its offsets");
            assertTrue(Long.parseLong(m.group(4)) >= 0, "batch at " + base + " carries the idempotent producer id");
            if (next >= 0) {
                assertEquals(next, base, "batches follow each other without gaps");
            }
            next = last + 1;
            count += n;
            batches++;
            codecs.add(m.group(5));
        }
        assertTrue(batches > 0, "batches printed: " + t);
        if (records) {
            Matcher r = RECORD.matcher(t.stdout);
            int seen = 0;
            while (r.find()) {
                seen++;
            }
            assertEquals(count, seen, "every record decoded (--deep-iteration --print-data-log)");
        }
        return count;
    }

    /**
     * kafka-dump-log.sh on the active segment of a running broker, as operators use it. Our
     * default (preallocate=true, reported as such) reserves space ahead of the active segment's
     * appends, whose zeros Kafka's tool reads as a corrupt record; with preallocate=false, as
     * Kafka's default, the file ends at the last batch and the tool reads it. Runs on its own
     * topic so the other test's clean stop does not trim the file first.
     */
    @Test
    void dumpsTheLiveActiveSegment() throws Exception {
        try (Admin admin = Kafka.admin(broker)) {
            admin.createTopics(List.of(new NewTopic("java-dump-live", 1, (short) 1)
                    .configs(Map.of("preallocate", "false")))).all().get(30, TimeUnit.SECONDS);
            ConfigResource defaults = new ConfigResource(ConfigResource.Type.TOPIC, "java-dump-other");
            admin.createTopics(List.of(new NewTopic("java-dump-other", 1, (short) 1))).all()
                    .get(30, TimeUnit.SECONDS);
            String reported = admin.describeConfigs(List.of(defaults)).all().get(30, TimeUnit.SECONDS)
                    .get(defaults).get("preallocate").value();
            assertEquals("true", reported, "the default DescribeConfigs reports is what the broker does");
        }
        try (KafkaProducer<String, String> p = Kafka.producer(broker, Map.of())) {
            for (int i = 0; i < 100; i++) {
                p.send(new ProducerRecord<>("java-dump-live", 0, "k" + i, "v" + i));
            }
            p.flush();
        }
        assertTrue(broker.alive());
        Path active = broker.dataDir.resolve("java-dump-live-0").resolve("00000000000000000000.log");
        Tool t = dump(List.of(active), "--deep-iteration", "--print-data-log");
        assertFalse(t.stderr.contains("Exception"), t.toString());
        Matcher m = BATCH.matcher(t.stdout);
        int count = 0;
        while (m.find()) {
            assertEquals("true", m.group(6), "valid CRC");
            count += Integer.parseInt(m.group(3));
        }
        assertEquals(100, count, "every record of the active segment: " + t);
    }

    @Test
    void dumpsOurSegmentsIndexesAndSnapshots() throws Exception {
        List<Path> logs = files(".log");
        assertTrue(logs.size() >= 3, "the topic rolled segments: " + logs);

        // live: the rolled (inactive) segments, while the broker runs
        List<Path> rolled = logs.subList(0, logs.size() - 1);
        int liveCount = checkLogDump(dump(rolled, "--deep-iteration", "--print-data-log"), true);
        assertTrue(liveCount > 0);

        // stopped cleanly: every file of the partition
        assertEquals(0, broker.stop(), "clean shutdown");
        logs = files(".log");
        Tool all = dump(logs, "--deep-iteration", "--print-data-log");
        assertEquals(produced, checkLogDump(all, true), "every produced record is in the dump");
        for (String codec : new String[] {"none", "gzip", "snappy", "lz4", "zstd"}) {
            assertTrue(Pattern.compile("compresscodec: " + codec).matcher(all.stdout).find(), "a " + codec + " batch in the dump");
        }
        assertTrue(all.stdout.contains("headerKeys: [codec]"), "record headers decoded");

        List<Path> indexes = files(".index");
        List<Path> timeIndexes = files(".timeindex");
        assertEquals(logs.size(), indexes.size(), "an offset index per segment: " + indexes);
        assertEquals(logs.size(), timeIndexes.size(), "a time index per segment: " + timeIndexes);
        // DumpLogSegments checks each index entry against the segment's log and prints mismatches
        Tool idx = dump(indexes);
        assertTrue(Pattern.compile("(?m)^offset: \\d+ position: \\d+$").matcher(idx.stdout).find(), "offset index entries: " + idx);
        // (its words: "Mismatches in :<file>" / "Index offset: X, log offset: Y")
        assertFalse(idx.stdout.toLowerCase().contains("mismatch"), "offset index agrees with the log: " + idx);
        Tool tidx = dump(timeIndexes);
        assertTrue(Pattern.compile("(?m)^timestamp: \\d+ offset: \\d+$").matcher(tidx.stdout).find(), "time index entries: " + tidx);
        // (its words: "Found timestamp mismatch in :<file>" / "Found out of order timestamp in :<file>")
        assertFalse(tidx.stdout.toLowerCase().contains("mismatch") || tidx.stdout.contains("out of order"),
                "time index agrees with the log: " + tidx);

        List<Path> snapshots = files(".snapshot");
        assertFalse(snapshots.isEmpty(), "producer-state snapshots written");
        Tool snap = dump(snapshots);
        assertTrue(Pattern.compile("producerId: \\d+ producerEpoch: \\d+").matcher(snap.stdout).find(), "producer snapshot decoded: " + snap);
    }
}
