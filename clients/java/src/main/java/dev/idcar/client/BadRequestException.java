package dev.idcar.client;

/** The server refused the request (status 1). Never retried: asking again will not help. */
public class BadRequestException extends IdcarException {
    private static final long serialVersionUID = 1L;
    private final String reason;

    public BadRequestException(String reason) {
        super("idcar refused the request: " + reason);
        this.reason = reason;
    }

    /** The server's one-line reason. */
    public String reason() {
        return reason;
    }
}
