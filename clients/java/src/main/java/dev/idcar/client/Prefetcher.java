package dev.idcar.client;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * The prefetch buffer of a client: IDs handed out at most once (all access synchronised),
 * dropped when older than the maximum age, refilled in the background (one refill at a time)
 * when the buffer falls to the low-water mark.
 */
final class Prefetcher {
    /** The IDs of one response; they share their time of issue. */
    private static final class Chunk {
        final IdcarClient.Batch batch;
        int next;

        Chunk(IdcarClient.Batch batch) {
            this.batch = batch;
        }

        int left() {
            return batch.count() - next;
        }
    }

    private final IdcarClient client;
    final int size;
    final int lowWater;
    private final long maxAgeNanos;
    private final ArrayDeque<Chunk> chunks = new ArrayDeque<>();
    private int buffered;
    private boolean refilling;
    private boolean lastRefillFailed;
    private boolean closed;
    private ThreadPoolExecutor executor;

    Prefetcher(IdcarClient client, int size, int lowWater, long maxAgeNanos) {
        this.client = client;
        this.size = size;
        this.lowWater = lowWater;
        this.maxAgeNanos = maxAgeNanos;
    }

    /** One ID, as {@link #take(int)} hands them out. */
    Id take() {
        return take(1).get(0);
    }

    /**
     * {@code n} IDs in the order the server issued them: buffered ones first; found empty, the
     * buffer is waited for while a refill is in flight, else this caller fetches what it lacks
     * while no refill may start (a fetch past a refill in flight would hand out newer IDs
     * before older ones).
     */
    List<Id> take(int n) {
        List<Id> out = new ArrayList<>(n);
        long directRetry = client.retryDeadlineNanos;
        long end = System.nanoTime() + client.timeoutNanos + client.retryDeadlineNanos + TimeUnit.SECONDS.toNanos(1);
        synchronized (this) {
            boolean waited = false;
            while (true) {
                checkOpen();
                for (Id id = out.size() < n ? poll() : null; id != null; id = out.size() < n ? poll() : null) {
                    out.add(id);
                }
                if (out.size() == n) {
                    maybeRefill();
                    return out;
                }
                if (!refilling) {
                    if (waited && lastRefillFailed) {
                        // the refill already retried until the deadline: one direct try gives
                        // this caller the current error (or its IDs)
                        directRetry = 0;
                    }
                    refilling = true; // this caller fetches: no refill starts meanwhile
                    break;
                }
                long left = end - System.nanoTime();
                if (left <= 0) {
                    throw new IdcarTimeoutException(client.socket() + ": no IDs from the prefetch refill in time");
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(this, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IdcarException("interrupted while waiting for prefetched IDs", e);
                }
                waited = true;
            }
        }
        try {
            for (IdcarClient.Batch b : client.fetch(n - out.size(), directRetry)) {
                for (int k = 0; k < b.count(); k++) {
                    out.add(b.id(k));
                }
            }
            return out;
        } finally {
            synchronized (this) {
                refilling = false;
                notifyAll();
                maybeRefill();
            }
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IdcarException("the idcar client is closed");
        }
    }

    /** The oldest buffered ID that is not too old, or null. Caller holds the monitor. */
    private Id poll() {
        long now = System.nanoTime();
        while (!chunks.isEmpty()) {
            Chunk c = chunks.peekFirst();
            if (now - c.batch.sentAt > maxAgeNanos || c.left() == 0) {
                chunks.pollFirst();
                buffered -= c.left();
                continue;
            }
            Id id = c.batch.id(c.next++);
            buffered--;
            if (c.left() == 0) {
                chunks.pollFirst();
            }
            return id;
        }
        return null;
    }

    /** Starts a background refill when at or below low water and none runs. Caller holds the monitor. */
    private void maybeRefill() {
        if (refilling || closed || buffered > lowWater) {
            return;
        }
        if (executor == null) {
            executor = new ThreadPoolExecutor(1, 1, 10, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
                Thread t = new Thread(r, "idcar-prefetch");
                t.setDaemon(true);
                return t;
            });
            executor.allowCoreThreadTimeOut(true);
        }
        refilling = true;
        try {
            executor.execute(this::refill);
        } catch (RejectedExecutionException e) {
            refilling = false;
        }
    }

    private void refill() {
        boolean failed = false;
        try {
            int want;
            synchronized (this) {
                want = size - buffered;
            }
            while (want > 0) {
                IdcarClient.Batch b = client.call(Math.min(IdcarClient.CHUNK, want), client.retryDeadlineNanos);
                synchronized (this) {
                    if (closed) {
                        return;
                    }
                    chunks.addLast(new Chunk(b));
                    buffered += b.count();
                    notifyAll();
                }
                want -= b.count();
            }
        } catch (RuntimeException e) {
            failed = true; // a caller that finds the buffer empty fetches and sees the error
        } finally {
            synchronized (this) {
                refilling = false;
                lastRefillFailed = failed;
                notifyAll();
            }
        }
    }

    /** Stops the background refill and drops the buffer. */
    void close() {
        ThreadPoolExecutor ex;
        synchronized (this) {
            closed = true;
            chunks.clear();
            buffered = 0;
            ex = executor;
            notifyAll();
        }
        if (ex != null) {
            ex.shutdownNow();
        }
    }

    /** The number of buffered IDs (some may be past the maximum age). */
    synchronized int buffered() {
        return buffered;
    }
}
