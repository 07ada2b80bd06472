package dev.idcar.client;

/**
 * The server accepted the connection but did not answer (or read) within the timeout. The
 * message names the socket path. The connection is dropped; the call is not retried.
 */
public class IdcarTimeoutException extends IdcarException {
    private static final long serialVersionUID = 1L;

    /**
     * A timeout.
     *
     * @param message what timed out, naming the socket path
     */
    public IdcarTimeoutException(String message) {
        super(message);
    }
}
