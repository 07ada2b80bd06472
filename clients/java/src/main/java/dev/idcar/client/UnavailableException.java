package dev.idcar.client;

/**
 * The server cannot issue IDs now (status 2: no lease held yet, time mark reached, request
 * timed out), still so when the retry deadline passed. {@link #reason()} is the server's reason.
 */
public class UnavailableException extends IdcarException {
    private static final long serialVersionUID = 1L;
    private final String reason;

    public UnavailableException(String reason) {
        super("idcar unavailable: " + reason);
        this.reason = reason;
    }

    /** The server's one-line reason, e.g. {@code no lease is held}. */
    public String reason() {
        return reason;
    }
}
