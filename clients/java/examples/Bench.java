// bench --socket S --seconds T: sequential next() calls (every layout) for T seconds without
// prefetch, then T seconds with prefetch 1000; prints "single <IDs/s>" and "prefetch <IDs/s>".
// A single-file program (JDK 17+ source launcher):
//
//   mvn package   # in clients/java, once
//   java -cp target/idcar-client-0.2.0.jar examples/Bench.java --socket /tmp/idcar.sock --seconds 3

import dev.idcar.client.IdcarClient;

public final class Bench {
    private Bench() {
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

    private static void run(String[] args) {
        String socket = null;
        double seconds = 3;
        for (int i = 0; i < args.length; i += 2) {
            switch (args[i]) {
                case "--socket":
                    socket = value(args, i);
                    break;
                case "--seconds":
                    try {
                        seconds = Double.parseDouble(value(args, i));
                    } catch (NumberFormatException e) {
                        throw new IllegalArgumentException("--seconds must be a number");
                    }
                    if (!(seconds > 0)) {
                        throw new IllegalArgumentException("--seconds must be positive");
                    }
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + args[i]
                            + " (usage: bench --socket S --seconds T)");
            }
        }
        System.out.println("single " + rate(socket, 0, seconds));
        System.out.println("prefetch " + rate(socket, 1000, seconds));
    }

    private static long rate(String socket, int prefetch, double seconds) {
        IdcarClient.Builder b = IdcarClient.builder().prefetch(prefetch);
        if (socket != null) {
            b.socket(socket);
        }
        try (IdcarClient c = b.build()) {
            long sink = 0;
            long warm = System.nanoTime() + 200_000_000L; // JIT warm-up, not counted
            while (System.nanoTime() < warm) {
                sink ^= c.next().bytes()[0];
            }
            long n = 0;
            long start = System.nanoTime();
            long end = start + (long) (seconds * 1e9);
            long now = start;
            while (now < end) {
                for (int i = 0; i < 16; i++) {
                    sink ^= c.next().bytes()[0];
                }
                n += 16;
                now = System.nanoTime();
            }
            if (sink == 42) {
                System.err.print("");
            }
            return Math.round(n / ((now - start) / 1e9));
        }
    }
}
