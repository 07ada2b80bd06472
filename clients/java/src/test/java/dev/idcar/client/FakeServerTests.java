package dev.idcar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Bad responses from a fake server on a Unix socket: clear errors, never a hang. */
class FakeServerTests {

    interface Handler {
        void serve(SocketChannel ch) throws IOException, InterruptedException;
    }

    /** A fake server: accepts connections and runs the handler on each (one at a time). */
    static final class Fake implements AutoCloseable {
        final Path dir;
        final Path socket;
        private final ServerSocketChannel server;
        private final Thread thread;

        Fake(Handler h) throws IOException {
            dir = Files.createTempDirectory("idcar-java-fake-");
            socket = dir.resolve("s.sock");
            server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            server.bind(UnixDomainSocketAddress.of(socket));
            thread = new Thread(() -> {
                while (server.isOpen()) {
                    try (SocketChannel ch = server.accept()) {
                        h.serve(ch);
                    } catch (IOException | InterruptedException e) {
                        // next connection, or closed
                    }
                }
            }, "fake-idcar");
            thread.setDaemon(true);
            thread.start();
        }

        IdcarClient.Builder client() {
            return IdcarClient.builder().socket(socket).timeout(Duration.ofMillis(500)).retryDeadline(Duration.ofMillis(500));
        }

        @Override
        public void close() throws IOException {
            server.close();
            thread.interrupt();
            try {
                thread.join(2000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            Files.deleteIfExists(socket);
            Files.deleteIfExists(dir);
        }
    }

    static byte[] read(SocketChannel ch, int n) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(n);
        while (b.hasRemaining()) {
            if (ch.read(b) < 0) {
                throw new IOException("eof");
            }
        }
        return b.array();
    }

    static void write(SocketChannel ch, byte[] data) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(data);
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }

    static byte[] response(int status, int width, byte[] payload) {
        ByteBuffer b = ByteBuffer.allocate(8 + payload.length);
        b.put((byte) 0xD1).put((byte) status).put((byte) width).put((byte) 0).putInt(payload.length).put(payload);
        return b.array();
    }

    static final byte[] DESCRIBE_OK = response(0, 8,
            "{\"form\":\"hex\",\"layout\":\"lable64\",\"params\":{\"cluster-id\":\"0\"},\"width\":8}".getBytes(StandardCharsets.UTF_8));

    /** Answers the describe properly, then gives {@code answer} to the first get-IDs request. */
    static Handler describedThen(byte[] answer) {
        return ch -> {
            read(ch, 4);
            write(ch, DESCRIBE_OK);
            read(ch, 8);
            write(ch, answer);
            Thread.sleep(3000); // keep the connection open: the client must not wait for more
        };
    }

    private static void expectQuickly(Class<? extends Throwable> type, Handler h, String contains) throws Exception {
        try (Fake f = new Fake(h); IdcarClient c = f.client().build()) {
            long t0 = System.nanoTime();
            Throwable e = assertThrows(type, c::nextId);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms < 3000, "took " + ms + " ms");
            assertTrue(e.getMessage().contains(contains), "message <" + e.getMessage() + "> lacks <" + contains + ">");
        }
    }

    /** Issues 1, 2, 3, ... and answers each get-IDs request 30 ms late: a prefetch refill is
     * in flight whenever the buffer runs dry. */
    static Handler slowCounter(long[] next) {
        return ch -> {
            for (int n = 0; n < 100_000; n++) {
                byte[] head = read(ch, 4);
                byte[] body = read(ch, ((head[2] & 0xff) << 8) | (head[3] & 0xff));
                if (head[1] == 2) {
                    write(ch, DESCRIBE_OK);
                    continue;
                }
                int count = ByteBuffer.wrap(body).getInt();
                long first = next[0];
                next[0] += count;
                Thread.sleep(30);
                ByteBuffer ids = ByteBuffer.allocate(8 * count);
                for (int i = 0; i < count; i++) {
                    ids.putLong(first + i);
                }
                write(ch, response(0, 8, ids.array()));
            }
        };
    }

    private static long increasing(String who, long last, long[] got) {
        for (long v : got) {
            assertTrue(v > last, who + ": " + v + " after " + last + ", out of issue order");
            last = v;
        }
        return last;
    }

    @Test
    @Timeout(60)
    void prefetchedIdsComeInIssueOrder() throws Exception {
        try (Fake f = new Fake(slowCounter(new long[] {1}));
                IdcarClient c = f.client().timeout(Duration.ofSeconds(5)).retryDeadline(Duration.ofSeconds(5))
                        .prefetch(20).build()) {
            long last = 0;
            for (int i = 0; i < 100; i++) {
                last = increasing("nextId", last, new long[] {c.nextId()});
            }
            for (int i = 0; i < 10; i++) {
                last = increasing("ids(7)", last, c.ids(7));
            }
            last = increasing("ids(50), above the buffer's size", last, c.ids(50));
            long[][] seen = new long[4][];
            Thread[] threads = new Thread[4];
            for (int t = 0; t < 4; t++) {
                int mine = t;
                threads[t] = new Thread(() -> {
                    long[] got = new long[50];
                    for (int i = 0; i < 50; i++) {
                        got[i] = c.nextId();
                    }
                    seen[mine] = got;
                });
                threads[t].start();
            }
            for (Thread t : threads) {
                t.join(30_000);
            }
            for (long[] got : seen) {
                assertTrue(got != null, "a thread got no IDs");
                increasing("a thread", last, got);
            }
        }
    }

    @Test
    @Timeout(30)
    void aSocketInAMissingDirectoryFailsAtOnce() throws Exception {
        Path dir = Files.createTempDirectory("idcar-java-nodir-");
        Path sock = dir.resolve("nodir").resolve("idcar.sock");
        try (IdcarClient c = IdcarClient.builder().socket(sock).retryDeadline(Duration.ofSeconds(5)).build()) {
            long t0 = System.nanoTime();
            IdcarConnectException e = assertThrows(IdcarConnectException.class, c::nextId);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms < 1000, "retried a directory that cannot appear: " + ms + " ms");
            String want = "directory " + sock.getParent() + " does not exist";
            assertTrue(e.getMessage().contains(want), "message <" + e.getMessage() + "> lacks <" + want + ">");
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    @Test
    @Timeout(30)
    void garbageIsProtocolError() throws Exception {
        expectQuickly(IdcarProtocolException.class, ch -> {
            read(ch, 4);
            write(ch, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            Thread.sleep(3000);
        }, "magic");
    }

    @Test
    @Timeout(30)
    void wrongWidthIsProtocolError() throws Exception {
        expectQuickly(IdcarProtocolException.class, describedThen(response(0, 10, new byte[10])), "width");
    }

    @Test
    @Timeout(30)
    void badLengthIsProtocolError() throws Exception {
        expectQuickly(IdcarProtocolException.class, describedThen(response(0, 8, new byte[7])), "multiple");
    }

    @Test
    @Timeout(30)
    void wrongCountIsProtocolError() throws Exception {
        expectQuickly(IdcarProtocolException.class, describedThen(response(0, 8, new byte[16])), "asked for 1");
    }

    @Test
    @Timeout(30)
    void unknownStatusIsProtocolError() throws Exception {
        expectQuickly(IdcarProtocolException.class, describedThen(response(7, 0, new byte[0])), "status");
    }

    @Test
    @Timeout(30)
    void badDescribeIsProtocolError() throws Exception {
        expectQuickly(IdcarProtocolException.class, ch -> {
            read(ch, 4);
            write(ch, response(0, 8, "not json".getBytes(StandardCharsets.UTF_8)));
            Thread.sleep(3000);
        }, "describe");
    }

    @Test
    @Timeout(30)
    void badRequestIsNotRetried() throws Exception {
        byte[] refusal = response(1, 0, "count 1 is above --max-batch 0".getBytes(StandardCharsets.UTF_8));
        try (Fake f = new Fake(describedThen(refusal));
                IdcarClient c = f.client().retryDeadline(Duration.ofSeconds(30)).build()) {
            long t0 = System.nanoTime();
            IdcarBadRequestException e = assertThrows(IdcarBadRequestException.class, c::nextId);
            assertTrue(System.nanoTime() - t0 < 3_000_000_000L, "not retried");
            assertEquals("count 1 is above --max-batch 0", e.reason(), "reason");
        }
    }

    @Test
    @Timeout(30)
    void silentServerTimesOut() throws Exception {
        try (Fake f = new Fake(ch -> Thread.sleep(10_000)); IdcarClient c = f.client().timeout(Duration.ofMillis(300)).build()) {
            long t0 = System.nanoTime();
            IdcarTimeoutException e = assertThrows(IdcarTimeoutException.class, c::describe);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 250 && ms < 3000, "timed out after " + ms + " ms");
            assertTrue(e.getMessage().contains(f.socket.toString()), "names the socket: " + e.getMessage());
        }
    }

    @Test
    @Timeout(30)
    void serverClosingIsRetriedThenConnectError() throws Exception {
        try (Fake f = new Fake(ch -> read(ch, 4)); IdcarClient c = f.client().build()) {
            long t0 = System.nanoTime();
            IdcarConnectException e = assertThrows(IdcarConnectException.class, c::nextId);
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 450 && ms < 3000, "gave up after " + ms + " ms");
            assertTrue(e.getMessage().contains(f.socket.toString()), "names the socket: " + e.getMessage());
        }
    }
}
