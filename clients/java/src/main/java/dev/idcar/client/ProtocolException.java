package dev.idcar.client;

/**
 * The answer is not the idcar binary protocol (wrong magic byte, unknown status, a width that is
 * not the described one, a length that does not fit). The connection is dropped.
 */
public class ProtocolException extends IdcarException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String message) {
        super(message);
    }
}
