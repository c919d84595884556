package io.broker.javatests;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * One broker process of ours for a test class: a free port on 127.0.0.1, a temporary data
 * directory, the binary named by the environment variable BROKER_BIN (default: the release
 * binary of this checkout, ../../target/release/broker from tests/java), started with
 * {@code start --override listeners=... --override log.dirs=...} and stopped with SIGTERM
 * (SIGKILL after 30 s). Its stdout and stderr go to broker.log in the temporary directory; the
 * tail of that file is in every start-up failure, and {@link #close()} copies it to the folder
 * named by the system property brokerLogDir (surefire: target/broker-logs) as
 * broker-&lt;port&gt;.log, then deletes the directory (-DkeepBrokerData=true keeps it).
 */
public final class BrokerProcess implements AutoCloseable {
    private static final long START_TIMEOUT_MS = 60_000;

    public final int port;
    public final String bootstrap;
    public final Path workDir;
    public final Path dataDir;
    public final Path logFile;
    private Process process;

    private BrokerProcess(Map<String, String> overrides) throws IOException {
        this.port = freePort();
        this.bootstrap = "127.0.0.1:" + port;
        this.workDir = Files.createTempDirectory("java-tests-broker-");
        this.dataDir = workDir.resolve("data");
        Files.createDirectories(dataDir);
        this.logFile = workDir.resolve("broker.log");
        Map<String, String> settings = new LinkedHashMap<>();
        settings.put("listeners", "PLAINTEXT://" + bootstrap);
        settings.put("log.dirs", dataDir.toString());
        settings.putAll(overrides);
        List<String> argv = new ArrayList<>();
        argv.add(binary().toString());
        argv.add("start");
        settings.forEach((k, v) -> {
            argv.add("--override");
            argv.add(k + "=" + v);
        });
        ProcessBuilder pb = new ProcessBuilder(argv)
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(logFile.toFile()))
                .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
        pb.environment().put("NO_COLOR", "1");
        pb.environment().putIfAbsent("RUST_BACKTRACE", "1");
        process = pb.start();
        waitReady();
    }

    /** Starts a broker with the default settings. */
    public static BrokerProcess start() throws IOException {
        return start(Map.of());
    }

    /** Starts a broker with extra {@code --override key=value} settings. */
    public static BrokerProcess start(Map<String, String> overrides) throws IOException {
        return new BrokerProcess(overrides);
    }

    public static Path binary() {
        String env = System.getenv("BROKER_BIN");
        Path bin = env != null && !env.isBlank()
                ? Paths.get(env)
                : Paths.get("..", "..", "target", "release", "broker");
        bin = bin.toAbsolutePath().normalize();
        if (!Files.isExecutable(bin)) {
            throw new IllegalStateException("broker binary not found or not executable: " + bin
                    + " (build it with `cargo build --release -p broker` or set BROKER_BIN)");
        }
        return bin;
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(true);
            s.bind(new InetSocketAddress("127.0.0.1", 0));
            return s.getLocalPort();
        }
    }

    private void waitReady() throws IOException {
        long deadline = System.currentTimeMillis() + START_TIMEOUT_MS;
        while (System.currentTimeMillis() < deadline) {
            if (!process.isAlive()) {
                throw new IllegalStateException("broker exited with " + process.exitValue()
                        + " during start-up; log tail:\n" + logTail());
            }
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", port), 500);
                return;
            } catch (IOException notYet) {
                try {
                    Thread.sleep(50);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException(e);
                }
            }
        }
        close();
        throw new IllegalStateException("broker did not accept connections on " + bootstrap
                + " within " + START_TIMEOUT_MS + " ms; log tail:\n" + logTail());
    }

    public boolean alive() {
        return process != null && process.isAlive();
    }

    /** The last lines of the broker's output (for failure messages). */
    public String logTail() {
        try {
            List<String> lines = Files.readAllLines(logFile, StandardCharsets.UTF_8);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    /** SIGTERM, then SIGKILL after 30 s; returns the exit code. */
    public int stop() {
        if (process == null) {
            return 0;
        }
        process.destroy();
        try {
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        }
        return process.isAlive() ? -1 : process.exitValue();
    }

    @Override
    public void close() {
        stop();
        String logDir = System.getProperty("brokerLogDir");
        if (logDir != null && !logDir.isBlank()) {
            try {
                Path dir = Files.createDirectories(Paths.get(logDir));
                Files.copy(logFile, dir.resolve("broker-" + port + ".log"),
                        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            } catch (IOException e) {
                System.err.println("could not keep the broker log " + logFile + ": " + e);
            }
        }
        if (!Boolean.getBoolean("keepBrokerData")) {
            try (Stream<Path> walk = Files.walk(workDir)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}
