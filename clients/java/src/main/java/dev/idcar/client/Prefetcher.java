package dev.idcar.client;

import java.util.ArrayDeque;
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

    /** One ID: from the buffer, after waiting for a running refill, else fetched directly. */
    Id take() {
        long directRetry = client.retryDeadlineNanos;
        synchronized (this) {
            checkOpen();
            Id id = poll();
            maybeRefill();
            if (id != null) {
                return id;
            }
            if (refilling) {
                long bound = client.timeoutNanos + client.retryDeadlineNanos + TimeUnit.SECONDS.toNanos(1);
                long end = System.nanoTime() + bound;
                while (refilling && buffered == 0 && !closed) {
                    long left = end - System.nanoTime();
                    if (left <= 0) {
                        break;
                    }
                    try {
                        TimeUnit.NANOSECONDS.timedWait(this, left);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IdcarException("interrupted while waiting for prefetched IDs", e);
                    }
                }
                checkOpen();
                id = poll();
                if (id == null && !refilling && lastRefillFailed) {
                    // the refill already retried until the deadline: one direct try gives this
                    // caller the current error (or an ID); the next call starts a new refill
                    directRetry = 0;
                } else {
                    maybeRefill();
                }
                if (id != null) {
                    return id;
                }
            }
        }
        return client.call(1, directRetry).id(0);
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
            failed = true; // callers fetch directly and see the error themselves
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
