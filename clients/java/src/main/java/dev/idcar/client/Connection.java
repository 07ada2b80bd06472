package dev.idcar.client;

import java.io.EOFException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * One connection speaking the binary protocol. Non-blocking channel plus a Selector, so every
 * connect, write and read waits at most {@code timeoutNanos} without progress. Not thread-safe:
 * the client uses it under its lock.
 */
final class Connection implements AutoCloseable {
    static final int MAGIC = 0xD1;
    static final byte[] DESCRIBE = {(byte) MAGIC, 2, 0, 0};
    /** Largest payload accepted in a response (a sane bound: 1,000 IDs are at most 16 KB). */
    static final int MAX_PAYLOAD = 64 * 1024 * 1024;

    /** A response: status, width and payload. */
    static final class Response {
        final int status;
        final int width;
        final byte[] payload;

        Response(int status, int width, byte[] payload) {
            this.status = status;
            this.width = width;
            this.payload = payload;
        }

        String reason() {
            return new String(payload, StandardCharsets.UTF_8).trim();
        }
    }

    /** Connecting failed: the cause is the system's error. */
    static final class ConnectFailure extends IOException {
        private static final long serialVersionUID = 1L;

        ConnectFailure(IOException cause) {
            super(cause.getMessage(), cause);
        }
    }

    private final SocketChannel ch;
    private final Selector sel;
    private final SelectionKey key;
    private final long timeoutNanos;
    private byte[] buf = new byte[16 * 1024];
    private ByteBuffer in = ByteBuffer.wrap(buf);
    private int start;
    /** The server's describe answer, set once on open. */
    Description description;

    private Connection(SocketChannel ch, Selector sel, long timeoutNanos) throws IOException {
        this.ch = ch;
        this.sel = sel;
        this.key = ch.register(sel, 0);
        this.timeoutNanos = timeoutNanos;
    }

    /**
     * Connects and describes. Throws ConnectFailure when the socket cannot be reached, another
     * IOException when the exchange fails, IdcarUnavailableException for a status-2 describe.
     */
    static Connection open(Path path, long timeoutNanos) throws IOException {
        SocketChannel ch = null;
        Selector sel = null;
        try {
            try {
                ch = SocketChannel.open(StandardProtocolFamily.UNIX);
                ch.configureBlocking(false);
                sel = Selector.open();
                if (!ch.connect(UnixDomainSocketAddress.of(path))) {
                    ch.register(sel, SelectionKey.OP_CONNECT);
                    long deadline = System.nanoTime() + timeoutNanos;
                    while (!ch.finishConnect()) {
                        long left = deadline - System.nanoTime();
                        if (left <= 0) {
                            throw new SocketTimeoutException("connect timed out");
                        }
                        sel.select(Math.max(1, left / 1_000_000));
                        sel.selectedKeys().clear();
                        if (Thread.currentThread().isInterrupted()) {
                            throw new InterruptedIOException("interrupted");
                        }
                    }
                    ch.keyFor(sel).cancel();
                    sel.selectNow();
                }
            } catch (InterruptedIOException e) { // includes SocketTimeoutException
                throw e;
            } catch (IOException e) {
                throw new ConnectFailure(e);
            }
            Connection c = new Connection(ch, sel, timeoutNanos);
            Response r = c.exchange(DESCRIBE, 0);
            if (r.status == 2) {
                c.close();
                throw new IdcarUnavailableException(r.reason());
            }
            if (r.status != 0) {
                c.close();
                throw new IdcarProtocolException("describe refused (a server older than describe?): " + r.reason());
            }
            Description d = Description.parse(new String(r.payload, StandardCharsets.UTF_8));
            if (r.width != d.width()) {
                c.close();
                throw new IdcarProtocolException("describe answered width " + r.width + " but described " + d.width());
            }
            c.description = d;
            ch = null; // owned by the connection now
            sel = null;
            return c;
        } finally {
            if (ch != null) {
                closeQuietly(ch);
            }
            if (sel != null) {
                closeQuietly(sel);
            }
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception ignored) {
            // nothing to do
        }
    }

    /** Sends a request and reads its response. expectWidth 0: any width accepted. */
    Response exchange(byte[] frame, int expectWidth) throws IOException {
        write(frame);
        byte[] h = readExact(8);
        int magic = h[0] & 0xFF;
        int status = h[1] & 0xFF;
        int width = h[2] & 0xFF;
        long len = ((h[4] & 0xFFL) << 24) | ((h[5] & 0xFF) << 16) | ((h[6] & 0xFF) << 8) | (h[7] & 0xFF);
        if (magic != MAGIC) {
            throw new IdcarProtocolException(String.format("bad magic byte 0x%02x in a response (not an idcar socket?)", magic));
        }
        if (status > 2) {
            throw new IdcarProtocolException("unknown status " + status + " in a response");
        }
        if (len > MAX_PAYLOAD) {
            throw new IdcarProtocolException("response of " + len + " bytes");
        }
        if (status == 0 && expectWidth > 0) {
            if (width != expectWidth) {
                throw new IdcarProtocolException("response width " + width + ", the server described " + expectWidth);
            }
            if (len % width != 0) {
                throw new IdcarProtocolException("payload of " + len + " bytes is not a multiple of width " + width);
            }
        }
        return new Response(status, width, readExact((int) len));
    }

    private void await(int ops, long deadline) throws IOException {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
            throw new SocketTimeoutException("no answer within " + (timeoutNanos / 1_000_000) + " ms");
        }
        key.interestOps(ops);
        sel.select(Math.max(1, (left + 999_999) / 1_000_000));
        sel.selectedKeys().clear();
        if (Thread.currentThread().isInterrupted()) {
            throw new InterruptedIOException("interrupted");
        }
    }

    private void write(byte[] frame) throws IOException {
        ByteBuffer out = ByteBuffer.wrap(frame);
        long deadline = System.nanoTime() + timeoutNanos;
        while (out.hasRemaining()) {
            if (ch.write(out) > 0) {
                deadline = System.nanoTime() + timeoutNanos;
            } else {
                await(SelectionKey.OP_WRITE, deadline);
            }
        }
    }

    private byte[] readExact(int n) throws IOException {
        long deadline = System.nanoTime() + timeoutNanos;
        while (in.position() - start < n) {
            if (buf.length - start < n) {
                byte[] nb = buf.length >= n ? buf : new byte[Math.max(n, buf.length * 2)];
                int have = in.position() - start;
                System.arraycopy(buf, start, nb, 0, have);
                buf = nb;
                in = ByteBuffer.wrap(buf);
                in.position(have);
                start = 0;
            }
            int r = ch.read(in);
            if (r < 0) {
                throw new EOFException("the server closed the connection");
            } else if (r > 0) {
                deadline = System.nanoTime() + timeoutNanos;
            } else {
                await(SelectionKey.OP_READ, deadline);
            }
        }
        byte[] out = new byte[n];
        System.arraycopy(buf, start, out, 0, n);
        start += n;
        if (start == in.position()) {
            start = 0;
            in.clear();
        }
        return out;
    }

    @Override
    public void close() {
        closeQuietly(sel);
        closeQuietly(ch);
    }
}
