package dev.idcar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Tests against real idcar servers ($IDCAR_BIN); they fail, never skip, when it is unset. */
class ServerTests {

    private static final int THREADS = 8;
    private static final int PER_THREAD = 300;

    /** 8 threads share one client; every ID they get is distinct. */
    private static void takeFromThreads(int prefetch) throws Exception {
        try (ServerProcess s = ServerProcess.start("lable64");
                IdcarClient c = s.client().prefetch(prefetch).build()) {
            Set<Long> seen = ConcurrentHashMap.newKeySet();
            AtomicInteger total = new AtomicInteger();
            AtomicReference<Throwable> error = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                Thread th = new Thread(() -> {
                    try {
                        for (int i = 0; i < PER_THREAD - 50; i++) {
                            seen.add(c.nextId());
                            total.incrementAndGet();
                        }
                        for (long v : c.ids(25)) {
                            seen.add(v);
                            total.incrementAndGet();
                        }
                        for (Id id : c.nextIds(25)) {
                            seen.add(id.asLong());
                            total.incrementAndGet();
                        }
                    } catch (Throwable e) {
                        error.compareAndSet(null, e);
                    }
                });
                th.start();
                threads.add(th);
            }
            for (Thread th : threads) {
                th.join(60_000);
                assertFalse(th.isAlive(), "worker still running");
            }
            if (error.get() != null) {
                fail("a worker failed", error.get());
            }
            assertEquals(THREADS * PER_THREAD, total.get(), "IDs taken");
            assertEquals(THREADS * PER_THREAD, seen.size(), "distinct IDs");
            long[] big = c.ids(2500); // split into requests of at most 1,000
            for (long v : big) {
                assertTrue(seen.add(v), "duplicate in a large ask");
            }
        }
    }

    @Test
    @Timeout(120)
    void uniqueAcrossThreads() throws Exception {
        takeFromThreads(0);
    }

    @Test
    @Timeout(120)
    void uniqueAcrossThreadsWithPrefetch() throws Exception {
        takeFromThreads(64);
    }

    @Test
    @Timeout(120)
    void serverRestartMidStream() throws Exception {
        try (ServerProcess s = ServerProcess.start("lable64");
                IdcarClient plain = s.client().retryDeadline(Duration.ofSeconds(20)).build();
                IdcarClient buffered = s.client().retryDeadline(Duration.ofSeconds(20)).prefetch(50).build()) {
            Set<Long> seen = new java.util.HashSet<>();
            int taken = 0;
            for (int round = 0; round < 2; round++) {
                if (round == 1) {
                    long pid = s.pid();
                    s.restart();
                    assertNotEquals(pid, s.pid(), "a new server process");
                }
                for (int i = 0; i < 200; i++) {
                    seen.add(plain.nextId());
                    seen.add(buffered.nextId());
                    taken += 2;
                }
                for (long v : plain.ids(300)) {
                    seen.add(v);
                    taken++;
                }
            }
            assertEquals(taken, seen.size(), "distinct IDs across the restart");
        }
    }

    @Test
    @Timeout(120)
    void unavailableRetriedUntilDeadline() throws Exception {
        try (ServerProcess s = ServerProcess.start("lable64", "--zk", "127.0.0.1:1", "--zk-session-timeout", "2s");
                IdcarClient c = s.client().retryDeadline(Duration.ofSeconds(1)).build()) {
            assertEquals("lable64", c.describe().layout(), "describe answers without a lease");
            long t0 = System.nanoTime();
            IdcarUnavailableException e = assertThrows(IdcarUnavailableException.class, c::nextId);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 1000 && ms < 10_000, "gave up after " + ms + " ms");
            assertTrue(e.reason().contains("no lease is held"), "reason: " + e.reason());
            assertTrue(e.getMessage().contains(e.reason()), "message carries the reason: " + e.getMessage());
            try (IdcarClient p = s.client().retryDeadline(Duration.ofSeconds(1)).prefetch(100).build()) {
                long t1 = System.nanoTime();
                IdcarUnavailableException pe = assertThrows(IdcarUnavailableException.class, p::nextId);
                long pms = (System.nanoTime() - t1) / 1_000_000;
                assertTrue(pms >= 1000 && pms < 10_000, "with prefetch: gave up after " + pms + " ms");
                assertTrue(pe.reason().contains("no lease is held"), "with prefetch, reason: " + pe.reason());
            }
        }
    }

    @Test
    @Timeout(120)
    void missingSocketIsAClearError() throws Exception {
        Path dir = Files.createTempDirectory("idcar-java-missing-");
        Path sock = dir.resolve("nobody.sock");
        try {
            for (Duration deadline : new Duration[] {Duration.ZERO, Duration.ofMillis(300)}) {
                try (IdcarClient c = IdcarClient.builder().socket(sock).retryDeadline(deadline).build()) {
                    long t0 = System.nanoTime();
                    IdcarConnectException e = assertThrows(IdcarConnectException.class, c::nextId);
                    long ms = (System.nanoTime() - t0) / 1_000_000;
                    assertTrue(ms < deadline.toMillis() + 2000, "took " + ms + " ms");
                    assertTrue(e.getMessage().contains(sock.toString()), "names the path: " + e.getMessage());
                    assertTrue(e.getMessage().contains("No such file"), "names the cause: " + e.getMessage());
                    assertEquals(sock, e.socket(), "socket()");
                }
            }
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    private static final String[][] LAYOUTS = {
        {"lable64"}, {"ugd60"}, {"si53", "--mid-bits", "3"}, {"sno80"}, {"muid128"}, {"uuid7"},
    };

    private static String[] extra(String[] spec) {
        return java.util.Arrays.copyOfRange(spec, 1, spec.length);
    }

    @Test
    @Timeout(120)
    void decodeMatchesCliForEveryLayout() throws Exception {
        for (String[] spec : LAYOUTS) {
            String layout = spec[0];
            try (ServerProcess s = ServerProcess.start(layout, extra(spec)); IdcarClient c = s.client().build()) {
                Description d = c.describe();
                assertEquals(layout, d.layout(), "describe layout");
                assertEquals(Decoder.width(layout), d.width(), "describe width");
                assertEquals(Decoder.defaultForm(layout), d.form(), "describe form");
                List<Id> ids = new ArrayList<>(c.nextIds(3));
                ids.add(c.next());
                if (d.width() == 8) {
                    long v = c.nextId();
                    ids.add(Id.ofLong(layout, v));
                    assertEquals(Id.ofLong(layout, v).toString(), c.text(v), "text(long)");
                } else {
                    assertThrows(IllegalStateException.class, c::nextId);
                }
                if (layout.equals("uuid7")) {
                    java.util.UUID u = c.nextUuid();
                    ids.add(Id.ofUuid(u));
                    assertEquals(7, u.version(), "UUID version");
                    assertEquals(2, u.variant(), "UUID variant");
                } else {
                    assertThrows(IllegalStateException.class, c::nextUuid);
                }
                for (Id id : ids) {
                    assertEquals(layout, id.layout(), "ID layout");
                    assertEquals(d.width(), id.bytes().length, "ID width");
                    Map<String, Object> want = ServerProcess.cliDecode(layout, id.toString(), extra(spec));
                    Map<String, Object> got = c.decode(id);
                    assertEquals(want, got, layout + " decode of " + id);
                    assertEquals(id, Id.parse(layout, id.toString()), "parse of " + id);
                    if (layout.equals("uuid7")) {
                        assertEquals(id.toString(), id.toUuid().toString(), "the UUID's text is the ID's");
                        for (String form : Decoder.forms(layout)) { // the CLI reads every form alike
                            assertEquals(want, ServerProcess.cliDecode(layout, id.format(form)), form + " of " + id);
                        }
                    }
                }
            }
        }
    }

    /** Edge values decode as the CLI decodes them (no server needed, only the binary). */
    @Test
    @Timeout(120)
    void decodeEdgeValuesMatchCli() throws Exception {
        List<Id> ids = List.of(
                Id.ofLong("lable64", 0xffffffffffc003ffL), Id.ofLong("lable64", 0),
                Id.ofLong("ugd60", (1L << 60) - 1), Id.ofLong("ugd60", 0),
                Id.of("sno80", new byte[] {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1}), Id.of("sno80", new byte[10]),
                Id.of("muid128", new byte[] {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}),
                Id.of("muid128", new byte[16]),
                Id.parse("uuid7", "00000000-0000-7000-8000-0000000000de"), // idcar's, every field zero
                Id.parse("uuid7", "e677d21f-dbff-77ff-bff7-9c405a5a5a50"), // the last millisecond that decodes
                Id.parse("uuid7", "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"), // another generator's
                Id.parse("uuid7", "e677d21f-dbff-7fff-bfff-ffffffffff00")); // another generator's, at the last millisecond
        for (Id id : ids) {
            assertEquals(ServerProcess.cliDecode(id.layout(), id.toString()), id.decode(), "decode of " + id);
        }
        Id si = Id.ofLong("si53", (1L << 53) - 1);
        assertEquals(ServerProcess.cliDecode("si53", si.toString(), "--mid-bits", "3", "--base-clock", "1600000000000"),
                Decoder.decode(si, Map.of("mid-bits", "3", "base-clock", "1600000000000")), "si53 with params");
    }

    @Test
    @Timeout(120)
    void prefetchDropsOldIdsAndStopsOnClose() throws Exception {
        try (ServerProcess s = ServerProcess.start("lable64")) {
            IdcarClient c = s.client().prefetch(100).maxAge(Duration.ofMillis(100)).build();
            try {
                c.nextId();
                Thread.sleep(400); // the buffer's IDs are now older than max age
                long before = System.currentTimeMillis();
                Map<String, Object> f = c.decode(c.next());
                long issued = (Long) f.get("timestamp_ms");
                assertTrue(issued >= before - 50, "a stale ID was handed out: issued " + (before - issued) + " ms before the call");
            } finally {
                c.close();
            }
            assertThrows(IdcarException.class, c::nextId);
            long end = System.nanoTime() + 3_000_000_000L;
            while (prefetchThreads() > 0 && System.nanoTime() < end) {
                Thread.sleep(20);
            }
            assertEquals(0, prefetchThreads(), "prefetch threads alive after close");
        }
    }

    private static int prefetchThreads() {
        int n = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().equals("idcar-prefetch") && t.isAlive()) {
                n++;
            }
        }
        return n;
    }
}
