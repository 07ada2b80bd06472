package dev.idcar.client;

import java.math.BigInteger;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The test's own reader for the flat JSON objects {@code idcar decode --json} prints: string
 * and integer values (integers as Long, or BigInteger beyond the long range).
 */
final class MiniJson {
    private final String s;
    private int i;

    private MiniJson(String s) {
        this.s = s.trim();
    }

    static Map<String, Object> parseObject(String text) {
        MiniJson p = new MiniJson(text);
        Map<String, Object> m = p.object();
        if (p.i != p.s.length()) {
            throw new IllegalArgumentException("trailing text in " + text);
        }
        return m;
    }

    private void skip() {
        while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
            i++;
        }
    }

    private void expect(char c) {
        skip();
        if (i >= s.length() || s.charAt(i) != c) {
            throw new IllegalArgumentException("expected '" + c + "' at " + i + " in " + s);
        }
        i++;
    }

    private Map<String, Object> object() {
        Map<String, Object> m = new LinkedHashMap<>();
        expect('{');
        skip();
        if (s.charAt(i) == '}') {
            i++;
            return m;
        }
        while (true) {
            skip();
            String k = string();
            expect(':');
            skip();
            char c = s.charAt(i);
            Object v = c == '"' ? string() : integer();
            if (m.put(k, v) != null) {
                throw new IllegalArgumentException("key " + k + " twice");
            }
            skip();
            if (s.charAt(i) == ',') {
                i++;
                continue;
            }
            expect('}');
            return m;
        }
    }

    private String string() {
        if (s.charAt(i) != '"') {
            throw new IllegalArgumentException("expected a string at " + i);
        }
        i++;
        StringBuilder b = new StringBuilder();
        while (s.charAt(i) != '"') {
            char c = s.charAt(i++);
            if (c == '\\') {
                char e = s.charAt(i++);
                if (e == 'u') {
                    b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    i += 4;
                } else {
                    b.append(e == 'n' ? '\n' : e == 't' ? '\t' : e);
                }
            } else {
                b.append(c);
            }
        }
        i++;
        return b.toString();
    }

    private Object integer() {
        int start = i;
        if (s.charAt(i) == '-') {
            i++;
        }
        while (i < s.length() && Character.isDigit(s.charAt(i))) {
            i++;
        }
        BigInteger v = new BigInteger(s.substring(start, i));
        return v.bitLength() < 64 ? (Object) v.longValue() : v;
    }
}
