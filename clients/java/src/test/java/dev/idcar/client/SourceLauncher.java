package dev.idcar.client;

import java.io.File;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * Runs a single-file Java program with the JDK's source launcher ({@code java -cp CLIENT
 * File.java args}), as a user runs the examples and the README's example: bounded in time,
 * stdout and stderr captured.
 */
final class SourceLauncher {
    private SourceLauncher() {
    }

    /** What a run gave: exit status, stdout, stderr. */
    static final class Result {
        final int code;
        final String out;
        final String err;

        Result(int code, String out, String err) {
            this.code = code;
            this.out = out;
            this.err = err;
        }

        List<String> lines() {
            return out.lines().collect(Collectors.toList());
        }

        @Override
        public String toString() {
            return "exit " + code + "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
        }
    }

    /** clients/java: the directory of pom.xml (surefire runs the tests there). */
    static Path projectDir() {
        for (String p : new String[] {System.getProperty("basedir"), System.getProperty("user.dir")}) {
            if (p != null && Files.isRegularFile(Path.of(p, "pom.xml")) && Files.isDirectory(Path.of(p, "examples"))) {
                return Path.of(p).toAbsolutePath();
            }
        }
        throw new AssertionError("cannot find clients/java (pom.xml and examples/) from basedir or user.dir");
    }

    /** The client's compiled classes (target/classes under Maven), for -cp. */
    static String clientClasspath() {
        try {
            return Path.of(IdcarClient.class.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
        } catch (URISyntaxException e) {
            throw new AssertionError(e);
        }
    }

    /** {@code $JAVA_HOME/bin/java} of the JVM running the tests. */
    static String java() {
        return Path.of(System.getProperty("java.home"), "bin", "java").toString();
    }

    /**
     * {@code java -cp <client> source args...} in the project directory, with {@code env} added
     * to (or, for null values, removed from) the environment; fails when it runs past
     * {@code limit}.
     */
    static Result run(Path source, Map<String, String> env, Duration limit, String... args) throws IOException, InterruptedException {
        // C1 only: a second less start-up per run on a small machine; the programs behave the same
        List<String> cmd = new ArrayList<>(List.of(java(), "-XX:TieredStopAtLevel=1", "-cp", clientClasspath(),
                source.toString()));
        cmd.addAll(Arrays.asList(args));
        Path tmp = Files.createTempDirectory("idcar-java-run-");
        File out = tmp.resolve("out").toFile();
        File err = tmp.resolve("err").toFile();
        try {
            ProcessBuilder pb = new ProcessBuilder(cmd).directory(projectDir().toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                    .redirectOutput(out).redirectError(err);
            env.forEach((k, v) -> {
                if (v == null) {
                    pb.environment().remove(k);
                } else {
                    pb.environment().put(k, v);
                }
            });
            Process p = pb.start();
            if (!p.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS)) {
                p.destroyForcibly();
                p.waitFor(5, TimeUnit.SECONDS);
                throw new AssertionError(cmd + " did not finish within " + limit + ":\n"
                        + Files.readString(err.toPath(), StandardCharsets.UTF_8));
            }
            return new Result(p.exitValue(), Files.readString(out.toPath(), StandardCharsets.UTF_8),
                    Files.readString(err.toPath(), StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(out.toPath());
            Files.deleteIfExists(err.toPath());
            Files.deleteIfExists(tmp);
        }
    }
}
