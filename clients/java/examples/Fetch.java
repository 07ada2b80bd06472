// fetch --socket S --count N [--prefetch K]: prints N IDs, one per line, in the server's default
// text form; on failure one line "error: <reason>" on stderr and exit status 1. --socket falls
// back to IDCAR_SOCKET, then /tmp/idcar.sock. A single-file program (JDK 17+ source launcher):
//
//   mvn package   # in clients/java, once
//   java -cp target/idcar-client-0.2.0.jar examples/Fetch.java --socket /tmp/idcar.sock --count 5

import dev.idcar.client.Id;
import dev.idcar.client.IdcarClient;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;

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

    private static void run(String[] args) throws IOException {
        String socket = null;
        int count = 1;
        int prefetch = 0;
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
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]
                            + " (usage: fetch --socket S --count N [--prefetch K])");
            }
        }
        IdcarClient.Builder b = IdcarClient.builder().prefetch(prefetch);
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
