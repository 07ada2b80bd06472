package dev.idcar.client;

/**
 * The answer is not the idcar binary protocol (wrong magic byte, unknown status, a width that is
 * not the described one, a length that does not fit, a describe answer that is not what a server
 * sends). The connection is dropped; the call is not retried.
 */
public class IdcarProtocolException extends IdcarException {
    private static final long serialVersionUID = 1L;

    /**
     * A protocol error.
     *
     * @param message what was wrong with the answer
     */
    public IdcarProtocolException(String message) {
        super(message);
    }
}
