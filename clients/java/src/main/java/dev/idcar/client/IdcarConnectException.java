package dev.idcar.client;

import java.nio.file.Path;

/**
 * The socket cannot be reached (missing, connection refused, permission denied) or the
 * connection was lost, still so when the retry deadline passed. The message names the socket
 * path and the cause.
 */
public class IdcarConnectException extends IdcarException {
    private static final long serialVersionUID = 1L;
    private final transient Path socket;

    public IdcarConnectException(Path socket, String message, Throwable cause) {
        super(socket + ": " + message, cause);
        this.socket = socket;
    }

    /** The socket path the client tried. */
    public Path socket() {
        return socket;
    }
}
