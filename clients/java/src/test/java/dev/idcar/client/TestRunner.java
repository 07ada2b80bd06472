package dev.idcar.client;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A tiny test runner: runs every {@code static void test*()} method of the test classes, each
 * in its own thread with a time bound, prints each failure with its stack trace and finally
 * {@code N passed, M failed}; exit status 1 when any failed.
 * Optional arguments: substrings of test names to run only those.
 */
public final class TestRunner {
    private static final Class<?>[] CLASSES = {OfflineTests.class, FakeServerTests.class, ServerTests.class};
    private static final long BOUND_SECONDS = 120;

    private TestRunner() {
    }

    public static void main(String[] args) throws InterruptedException {
        List<Method> tests = new ArrayList<>();
        for (Class<?> c : CLASSES) {
            Method[] ms = c.getDeclaredMethods();
            Arrays.sort(ms, Comparator.comparing(Method::getName));
            for (Method m : ms) {
                if (m.getName().startsWith("test") && Modifier.isStatic(m.getModifiers()) && m.getParameterCount() == 0) {
                    String name = c.getSimpleName() + "." + m.getName();
                    if (args.length == 0 || Arrays.stream(args).anyMatch(name::contains)) {
                        tests.add(m);
                    }
                }
            }
        }
        int passed = 0;
        int failed = 0;
        for (Method m : tests) {
            String name = m.getDeclaringClass().getSimpleName() + "." + m.getName();
            AtomicReference<Throwable> error = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    m.setAccessible(true);
                    m.invoke(null);
                } catch (InvocationTargetException e) {
                    error.set(e.getCause());
                } catch (Throwable e) {
                    error.set(e);
                }
            }, "test-" + m.getName());
            t.setDaemon(true);
            long start = System.nanoTime();
            t.start();
            t.join(TimeUnit.SECONDS.toMillis(BOUND_SECONDS));
            long ms = (System.nanoTime() - start) / 1_000_000;
            if (t.isAlive()) {
                AssertionError e = new AssertionError("timed out after " + BOUND_SECONDS + " s");
                e.setStackTrace(t.getStackTrace());
                error.set(e);
                t.interrupt();
            }
            Throwable e = error.get();
            if (e == null) {
                passed++;
                System.out.println("ok   " + name + " (" + ms + " ms)");
            } else {
                failed++;
                System.out.println("FAIL " + name + " (" + ms + " ms)");
                e.printStackTrace(System.out);
            }
            System.out.flush();
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.out.flush();
        System.exit(failed > 0 ? 1 : 0);
    }
}
