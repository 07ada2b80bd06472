package dev.idcar.client;

/** The server accepted the connection but did not answer (or read) within the timeout. */
public class IdcarTimeoutException extends IdcarException {
    private static final long serialVersionUID = 1L;

    public IdcarTimeoutException(String message) {
        super(message);
    }
}
