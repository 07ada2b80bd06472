package dev.idcar.client;

/**
 * Anything that went wrong talking to idcar. Unchecked; the subclasses tell the cases apart:
 * {@link IdcarConnectException}, {@link UnavailableException}, {@link BadRequestException},
 * {@link ProtocolException}, {@link IdcarTimeoutException}.
 */
public class IdcarException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public IdcarException(String message) {
        super(message);
    }

    public IdcarException(String message, Throwable cause) {
        super(message, cause);
    }
}
