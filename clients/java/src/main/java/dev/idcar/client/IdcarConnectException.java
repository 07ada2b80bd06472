package dev.idcar.client;

import java.nio.file.Path;

/**
 * The socket cannot be reached (missing, connection refused, permission denied) or the
 * connection was lost, still so when the retry deadline passed (at once for permission denied).
 * The message names the socket path and the cause, e.g.
 * {@code /tmp/idcar.sock: cannot connect: No such file or directory}.
 */
public class IdcarConnectException extends IdcarException {
    private static final long serialVersionUID = 1L;
    private final transient Path socket;

    /**
     * A connection failure.
     *
     * @param socket the socket path the client tried
     * @param message what failed; the socket path is put in front of it
     * @param cause the system's error, or null
     */
    public IdcarConnectException(Path socket, String message, Throwable cause) {
        super(socket + ": " + message, cause);
        this.socket = socket;
    }

    /**
     * The socket path the client tried.
     *
     * @return the path
     */
    public Path socket() {
        return socket;
    }
}
