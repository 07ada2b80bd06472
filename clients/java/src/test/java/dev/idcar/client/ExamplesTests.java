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

    /**
     * N lines, all distinct, each an ID that the client and {@code idcar decode} decode alike;
     * {@code extra} flags are added to the first run.
     */
    private static void fetchAgrees(String layout, int count, Set<String> seen, String... extra) throws Exception {
        try (ServerProcess s = ServerProcess.start(layout)) {
            for (String prefetch : new String[] {"0", "50"}) {
                List<String> args = new java.util.ArrayList<>(List.of("--socket", s.socket.toString(), "--count",
                        Integer.toString(count)));
                if (!prefetch.equals("0")) {
                    args.addAll(List.of("--prefetch", prefetch));
                } else {
                    args.addAll(List.of(extra));
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
                    if (layout.equals("uuid7")) {
                        assertEquals(line, id.toUuid().toString(), "a UUID's text");
                    }
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
    void fetchPrintsUniqueIdsUuid7() throws Exception {
        fetchAgrees("uuid7", 20, new HashSet<>(), "--retry-deadline", "0.5");
    }

    /**
     * --retry-deadline reaches the client: against a server that answers every describe
     * "unavailable", Fetch keeps trying for the deadline given (0.6 s: well short of the default
     * 5) from its first connection, and with 0 gives up at once; each time one line naming the
     * reason, exit 1.
     */
    @Test
    @Timeout(120)
    void fetchRetryDeadlineIsPassedToTheClient() throws Exception {
        java.util.concurrent.ConcurrentLinkedQueue<Long> connects = new java.util.concurrent.ConcurrentLinkedQueue<>();
        FakeServerTests.Handler unavailable = ch -> {
            connects.add(System.nanoTime());
            FakeServerTests.read(ch, 4);
            FakeServerTests.write(ch, FakeServerTests.response(2, 0,
                    "warming up".getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        };
        try (FakeServerTests.Fake f = new FakeServerTests.Fake(unavailable)) {
            String[][] cases = {{"0", "0"}, {"0.6", "600"}};
            for (String[] c : cases) {
                connects.clear();
                SourceLauncher.Result r = SourceLauncher.run(example("Fetch.java"), NO_ENV_SOCKET, LIMIT,
                        "--socket", f.socket.toString(), "--count", "1", "--retry-deadline", c[0]);
                long end = System.nanoTime();
                String what = "--retry-deadline " + c[0] + ": " + r;
                assertEquals(1, r.code, what);
                assertEquals("", r.out, what);
                assertEquals(1, r.err.trim().lines().count(), what);
                assertTrue(r.err.startsWith("error: ") && r.err.contains("warming up"), what);
                assertTrue(!connects.isEmpty(), "it connected: " + what);
                long ms = (end - connects.peek()) / 1_000_000;
                if (c[0].equals("0")) {
                    assertEquals(1, connects.size(), "no retry: " + what);
                } else {
                    assertTrue(connects.size() > 1, "retried: " + what);
                    assertTrue(ms >= Long.parseLong(c[1]) - 100, "tried for " + ms + " ms: " + what);
                    assertTrue(ms < 4_000, "gave up before the default 5 s: " + ms + " ms: " + what);
                }
            }
        }
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
                {"--socket", missing, "--count", "1", "--retry-deadline", "-1"},
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
