package dev.idcar.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real {@code $IDCAR_BIN serve} in a temporary directory: started, waited for (at most 10 s,
 * until a describe request answers), stopped (SIGTERM, then SIGKILL after 5 s), cleaned up.
 * Servers still running when the test JVM exits (a test that timed out) are killed then.
 */
final class ServerProcess implements AutoCloseable {
    private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> LIVE.forEach(Process::destroyForcibly), "idcar-servers-reaper"));
    }

    final Path dir;
    final Path socket;
    final Path state;
    private final List<String> command;
    private Process process;

    /**
     * The idcar binary: {@code $IDCAR_BIN}, else the newer of the repository's
     * {@code target/debug/idcar} and {@code target/release/idcar}; the test FAILS (never skips)
     * when there is none.
     */
    static String bin() {
        String b = System.getenv("IDCAR_BIN");
        if (b == null || b.isEmpty()) {
            Path repo = Path.of("").toAbsolutePath().resolve("../..").normalize();
            b = java.util.stream.Stream.of("debug", "release")
                    .map(p -> repo.resolve("target").resolve(p).resolve("idcar"))
                    .filter(Files::isExecutable)
                    .max(java.util.Comparator.comparing(p -> p.toFile().lastModified()))
                    .map(Path::toString)
                    .orElseThrow(() -> new AssertionError("no idcar server to test against: build it "
                            + "(cargo build --bin idcar) or set IDCAR_BIN=/path/to/idcar"));
        }
        if (!Files.isExecutable(Path.of(b))) {
            throw new AssertionError("IDCAR_BIN=" + b + " is not an executable file");
        }
        return b;
    }

    private ServerProcess(String layout, String... extra) throws IOException {
        String bin = bin();
        dir = Files.createTempDirectory("idcar-java-");
        socket = dir.resolve("s.sock");
        state = dir.resolve("state");
        command = new ArrayList<>(Arrays.asList(bin, "serve", "--socket", socket.toString(), "--state-file",
                state.toString(), "--admin-addr", "none", "--log", "warn", "--layout", layout));
        command.addAll(Arrays.asList(extra));
    }

    static ServerProcess start(String layout, String... extra) throws Exception {
        ServerProcess s = new ServerProcess(layout, extra);
        try {
            s.launch();
        } catch (Exception | Error e) {
            s.close();
            throw e;
        }
        return s;
    }

    private void launch() throws Exception {
        ProcessBuilder pb = new ProcessBuilder(command);
        pb.redirectErrorStream(true);
        pb.redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("log").toFile()));
        process = pb.start();
        LIVE.add(process);
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        IdcarException last = null;
        while (System.nanoTime() < end) {
            if (!process.isAlive()) {
                throw new AssertionError("idcar exited with " + process.exitValue() + ": " + log());
            }
            try (IdcarClient c = IdcarClient.builder().socket(socket).timeout(Duration.ofSeconds(1))
                    .retryDeadline(Duration.ZERO).build()) {
                c.describe();
                return;
            } catch (IdcarException e) {
                last = e;
            }
            Thread.sleep(50);
        }
        throw new AssertionError("idcar did not answer a describe within 10 s (" + last + "): " + log());
    }

    String log() {
        try {
            return Files.readString(dir.resolve("log"));
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    /** Stops the server: SIGTERM, wait up to 5 s, then SIGKILL. */
    void stop() throws InterruptedException {
        if (process == null) {
            return;
        }
        process.destroy();
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            process.waitFor(5, TimeUnit.SECONDS);
        }
        LIVE.remove(process);
        process = null;
    }

    /** Stops and starts the server again on the same socket and state file. */
    void restart() throws Exception {
        stop();
        launch();
    }

    IdcarClient.Builder client() {
        return IdcarClient.builder().socket(socket);
    }

    /** The server's process id (changes on restart). */
    long pid() {
        return process.pid();
    }

    @Override
    public void close() throws IOException {
        try {
            stop();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (Files.exists(dir)) {
                try (Stream<Path> w = Files.walk(dir)) {
                    w.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
                }
            }
        }
    }

    /** {@code $IDCAR_BIN decode --layout L --json [extra] -- text}, parsed. */
    static Map<String, Object> cliDecode(String layout, String text, String... extra) throws Exception {
        List<String> cmd = new ArrayList<>(Arrays.asList(bin(), "decode", "--layout", layout, "--json"));
        cmd.addAll(Arrays.asList(extra));
        cmd.add("--");
        cmd.add(text);
        Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        byte[] out;
        try (InputStream in = p.getInputStream()) {
            out = in.readAllBytes();
        }
        if (!p.waitFor(10, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("idcar decode did not finish: " + cmd);
        }
        String s = new String(out, StandardCharsets.UTF_8);
        if (p.exitValue() != 0) {
            throw new AssertionError("idcar decode exited " + p.exitValue() + " for " + cmd + ": " + s);
        }
        Object o = Json.parse(s.trim()); // the client's own JSON reader
        if (!(o instanceof Map)) {
            throw new AssertionError("idcar decode --json printed no object: " + s);
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> m = (Map<String, Object>) o;
        return m;
    }
}
