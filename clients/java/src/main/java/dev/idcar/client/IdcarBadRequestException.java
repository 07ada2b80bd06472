package dev.idcar.client;

/**
 * The server refused the request (status 1, bad request), e.g. a count above its
 * {@code --max-batch}. Never retried: asking again will not help. {@link #reason()} is the
 * server's reason.
 */
public class IdcarBadRequestException extends IdcarException {
    private static final long serialVersionUID = 1L;
    /** The server's one-line reason. */
    private final String reason;

    /**
     * A refusal.
     *
     * @param reason the server's one-line reason
     */
    public IdcarBadRequestException(String reason) {
        super("idcar refused the request: " + reason);
        this.reason = reason;
    }

    /**
     * The server's one-line reason.
     *
     * @return the reason, e.g. {@code count 20000 is above --max-batch 10000}
     */
    public String reason() {
        return reason;
    }
}
