package dev.idcar.client;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
import java.nio.channels.ClosedByInterruptException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A thread-safe client of an idcar sidecar over its Unix socket (binary protocol).
 *
 * <pre>{@code
 * try (IdcarClient c = IdcarClient.builder().socket("/tmp/idcar.sock").build()) {
 *     long id = c.nextId();                 // lable64, ugd60, si53
 *     UUID u = c.nextUuid();                // uuid7
 *     Id any = c.next();                    // every layout; any.toString() is the text form
 *     Map<String, Object> f = c.decode(any);
 * }
 * }</pre>
 *
 * <p>The client connects on first use and sends a describe request, so it knows the layout, the
 * width and the default text form without configuration. Every socket operation has a timeout;
 * "unavailable" answers and connection failures are retried with backoff (10 ms doubling up to
 * 200 ms) until the retry deadline; a server restart is absorbed by reconnecting. With
 * {@code prefetch(k)} IDs come from a local buffer refilled in the background (see the README
 * for the trade-off). Calls from many threads share one connection, one request at a time.
 */
public final class IdcarClient implements AutoCloseable {
    /** The server's default socket path. */
    public static final String DEFAULT_SOCKET = "/tmp/idcar.sock";
    /** Largest count sent in one request; larger asks are split. */
    public static final int CHUNK = 1000;

    private final Path socket;
    final long timeoutNanos;
    final long retryDeadlineNanos;
    private final ReentrantLock lock = new ReentrantLock();
    private Connection conn; // guarded by lock
    private volatile Description description;
    private volatile boolean closed;
    private final Prefetcher prefetcher;

    /** IDs received in one response, with the time their request was sent. */
    static final class Batch {
        final Description description;
        final byte[] data;
        final int width;
        final long sentAt;

        Batch(Description description, byte[] data, int width, long sentAt) {
            this.description = description;
            this.data = data;
            this.width = width;
            this.sentAt = sentAt;
        }

        int count() {
            return data.length / width;
        }

        Id id(int i) {
            return Id.ofOwned(description.layout(), Arrays.copyOfRange(data, i * width, (i + 1) * width));
        }
    }

    private IdcarClient(Builder b) {
        this.socket = b.socket != null ? b.socket : defaultSocket();
        this.timeoutNanos = b.timeout.toNanos();
        this.retryDeadlineNanos = b.retryDeadline.toNanos();
        int low = b.lowWater != null ? b.lowWater : b.prefetch / 4;
        this.prefetcher = b.prefetch > 0 ? new Prefetcher(this, b.prefetch, low, b.maxAge.toNanos()) : null;
    }

    /**
     * A builder with the defaults: socket from {@code IDCAR_SOCKET} or {@value #DEFAULT_SOCKET},
     * timeout 5 s, retry deadline 5 s, no prefetch.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * A client with every default (the same as {@code builder().build()}).
     *
     * @return a new client; it connects on first use
     */
    public static IdcarClient create() {
        return builder().build();
    }

    /**
     * The socket used when none is given.
     *
     * @return {@code IDCAR_SOCKET} when set and not empty, else {@value #DEFAULT_SOCKET}
     */
    public static Path defaultSocket() {
        String env = System.getenv("IDCAR_SOCKET");
        return Paths.get(env != null && !env.isEmpty() ? env : DEFAULT_SOCKET);
    }

    /**
     * The socket path this client talks to.
     *
     * @return the path
     */
    public Path socket() {
        return socket;
    }

    // -- connection and retries -------------------------------------------------------------

    private void drop() {
        if (conn != null) {
            conn.close();
            conn = null;
        }
    }

    private void ensureOpen() {
        if (closed) {
            throw new IdcarException("the idcar client is closed");
        }
    }

    private static boolean permissionDenied(Throwable e) {
        String m = String.valueOf(e.getMessage()).toLowerCase(Locale.ROOT);
        return e instanceof java.nio.file.AccessDeniedException || m.contains("permission denied")
                || m.contains("operation not permitted");
    }

    private static String why(Throwable e) {
        String m = e.getMessage();
        return m != null && !m.isEmpty() ? m : e.getClass().getSimpleName();
    }

    private static byte[] getIdsFrame(int count) {
        return new byte[] {(byte) Connection.MAGIC, 1, 0, 4, (byte) (count >>> 24), (byte) (count >>> 16),
            (byte) (count >>> 8), (byte) count};
    }

    /**
     * Sends a get-IDs request for {@code count} IDs (or, with count 0, only makes sure a
     * connection is up), connecting and retrying as the contract says. Returns null for count 0.
     */
    Batch call(int count, long retryNanos) {
        byte[] frame = count > 0 ? getIdsFrame(count) : null;
        long end = System.nanoTime() + retryNanos;
        long delay = TimeUnit.MILLISECONDS.toNanos(10);
        boolean reconnected = false;
        while (true) {
            IdcarException last;
            lock.lock();
            try {
                ensureOpen();
                boolean fresh = conn == null;
                try {
                    if (conn == null) {
                        conn = Connection.open(socket, timeoutNanos);
                        description = conn.description;
                    }
                    if (frame == null) {
                        return null;
                    }
                    Description d = conn.description;
                    long sent = System.nanoTime();
                    Connection.Response r = conn.exchange(frame, d.width());
                    if (r.status == 0) {
                        if (r.payload.length != count * d.width()) {
                            throw new IdcarProtocolException("asked for " + count + " IDs, got "
                                    + r.payload.length / d.width());
                        }
                        return new Batch(d, r.payload, d.width(), sent);
                    }
                    if (r.status == 1) {
                        throw new IdcarBadRequestException(r.reason());
                    }
                    last = new IdcarUnavailableException(r.reason());
                } catch (Connection.ConnectFailure e) {
                    drop();
                    Path dir = socket.toAbsolutePath().getParent();
                    if (dir != null && !Files.isDirectory(dir)) {
                        // The server does not create directories: waiting cannot help.
                        throw new IdcarConnectException(socket, "cannot connect: directory " + dir
                                + (Files.exists(dir) ? " is not a directory" : " does not exist"), e.getCause());
                    }
                    last = new IdcarConnectException(socket, "cannot connect: " + why(e), e.getCause());
                    if (permissionDenied(e.getCause())) {
                        throw last;
                    }
                } catch (IdcarUnavailableException e) { // a status-2 describe
                    drop();
                    last = e;
                } catch (SocketTimeoutException e) {
                    drop();
                    throw new IdcarTimeoutException(socket + ": " + why(e));
                } catch (InterruptedIOException | ClosedByInterruptException e) {
                    drop();
                    Thread.currentThread().interrupt();
                    throw new IdcarException(socket + ": interrupted", e);
                } catch (IdcarProtocolException e) {
                    drop();
                    throw e;
                } catch (IOException e) {
                    drop();
                    last = new IdcarConnectException(socket, "connection lost: " + why(e), e);
                    if (!fresh && !reconnected) {
                        reconnected = true; // a stale connection (server restarted): retry at once
                        continue;
                    }
                }
            } finally {
                lock.unlock();
            }
            long left = end - System.nanoTime();
            if (left <= 0) {
                throw last;
            }
            try {
                TimeUnit.NANOSECONDS.sleep(Math.min(delay, left));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IdcarException(socket + ": interrupted while retrying (" + last.getMessage() + ")", e);
            }
            delay = Math.min(delay * 2, TimeUnit.MILLISECONDS.toNanos(200));
        }
    }

    /** Fetches n IDs directly (no prefetch), in requests of at most {@link #CHUNK}. */
    List<Batch> fetch(int n, long retryNanos) {
        List<Batch> out = new ArrayList<>((n + CHUNK - 1) / CHUNK);
        for (int got = 0; got < n; ) {
            Batch b = call(Math.min(CHUNK, n - got), retryNanos);
            out.add(b);
            got += b.count();
        }
        return out;
    }

    // -- API ----------------------------------------------------------------------------------

    /**
     * The server's layout, width, default text form and parameters, from the describe request
     * sent on connect (connects if needed).
     *
     * @return the description
     * @throws IdcarException when the server cannot be reached (see the subclasses)
     */
    public Description describe() {
        Description d = description;
        if (d == null) {
            call(0, retryDeadlineNanos);
            d = description;
        }
        return d;
    }

    private void require64() {
        Description d = describe();
        if (d.width() != 8) {
            throw new IllegalStateException("layout " + d.layout() + " has " + d.width()
                    + "-byte IDs, not longs: use next() / nextIds(n)"
                    + (d.layout().equals("uuid7") ? " or nextUuid() / uuids(n)" : ""));
        }
    }

    private void requireUuid7() {
        Description d = describe();
        if (!d.layout().equals("uuid7")) {
            throw new IllegalStateException("layout " + d.layout() + " IDs are not UUIDs (only uuid7's are): use "
                    + (d.width() == 8 ? "nextId() / ids(n) or " : "") + "next() / nextIds(n)");
        }
    }

    /**
     * One ID of an 8-byte layout (lable64, ugd60, si53) as a long: the same 64 bits (lable64 IDs
     * at or above 2^63 are negative).
     *
     * @return the ID's 64 bits
     * @throws IllegalStateException when the server's layout is sno80, muid128 or uuid7
     * @throws IdcarException when no ID could be had (see the subclasses)
     */
    public long nextId() {
        require64();
        if (prefetcher != null) {
            return prefetcher.take().asLong();
        }
        Batch b = call(1, retryDeadlineNanos);
        if (b.width != 8) {
            throw new IllegalStateException("layout " + b.description.layout() + " has " + b.width + "-byte IDs");
        }
        return Decoder.u64(b.data, 0);
    }

    /**
     * {@code n} IDs of an 8-byte layout as longs, in order of issue. Asks above {@link #CHUNK}
     * are split into several requests.
     *
     * @param n how many, at least 1
     * @return the IDs' 64 bits
     * @throws IllegalArgumentException when n is below 1
     * @throws IllegalStateException when the server's layout is sno80, muid128 or uuid7
     * @throws IdcarException when no ID could be had (see the subclasses)
     */
    public long[] ids(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("n must be at least 1, got " + n);
        }
        require64();
        long[] out = new long[n];
        if (prefetcher != null) {
            List<Id> got = prefetcher.take(n);
            for (int i = 0; i < n; i++) {
                out[i] = got.get(i).asLong();
            }
            return out;
        }
        int i = 0;
        for (Batch b : fetch(n, retryDeadlineNanos)) {
            if (b.width != 8) {
                throw new IllegalStateException("layout " + b.description.layout() + " has " + b.width + "-byte IDs");
            }
            for (int k = 0; k < b.count(); k++) {
                out[i++] = Decoder.u64(b.data, k * 8);
            }
        }
        return out;
    }

    /**
     * One uuid7 ID as a {@link UUID} (the same as {@code next().toUuid()}): its
     * {@code toString()} is the ID's text form, its {@code version()} 7.
     *
     * @return the ID's 128 bits
     * @throws IllegalStateException when the server's layout is not uuid7
     * @throws IdcarException when no ID could be had (see the subclasses)
     */
    public UUID nextUuid() {
        requireUuid7();
        return next().toUuid();
    }

    /**
     * {@code n} uuid7 IDs as {@link UUID}s, in order of issue. Asks above {@link #CHUNK} are
     * split into several requests.
     *
     * @param n how many, at least 1
     * @return the IDs, a read-only list
     * @throws IllegalArgumentException when n is below 1
     * @throws IllegalStateException when the server's layout is not uuid7
     * @throws IdcarException when no ID could be had (see the subclasses)
     */
    public List<UUID> uuids(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("n must be at least 1, got " + n);
        }
        requireUuid7();
        List<UUID> out = new ArrayList<>(n);
        for (Id id : nextIds(n)) {
            out.add(id.toUuid());
        }
        return Collections.unmodifiableList(out);
    }

    /**
     * One ID of any layout.
     *
     * @return the ID; its {@code toString()} is the layout's default text form
     * @throws IdcarException when no ID could be had (see the subclasses)
     */
    public Id next() {
        ensureOpen();
        if (prefetcher != null) {
            return prefetcher.take();
        }
        return call(1, retryDeadlineNanos).id(0);
    }

    /**
     * {@code n} IDs of any layout, in order of issue. Asks above {@link #CHUNK} are split into
     * several requests.
     *
     * @param n how many, at least 1
     * @return the IDs, a read-only list
     * @throws IllegalArgumentException when n is below 1
     * @throws IdcarException when no ID could be had (see the subclasses)
     */
    public List<Id> nextIds(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("n must be at least 1, got " + n);
        }
        ensureOpen();
        if (prefetcher != null) {
            return Collections.unmodifiableList(prefetcher.take(n));
        }
        List<Id> out = new ArrayList<>(n);
        for (Batch b : fetch(n, retryDeadlineNanos)) {
            for (int k = 0; k < b.count(); k++) {
                out.add(b.id(k));
            }
        }
        return Collections.unmodifiableList(out);
    }

    /**
     * The ID's fields, the same keys and values as {@code idcar decode --json}: integers as
     * {@link Long}, the rest as strings. si53 uses the server's parameters (from describe).
     *
     * @param id the ID
     * @return the fields, keys sorted
     * @throws IllegalArgumentException when the ID is not valid for its layout
     */
    public Map<String, Object> decode(Id id) {
        Objects.requireNonNull(id, "id");
        Description d = description;
        Map<String, String> params = d != null && d.layout().equals(id.layout()) ? d.params() : Collections.emptyMap();
        return Decoder.decode(id, params);
    }

    /**
     * The default text form of a long ID from {@link #nextId()} (the server's layout).
     *
     * @param id the ID's 64 bits
     * @return the text form, e.g. 16 hex digits for lable64
     */
    public String text(long id) {
        return Id.ofLong(describe().layout(), id).toString();
    }

    /** Stops the background refill, drops buffered IDs and closes the connection. Idempotent. */
    @Override
    public void close() {
        closed = true;
        if (prefetcher != null) {
            prefetcher.close();
        }
        lock.lock();
        try {
            drop();
        } finally {
            lock.unlock();
        }
    }

    boolean isClosed() {
        return closed;
    }

    @Override
    public String toString() {
        return "IdcarClient[" + socket + "]";
    }

    /** Options of a client; see {@link IdcarClient#builder()}. */
    public static final class Builder {
        private Path socket;
        private Duration timeout = Duration.ofSeconds(5);
        private Duration retryDeadline = Duration.ofSeconds(5);
        private int prefetch;
        private Integer lowWater;
        private Duration maxAge = Duration.ofSeconds(1);

        private Builder() {
        }

        /**
         * The socket path (default: {@code IDCAR_SOCKET}, else {@code /tmp/idcar.sock}).
         *
         * @param path the path; null for the default
         * @return this builder
         */
        public Builder socket(String path) {
            this.socket = path == null ? null : Paths.get(path);
            return this;
        }

        /**
         * The socket path (default: {@code IDCAR_SOCKET}, else {@code /tmp/idcar.sock}).
         *
         * @param path the path; null for the default
         * @return this builder
         */
        public Builder socket(Path path) {
            this.socket = path;
            return this;
        }

        /**
         * Longest wait on the socket without progress (connect, write, read); default 5 s. A
         * server that stops answering is an {@link IdcarTimeoutException}, never a hang.
         *
         * @param d a positive duration
         * @return this builder
         * @throws IllegalArgumentException when d is not positive
         */
        public Builder timeout(Duration d) {
            if (d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException("timeout must be positive");
            }
            this.timeout = d;
            return this;
        }

        /**
         * How long "unavailable" answers and connection failures are retried (10 ms doubling up
         * to 200 ms between tries); default 5 s.
         *
         * @param d the deadline; zero: no retry
         * @return this builder
         * @throws IllegalArgumentException when d is negative
         */
        public Builder retryDeadline(Duration d) {
            if (d.isNegative()) {
                throw new IllegalArgumentException("retry deadline must not be negative");
            }
            this.retryDeadline = d;
            return this;
        }

        /**
         * Size of the local prefetch buffer, refilled in the background (see the README for the
         * trade-off).
         *
         * @param k how many IDs to buffer; 0 (the default) turns prefetch off
         * @return this builder
         * @throws IllegalArgumentException when k is negative
         */
        public Builder prefetch(int k) {
            if (k < 0) {
                throw new IllegalArgumentException("prefetch must not be negative");
            }
            this.prefetch = k;
            return this;
        }

        /**
         * The low-water mark: refill when the buffer holds this many IDs or fewer.
         *
         * @param n the mark, below the prefetch size; default prefetch / 4
         * @return this builder
         * @throws IllegalArgumentException when n is negative
         */
        public Builder lowWater(int n) {
            if (n < 0) {
                throw new IllegalArgumentException("low water must not be negative");
            }
            this.lowWater = n;
            return this;
        }

        /**
         * Buffered IDs older than this are dropped, never handed out; default 1 s.
         *
         * @param d a positive duration
         * @return this builder
         * @throws IllegalArgumentException when d is not positive
         */
        public Builder maxAge(Duration d) {
            if (d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException("max age must be positive");
            }
            this.maxAge = d;
            return this;
        }

        /**
         * The client; it connects on first use.
         *
         * @return a new client
         * @throws IllegalArgumentException when the low-water mark is not below the prefetch size
         */
        public IdcarClient build() {
            if (lowWater != null && prefetch > 0 && lowWater >= prefetch) {
                throw new IllegalArgumentException("low water " + lowWater + " must be below prefetch " + prefetch);
            }
            return new IdcarClient(this);
        }
    }
}
