package dev.idcar.client;

/**
 * The server cannot issue IDs now (status 2: no lease held yet, time mark reached, request
 * timed out), still so when the retry deadline passed. {@link #reason()} is the server's reason.
 */
public class IdcarUnavailableException extends IdcarException {
    private static final long serialVersionUID = 1L;
    /** The server's one-line reason. */
    private final String reason;

    /**
     * An "unavailable" answer.
     *
     * @param reason the server's one-line reason
     */
    public IdcarUnavailableException(String reason) {
        super("idcar unavailable: " + reason);
        this.reason = reason;
    }

    /**
     * The server's one-line reason.
     *
     * @return the reason, e.g. {@code no lease is held}
     */
    public String reason() {
        return reason;
    }
}
