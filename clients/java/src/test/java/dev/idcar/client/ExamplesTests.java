package dev.idcar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * examples/Fetch.java and examples/Bench.java, run as users run them: single-file programs
 * through the JDK's source launcher, against real servers. So they compile against the client
 * and behave as SPEC.md's "fetch example" and "Benchmark" say.
 */
class ExamplesTests {
    private static final Duration LIMIT = Duration.ofSeconds(60);
    /** The examples get their socket from the flag only. */
    private static final Map<String, String> NO_ENV_SOCKET = new java.util.HashMap<>();

    static {
        NO_ENV_SOCKET.put("IDCAR_SOCKET", null);
    }

    private static Path example(String name) {
        Path p = SourceLauncher.projectDir().resolve("examples").resolve(name);
        assertTrue(Files.isRegularFile(p), p + " exists");
        return p;
    }

    /** N lines, all distinct, each an ID that the client and {@code idcar decode} decode alike. */
    private static void fetchAgrees(String layout, int count, Set<String> seen) throws Exception {
        try (ServerProcess s = ServerProcess.start(layout)) {
            for (String prefetch : new String[] {"0", "50"}) {
                List<String> args = new java.util.ArrayList<>(List.of("--socket", s.socket.toString(), "--count",
                        Integer.toString(count)));
                if (!prefetch.equals("0")) {
                    args.addAll(List.of("--prefetch", prefetch));
                }
                SourceLauncher.Result r = SourceLauncher.run(example("Fetch.java"), NO_ENV_SOCKET, LIMIT,
                        args.toArray(new String[0]));
                assertEquals(0, r.code, r::toString);
                assertEquals("", r.err, "nothing on stderr");
                List<String> lines = r.lines();
                assertEquals(count, lines.size(), r::toString);
                for (String line : lines) {
                    assertTrue(seen.add(line), line + " twice");
                    Id id = Id.parse(layout, line);
                    assertEquals(line, id.toString(), "the default text form");
                    assertEquals(ServerProcess.cliDecode(layout, line), id.decode(), "idcar decode " + line);
                }
            }
        }
    }

    @Test
    @Timeout(120)
    void fetchPrintsUniqueIdsLable64() throws Exception {
        fetchAgrees("lable64", 20, new HashSet<>());
    }

    @Test
    @Timeout(120)
    void fetchPrintsUniqueIdsMuid128() throws Exception {
        fetchAgrees("muid128", 20, new HashSet<>());
    }

    @Test
    @Timeout(120)
    void fetchBadFlagsAreOneErrorLineAndExit1() throws Exception {
        Path dir = Files.createTempDirectory("idcar-java-fetch-");
        String missing = dir.resolve("missing.sock").toString();
        try {
            String[][] cases = {
                {"--socket", missing, "--count", "abc"},
                {"--socket", missing, "--count", "0"},
                {"--socket", missing, "--bogus", "1"},
                {"--socket", missing, "--count"},
            };
            for (String[] args : cases) {
                SourceLauncher.Result r = SourceLauncher.run(example("Fetch.java"), NO_ENV_SOCKET, LIMIT, args);
                String what = String.join(" ", args) + ": " + r;
                assertEquals(1, r.code, what);
                assertEquals("", r.out, "nothing on stdout: " + what);
                assertEquals(1, r.err.trim().lines().count(), "one line: " + what);
                assertTrue(r.err.startsWith("error: "), what);
            }
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    @Test
    @Timeout(120)
    void fetchMissingSocketNamesThePath() throws Exception {
        Path dir = Files.createTempDirectory("idcar-java-fetch-");
        Path missing = dir.resolve("missing.sock");
        try {
            Map<String, String> env = new java.util.HashMap<>();
            env.put("IDCAR_SOCKET", missing.toString()); // no --socket: the fallback
            SourceLauncher.Result r = SourceLauncher.run(example("Fetch.java"), env, LIMIT, "--count", "1");
            assertEquals(1, r.code, r::toString);
            assertEquals("", r.out, r::toString);
            assertEquals(1, r.err.trim().lines().count(), r::toString);
            assertTrue(r.err.startsWith("error: ") && r.err.contains(missing.toString()) && r.err.contains("No such file"),
                    r::toString);
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    @Test
    @Timeout(120)
    void benchPrintsTwoRates() throws Exception {
        try (ServerProcess s = ServerProcess.start("lable64")) {
            SourceLauncher.Result r = SourceLauncher.run(example("Bench.java"), NO_ENV_SOCKET, LIMIT,
                    "--socket", s.socket.toString(), "--seconds", "0.3");
            assertEquals(0, r.code, r::toString);
            List<String> lines = r.lines();
            assertEquals(2, lines.size(), r::toString);
            String[] want = {"single", "prefetch"};
            for (int i = 0; i < 2; i++) {
                String[] f = lines.get(i).split(" ");
                assertEquals(2, f.length, r::toString);
                assertEquals(want[i], f[0], r::toString);
                assertTrue(Long.parseLong(f[1]) > 0, r::toString);
            }
        }
        SourceLauncher.Result bad = SourceLauncher.run(example("Bench.java"), NO_ENV_SOCKET, LIMIT, "--seconds", "x");
        assertEquals(1, bad.code, bad::toString);
        assertTrue(bad.err.startsWith("error: ") && bad.out.isEmpty(), bad::toString);
    }
}
