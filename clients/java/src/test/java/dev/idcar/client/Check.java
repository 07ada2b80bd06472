package dev.idcar.client;

import java.util.Objects;

/** Assertions for the tests. */
final class Check {
    private Check() {
    }

    static void isTrue(boolean cond, String what) {
        if (!cond) {
            throw new AssertionError(what);
        }
    }

    static void equal(Object want, Object got, String what) {
        if (!Objects.equals(want, got)) {
            throw new AssertionError(what + ": want <" + want + "> got <" + got + ">");
        }
    }

    interface Body {
        void run() throws Exception;
    }

    /** Runs body, which must throw a {@code type}; returns it. */
    static <T extends Throwable> T fails(Class<T> type, Body body) {
        try {
            body.run();
        } catch (Throwable e) {
            if (type.isInstance(e)) {
                return type.cast(e);
            }
            throw new AssertionError("want " + type.getSimpleName() + ", got " + e, e);
        }
        throw new AssertionError("want " + type.getSimpleName() + ", nothing was thrown");
    }
}
