// fetch --socket S --count N [--prefetch K] [--retry-deadline SECONDS]: prints N IDs, one per
// line, in the server's default text form; on failure one line "error: <reason>" on stderr and
// exit status 1. --socket falls back to IDCAR_SOCKET, then /tmp/idcar.sock; --retry-deadline (a
// decimal number of seconds, default 5; 0: no retry) is how long the client retries while the
// server is unavailable or unreachable. A single-file program (JDK 17+ source launcher):
//
//   mvn package   # in clients/java, once
//   java -cp target/idcar-client-0.2.0.jar examples/Fetch.java --socket /tmp/idcar.sock --count 5

import dev.idcar.client.Id;
import dev.idcar.client.IdcarClient;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

public final class Fetch {
    private Fetch() {
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Exception e) {
            String m = e.getMessage();
            System.err.println("error: " + (m != null ? m : e.toString()).replace('\n', ' '));
            System.exit(1);
        }
    }

    static String value(String[] args, int i) {
        if (i + 1 >= args.length) {
            throw new IllegalArgumentException(args[i] + " needs a value");
        }
        return args[i + 1];
    }

    static int number(String flag, String v, int min) {
        try {
            int n = Integer.parseInt(v);
            if (n < min) {
                throw new NumberFormatException();
            }
            return n;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + " must be an integer of at least " + min + ", got " + v);
        }
    }

    /** A decimal number of seconds (e.g. 0, 2, 0.25), at least 0, to the nanosecond. */
    static Duration seconds(String flag, String v) {
        IllegalArgumentException bad = new IllegalArgumentException(flag
                + " must be a decimal number of seconds of at least 0 (0: no retry), got " + v);
        if (!v.matches("[0-9]+(\\.[0-9]+)?|\\.[0-9]+")) {
            throw bad;
        }
        try {
            long nanos = new BigDecimal(v).movePointRight(9).setScale(0, RoundingMode.CEILING).longValueExact();
            return Duration.ofNanos(nanos);
        } catch (ArithmeticException e) {
            throw bad; // beyond 292 years
        }
    }

    private static void run(String[] args) throws IOException {
        String socket = null;
        int count = 1;
        int prefetch = 0;
        Duration retryDeadline = Duration.ofSeconds(5);
        for (int i = 0; i < args.length; i += 2) {
            switch (args[i]) {
                case "--socket":
                    socket = value(args, i);
                    break;
                case "--count":
                    count = number("--count", value(args, i), 1);
                    break;
                case "--prefetch":
                    prefetch = number("--prefetch", value(args, i), 0);
                    break;
                case "--retry-deadline":
                    retryDeadline = seconds("--retry-deadline", value(args, i));
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]
                            + " (usage: fetch --socket S --count N [--prefetch K] [--retry-deadline SECONDS])");
            }
        }
        IdcarClient.Builder b = IdcarClient.builder().prefetch(prefetch).retryDeadline(retryDeadline);
        if (socket != null) {
            b.socket(socket);
        }
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        try (IdcarClient c = b.build()) {
            if (prefetch > 0) {
                for (int i = 0; i < count; i++) {
                    out.write(c.next().toString());
                    out.write('\n');
                }
            } else {
                for (Id id : c.nextIds(count)) {
                    out.write(id.toString());
                    out.write('\n');
                }
            }
        } finally {
            out.flush();
        }
    }
}
