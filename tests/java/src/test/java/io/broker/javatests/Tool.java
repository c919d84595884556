package io.broker.javatests;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs one of Kafka's command-line tools as operators do (kafka-topics.sh and friends are
 * `java -cp <Kafka's jars> <main class> ...`): a child JVM on this test run's class path
 * (surefire passes it whole: useManifestOnlyJar=false), its stdout and stderr captured.
 */
public final class Tool {
    public final int exitCode;
    public final String stdout;
    public final String stderr;
    public final List<String> argv;

    private Tool(List<String> argv, int exitCode, String stdout, String stderr) {
        this.argv = argv;
        this.exitCode = exitCode;
        this.stdout = stdout;
        this.stderr = stderr;
    }

    public static Tool run(String mainClass, String... args) throws IOException, InterruptedException {
        Path java = Paths.get(System.getProperty("java.home"), "bin", "java");
        List<String> argv = new ArrayList<>();
        argv.add(java.toString());
        // short-lived tools: a small heap and the C1 compiler only start faster on 2 cores
        argv.add("-Xmx256m");
        argv.add("-XX:TieredStopAtLevel=1");
        argv.add("-XX:+UseSerialGC");
        argv.add("-cp");
        argv.add(System.getProperty("java.class.path"));
        argv.add(mainClass);
        argv.addAll(List.of(args));
        Path out = Files.createTempFile("tool-", ".out");
        Path err = Files.createTempFile("tool-", ".err");
        try {
            Process p = new ProcessBuilder(argv)
                    .redirectOutput(out.toFile())
                    .redirectError(err.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                    .start();
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
                throw new AssertionError(mainClass + " did not finish within 120 s; stdout:\n"
                        + Files.readString(out) + "\nstderr:\n" + Files.readString(err));
            }
            return new Tool(argv, p.exitValue(), Files.readString(out, StandardCharsets.UTF_8),
                    Files.readString(err, StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        }
    }

    /** The tool's exit code and output, for assertion messages. */
    @Override
    public String toString() {
        String cmd = String.join(" ", argv.subList(argv.indexOf("-cp") + 2, argv.size()));
        return cmd + " -> exit " + exitCode + "\n--- stdout:\n" + stdout + "--- stderr:\n" + stderr;
    }

    /** Fails unless the tool exited 0. */
    public Tool ok() {
        if (exitCode != 0) {
            throw new AssertionError("tool failed: " + this);
        }
        return this;
    }
}
