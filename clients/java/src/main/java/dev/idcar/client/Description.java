package dev.idcar.client;

import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;

/**
 * What a server told about itself in its describe answer: the layout, the ID width in bytes, the
 * default text form and every parameter that shapes its IDs (flag names without dashes, values
 * as text), e.g. {@code si53}, 8, {@code dec}, {@code {base-clock=1577836800000, mid-bits=5}}.
 */
public final class Description {
    private final String layout;
    private final int width;
    private final String form;
    private final Map<String, String> params;

    /**
     * A description; {@link IdcarClient#describe()} gives the server's.
     *
     * @param layout the layout name
     * @param width bytes per ID
     * @param form the default text form
     * @param params the layout's parameters (copied)
     */
    public Description(String layout, int width, String form, Map<String, String> params) {
        this.layout = layout;
        this.width = width;
        this.form = form;
        this.params = Collections.unmodifiableMap(new TreeMap<>(params));
    }

    /** Parses a describe payload; IdcarProtocolException when it is not what a server sends. */
    static Description parse(String json) {
        try {
            Object o = Json.parse(json);
            if (!(o instanceof Map)) {
                throw new IllegalArgumentException("not an object");
            }
            Map<?, ?> m = (Map<?, ?>) o;
            Object layout = m.get("layout");
            Object width = m.get("width");
            if (!(layout instanceof String) || !(width instanceof Long)) {
                throw new IllegalArgumentException("no layout or width");
            }
            long w = (Long) width;
            if (w < 1 || w > 64) {
                throw new IllegalArgumentException("width " + w);
            }
            Object form = m.get("form");
            Map<String, String> params = new TreeMap<>();
            Object p = m.get("params");
            if (p instanceof Map) {
                for (Map.Entry<?, ?> e : ((Map<?, ?>) p).entrySet()) {
                    params.put(String.valueOf(e.getKey()), String.valueOf(e.getValue()));
                }
            }
            return new Description((String) layout, (int) w, form instanceof String ? (String) form : "", params);
        } catch (IllegalArgumentException e) {
            throw new IdcarProtocolException("bad describe answer (" + e.getMessage() + "): " + json);
        }
    }

    /**
     * The layout.
     *
     * @return lable64, ugd60, si53, sno80, muid128 or uuid7
     */
    public String layout() {
        return layout;
    }

    /**
     * Bytes per ID.
     *
     * @return 8 for lable64, ugd60, si53; 10 for sno80; 16 for muid128 and uuid7
     */
    public int width() {
        return width;
    }

    /**
     * The default text form.
     *
     * @return hex, b64, dec, b32, muid or uuid
     */
    public String form() {
        return form;
    }

    /**
     * The layout's parameters, flag names without dashes and values as text.
     *
     * @return a read-only map, e.g. {@code mid-bits} and {@code base-clock} for si53
     */
    public Map<String, String> params() {
        return params;
    }

    @Override
    public String toString() {
        return "Description[layout=" + layout + ", width=" + width + ", form=" + form + ", params=" + params + "]";
    }
}
