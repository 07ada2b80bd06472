package dev.idcar.client;

/**
 * Anything that went wrong talking to idcar. Unchecked; the subclasses tell the cases apart:
 * <ul>
 *   <li>{@link IdcarConnectException}: the socket cannot be reached, or the connection was lost;</li>
 *   <li>{@link IdcarUnavailableException}: the server answered "unavailable" (status 2);</li>
 *   <li>{@link IdcarBadRequestException}: the server refused the request (status 1);</li>
 *   <li>{@link IdcarProtocolException}: the answer is not the idcar protocol;</li>
 *   <li>{@link IdcarTimeoutException}: the server did not answer within the timeout.</li>
 * </ul>
 * An {@code IdcarException} itself (no subclass) is thrown for a closed client and for an
 * interrupted call.
 */
public class IdcarException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /**
     * An error with a message.
     *
     * @param message what went wrong
     */
    public IdcarException(String message) {
        super(message);
    }

    /**
     * An error with a message and its cause.
     *
     * @param message what went wrong
     * @param cause the underlying error, or null
     */
    public IdcarException(String message, Throwable cause) {
        super(message, cause);
    }
}
