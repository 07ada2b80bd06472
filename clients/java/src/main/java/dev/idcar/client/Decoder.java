package dev.idcar.client;

import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Text forms and fields of every idcar layout, exactly as {@code idcar decode --json} prints
 * them. Pure functions of an ID's bytes (and, for si53, the pool's parameters); no I/O.
 */
public final class Decoder {
    static final String UGD60_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    static final String SNO80_ALPHABET = "23456789abcdefghijklmnopqrstuvwx";
    /** Crockford's base32 alphabet, of uuid7's {@code ulid} form. */
    static final String CROCKFORD_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    /** ugd60's epoch, Unix seconds (2018-03-01T00:00:00Z). */
    public static final long UGD60_EPOCH_S = 1_519_862_400L;
    /** sno80's epoch, Unix milliseconds (2010-01-01T00:00:00Z). */
    public static final long SNO80_EPOCH_MS = 1_262_304_000_000L;
    /** si53's default base clock, Unix milliseconds (2020-01-01T00:00:00Z). */
    public static final long SI53_DEFAULT_BASE_CLOCK = 1_577_836_800_000L;
    /** si53's default machine-ID bits. */
    public static final int SI53_DEFAULT_MID_BITS = 5;
    /**
     * The last millisecond of a uuid7 ID that decodes (9999-12-31T23:59:59.999Z, the last time
     * RFC 3339 writes); later ones are refused.
     */
    public static final long UUID7_LAST_DECODED_MS = 253_402_300_799_999L;
    /** The multiplier of uuid7's check byte (2^64 divided by the golden ratio, odd). */
    static final long UUID7_CHECK_K = 0x9E37_79B9_7F4A_7C15L;

    private Decoder() {
    }

    /**
     * The width in bytes of a layout's IDs.
     *
     * @param layout a layout name, e.g. {@code lable64}
     * @return 8 (lable64, ugd60, si53), 10 (sno80), 16 (muid128, uuid7), or 0 for a layout this
     *     client does not know
     */
    public static int width(String layout) {
        switch (layout) {
            case "lable64":
            case "ugd60":
            case "si53":
                return 8;
            case "sno80":
                return 10;
            case "muid128":
            case "uuid7":
                return 16;
            default:
                return 0;
        }
    }

    /**
     * The default text form of a layout, as describe names it.
     *
     * @param layout a layout name, e.g. {@code lable64}
     * @return hex, b64, dec, b32, muid or uuid; null for a layout this client does not know
     */
    public static String defaultForm(String layout) {
        switch (layout) {
            case "lable64": return "hex";
            case "ugd60": return "b64";
            case "si53": return "dec";
            case "sno80": return "b32";
            case "muid128": return "muid";
            case "uuid7": return "uuid";
            default: return null;
        }
    }

    static long u64(byte[] b, int off) {
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = v << 8 | (b[off + i] & 0xFF);
        }
        return v;
    }

    private static String hex(byte[] b) {
        StringBuilder s = new StringBuilder(b.length * 2);
        for (byte x : b) {
            s.append(Character.forDigit((x >> 4) & 15, 16)).append(Character.forDigit(x & 15, 16));
        }
        return s.toString();
    }

    /** Bits [from, from+n) of b, most significant bit of b[0] being bit 0. */
    private static int bits(byte[] b, int from, int n) {
        int v = 0;
        for (int i = from; i < from + n; i++) {
            v = v << 1 | ((b[i >> 3] >> (7 - (i & 7))) & 1);
        }
        return v;
    }

    private static String ugd60Text(long s) {
        long v = (Integer.reverse((int) (s >>> 28)) & 0xFFFF_FFFFL) << 28 | (s & ((1L << 28) - 1));
        char[] c = new char[10];
        for (int i = 0; i < 10; i++) {
            c[i] = UGD60_ALPHABET.charAt((int) ((v >>> (54 - 6 * i)) & 63));
        }
        return new String(c);
    }

    private static String sno80Text(byte[] b) {
        char[] c = new char[16];
        for (int i = 0; i < 16; i++) {
            c[i] = SNO80_ALPHABET.charAt(bits(b, 5 * i, 5));
        }
        return new String(c);
    }

    private static String muidText(byte[] b) {
        String h = hex(b).toUpperCase(Locale.ROOT);
        return h.substring(0, 13) + "-" + h.substring(13, 24) + "-" + h.substring(24);
    }

    /** RFC 9562's text: 32 lower-case hex digits in 8-4-4-4-12 groups. */
    private static String uuidText(byte[] b) {
        String h = hex(b);
        return h.substring(0, 8) + "-" + h.substring(8, 12) + "-" + h.substring(12, 16) + "-" + h.substring(16, 20)
                + "-" + h.substring(20);
    }

    /** 26 Crockford base32 characters: the first holds the top 3 bits, the rest 5 each. */
    private static String ulidText(byte[] b) {
        char[] c = new char[26];
        c[0] = CROCKFORD_ALPHABET.charAt(bits(b, 0, 3));
        for (int i = 1; i < 26; i++) {
            c[i] = CROCKFORD_ALPHABET.charAt(bits(b, 5 * i - 2, 5));
        }
        return new String(c);
    }

    /**
     * The text forms of a layout this client writes and reads: the default first.
     *
     * @param layout a layout name, e.g. {@code uuid7}
     * @return uuid7: uuid, hex, ulid; every other known layout: its default form only; empty for
     *     a layout this client does not know
     */
    public static List<String> forms(String layout) {
        if (layout.equals("uuid7")) {
            return List.of("uuid", "hex", "ulid");
        }
        String d = defaultForm(layout);
        return d == null ? List.of() : List.of(d);
    }

    private static void requireForm(String layout, String form) {
        if (!forms(layout).contains(form)) {
            throw new IllegalArgumentException("text form " + form + " of layout " + layout
                    + " is not supported (this client's forms of " + layout + ": " + forms(layout) + ")");
        }
    }

    /**
     * An ID in one of its layout's text forms, as {@code idcar} prints it.
     *
     * @param layout the ID's layout
     * @param form a text form of the layout (see {@link #forms(String)}), e.g. {@code ulid} for
     *     uuid7
     * @param b the ID's raw bytes (big-endian)
     * @return the text form
     * @throws IllegalArgumentException when {@code form} is not one of {@link #forms(String)}
     */
    public static String text(String layout, String form, byte[] b) {
        requireForm(layout, form);
        if (layout.equals("uuid7")) {
            switch (form) {
                case "hex":
                    return hex(b);
                case "ulid":
                    return ulidText(b);
                default:
                    return uuidText(b);
            }
        }
        return text(layout, b);
    }

    /**
     * The default text form of an ID, as {@code idcar} prints it.
     *
     * @param layout the ID's layout
     * @param b the ID's raw bytes (big-endian)
     * @return the text form: lable64 hex, ugd60 b64, si53 decimal, sno80 b32, muid128 muid,
     *     uuid7 uuid (plain hex for a layout this client does not know)
     */
    public static String text(String layout, byte[] b) {
        switch (layout) {
            case "lable64":
                return String.format("%016x", u64(b, 0));
            case "si53":
                return Long.toUnsignedString(u64(b, 0));
            case "ugd60":
                return ugd60Text(u64(b, 0));
            case "sno80":
                return sno80Text(b);
            case "muid128":
                return muidText(b);
            case "uuid7":
                return uuidText(b);
            default:
                return hex(b);
        }
    }

    /** The value of an ASCII hex digit (either case), else -1. */
    private static int hexDigit(char c) {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
            return c - 'A' + 10;
        }
        return -1;
    }

    private static IllegalArgumentException wrongLength(String expected, String text) {
        return new IllegalArgumentException("wrong length: expected " + expected + ", got "
                + text.codePointCount(0, text.length()));
    }

    private static IllegalArgumentException badChar(String text, int pos, String expected) {
        return new IllegalArgumentException("bad character '" + text.charAt(pos) + "' at position " + pos + ": "
                + expected);
    }

    /** Shifts {@code bits} bits ({@code d}, below 2^bits) into the 128-bit value {@code v[0]:v[1]}. */
    private static void push(long[] v, int bits, long d) {
        v[0] = v[0] << bits | v[1] >>> (64 - bits);
        v[1] = v[1] << bits | d;
    }

    private static byte[] bytes128(long[] v) {
        byte[] b = new byte[16];
        for (int i = 0; i < 8; i++) {
            b[i] = (byte) (v[0] >>> (56 - 8 * i));
            b[8 + i] = (byte) (v[1] >>> (56 - 8 * i));
        }
        return b;
    }

    private static byte[] parseUuidText(String text) {
        if (text.length() != 36) {
            throw wrongLength("36 characters (8-4-4-4-12 hex digits)", text);
        }
        long[] v = new long[2];
        for (int i = 0; i < 36; i++) {
            char c = text.charAt(i);
            if (i == 8 || i == 13 || i == 18 || i == 23) {
                if (c != '-') {
                    throw badChar(text, i, "'-' (8-4-4-4-12 hex digits)");
                }
                continue;
            }
            int d = hexDigit(c);
            if (d < 0) {
                throw badChar(text, i, "a hex digit");
            }
            push(v, 4, d);
        }
        return bytes128(v);
    }

    private static byte[] parseHex128(String text) {
        if (text.length() != 32) {
            throw wrongLength("32 hex digits", text);
        }
        long[] v = new long[2];
        for (int i = 0; i < 32; i++) {
            int d = hexDigit(text.charAt(i));
            if (d < 0) {
                throw badChar(text, i, "a hex digit");
            }
            push(v, 4, d);
        }
        return bytes128(v);
    }

    private static byte[] parseUlid(String text) {
        if (text.length() != 26) {
            throw wrongLength("26 Crockford base32 characters", text);
        }
        long[] v = new long[2];
        for (int i = 0; i < 26; i++) {
            char c = text.charAt(i);
            int d = c < 128 ? CROCKFORD_ALPHABET.indexOf(Character.toUpperCase(c)) : -1;
            if (d < 0 || (i == 0 && d > 7)) {
                throw badChar(text, i, i == 0 ? "0-7 (26 characters hold 130 bits; a UUID has 128)"
                        : "a Crockford base32 digit (0-9, A-Z without I, L, O, U)");
            }
            push(v, 5, d);
        }
        return bytes128(v);
    }

    /** Whether the 16 bytes are a version-7 UUID with RFC 9562's variant (10). */
    private static boolean isUuid7(long hi, long lo) {
        return ((hi >>> 12) & 15) == 7 && (lo >>> 62) == 2;
    }

    /** Refuses bytes that are not a version-7 UUID with the RFC's variant, saying which. */
    private static void requireUuid7(byte[] b) {
        long hi = u64(b, 0);
        long lo = u64(b, 8);
        if (isUuid7(hi, lo)) {
            return;
        }
        long version = (hi >>> 12) & 15;
        if (version != 7) {
            throw new IllegalArgumentException("version " + version
                    + ", not 7 (the 13th hex digit of a UUIDv7 is 7)");
        }
        throw new IllegalArgumentException("variant bits " + ((lo >>> 63) & 1) + ((lo >>> 62) & 1)
                + ", not 10 (the 17th hex digit of a UUIDv7 is 8, 9, a or b)");
    }

    /** The check byte idcar writes into the last byte of its UUIDs. */
    static int uuid7Check(long hi, long lo) {
        return (int) (((hi * UUID7_CHECK_K) ^ (lo >>> 8)) * UUID7_CHECK_K >>> 56);
    }

    private static Id parseUuid7(String form, String text) {
        byte[] b;
        if (form == null) {
            if (text.indexOf('-') >= 0) {
                form = "uuid";
            } else if (text.length() == 32) {
                form = "hex";
            } else if (text.length() == 26) {
                form = "ulid";
            } else {
                throw new IllegalArgumentException("expected 36 characters (8-4-4-4-12 hex digits), 32 hex digits "
                        + "or 26 Crockford base32 characters");
            }
        }
        switch (form) {
            case "hex":
                b = parseHex128(text);
                break;
            case "ulid":
                b = parseUlid(text);
                break;
            default:
                b = parseUuidText(text);
                break;
        }
        requireUuid7(b);
        return Id.ofOwned("uuid7", b);
    }

    /**
     * Parses an ID's text in the given text form of its layout.
     *
     * @param layout the ID's layout
     * @param form one of {@link #forms(String)}, or null to tell it from the text as
     *     {@link #parse(String, String)} does
     * @param text the text, as {@link #text(String, String, byte[])} gives it (hex digits and
     *     Crockford base32 in either case)
     * @return the ID
     * @throws IllegalArgumentException when {@code text} is not an ID of {@code layout} in that
     *     form, or {@code form} is not one of {@link #forms(String)}
     */
    public static Id parse(String layout, String form, String text) {
        if (form != null) {
            requireForm(layout, form);
        }
        if (layout.equals("uuid7")) {
            try {
                return parseUuid7(form, text);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("not a uuid7 ID: " + text + " (" + e.getMessage() + ")", e);
            }
        }
        return parse(layout, text);
    }

    /**
     * Parses an ID's text: the layout's default text form, and for uuid7 every form of
     * {@link #forms(String)} (text with a {@code -} is {@code uuid}, 32 characters {@code hex},
     * 26 {@code ulid}; either case). A uuid7 ID must be a version-7 UUID with RFC 9562's variant.
     *
     * @param layout the ID's layout
     * @param text the text form, as {@link #text(String, byte[])} gives it
     * @return the ID
     * @throws IllegalArgumentException when {@code text} is not an ID of {@code layout}
     */
    public static Id parse(String layout, String text) {
        if (layout.equals("uuid7")) {
            return parse(layout, null, text);
        }
        try {
            switch (layout) {
                case "lable64":
                    if (text.length() != 16) {
                        throw new IllegalArgumentException("16 hex digits expected");
                    }
                    return Id.ofLong(layout, Long.parseUnsignedLong(text, 16));
                case "si53":
                    return Id.ofLong(layout, Long.parseLong(text));
                case "ugd60": {
                    if (text.length() != 10) {
                        throw new IllegalArgumentException("10 characters expected");
                    }
                    long v = 0;
                    for (int i = 0; i < 10; i++) {
                        int d = UGD60_ALPHABET.indexOf(text.charAt(i));
                        if (d < 0) {
                            throw new IllegalArgumentException("bad character " + text.charAt(i));
                        }
                        v = v << 6 | d;
                    }
                    long ts = Integer.reverse((int) (v >>> 28)) & 0xFFFF_FFFFL;
                    return Id.ofLong(layout, ts << 28 | (v & ((1L << 28) - 1)));
                }
                case "sno80": {
                    if (text.length() != 16) {
                        throw new IllegalArgumentException("16 characters expected");
                    }
                    byte[] b = new byte[10];
                    for (int i = 0; i < 16; i++) {
                        int d = SNO80_ALPHABET.indexOf(text.charAt(i));
                        if (d < 0) {
                            throw new IllegalArgumentException("bad character " + text.charAt(i));
                        }
                        for (int k = 0; k < 5; k++) {
                            if (((d >> (4 - k)) & 1) != 0) {
                                int bit = 5 * i + k;
                                b[bit >> 3] |= (byte) (0x80 >> (bit & 7));
                            }
                        }
                    }
                    return Id.ofOwned(layout, b);
                }
                case "muid128": {
                    String h = text.replace("-", "");
                    if (h.length() != 32) {
                        throw new IllegalArgumentException("32 hex digits expected");
                    }
                    byte[] b = new byte[16];
                    for (int i = 0; i < 16; i++) {
                        b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
                    }
                    return Id.ofOwned(layout, b);
                }
                default:
                    throw new IllegalArgumentException("unknown layout");
            }
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("not a " + layout + " ID: " + text + " (" + e.getMessage() + ")", e);
        }
    }

    /** RFC 3339 UTC with milliseconds, e.g. {@code 2026-11-22T04:25:11.038Z}. */
    static String timeMillis(long ms) {
        LocalDateTime t = LocalDateTime.ofEpochSecond(Math.floorDiv(ms, 1000L), 0, ZoneOffset.UTC);
        return String.format(Locale.ROOT, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.getYear(), t.getMonthValue(),
                t.getDayOfMonth(), t.getHour(), t.getMinute(), t.getSecond(), Math.floorMod(ms, 1000L));
    }

    /** RFC 3339 UTC with microseconds, e.g. {@code 2022-01-19T08:00:30.975519Z}. */
    static String timeMicros(long us) {
        LocalDateTime t = LocalDateTime.ofEpochSecond(Math.floorDiv(us, 1_000_000L), 0, ZoneOffset.UTC);
        return String.format(Locale.ROOT, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", t.getYear(), t.getMonthValue(),
                t.getDayOfMonth(), t.getHour(), t.getMinute(), t.getSecond(), Math.floorMod(us, 1_000_000L));
    }

    /**
     * {@link #decode(Id, Map)} with the layout's default parameters.
     *
     * @param id the ID
     * @return the fields, as {@code idcar decode --json} prints them
     * @throws IllegalArgumentException when the bytes are not a valid ID of the layout
     */
    public static Map<String, Object> decode(Id id) {
        return decode(id, Collections.emptyMap());
    }

    /**
     * The fields of an ID: the same keys and values as {@code idcar decode --json} (integers as
     * {@link Long}, the rest as strings), in a read-only map sorted by key. {@code params} are the
     * describe parameters; only si53 uses them ({@code base-clock}, {@code mid-bits}). A uuid7 ID
     * is refused unless it is a version-7 UUID with RFC 9562's variant and a time up to
     * 9999-12-31T23:59:59.999Z; its {@code issuer} is {@code idcar} when its check byte is
     * idcar's (then with {@code counter}, {@code cluster}, {@code slot}, {@code random}), else
     * {@code other} (another generator's UUIDv7: its time only).
     *
     * @param id the ID
     * @param params the server's parameters, from {@link Description#params()}
     * @return the fields, keys sorted
     * @throws IllegalArgumentException when the bytes are not a valid ID of the layout
     */
    public static Map<String, Object> decode(Id id, Map<String, String> params) {
        byte[] b = id.raw();
        String layout = id.layout();
        Map<String, Object> m = new TreeMap<>();
        m.put("layout", layout);
        switch (layout) {
            case "lable64": {
                long u = u64(b, 0);
                long reserved = (u >>> 10) & 63;
                if (reserved != 0) {
                    throw new IllegalArgumentException("not a lable64 ID: reserved bits are " + reserved + ", not zero");
                }
                long ms = Long.reverse(u & ~((1L << 22) - 1));
                m.put("id", text(layout, b));
                m.put("timestamp_ms", ms);
                m.put("sequence", (u >>> 16) & 63);
                m.put("generator", (u >>> 4) & 63);
                m.put("cluster", u & 15);
                m.put("time", timeMillis(ms));
                break;
            }
            case "ugd60": {
                long s = u64(b, 0);
                if ((s >>> 60) != 0) {
                    throw new IllegalArgumentException("not a ugd60 ID: ugd60 IDs have 60 bits");
                }
                long ts = s >>> 28;
                m.put("id", text(layout, b));
                m.put("storage_hex", String.format("%015x", s));
                m.put("timestamp_s", ts);
                m.put("worker", (s >>> 19) & 511);
                m.put("seq", (s >>> 9) & 1023);
                m.put("random", s & 511);
                m.put("time", timeMillis((UGD60_EPOCH_S + ts) * 1000L));
                break;
            }
            case "si53": {
                long v = u64(b, 0);
                if ((v >>> 53) != 0) {
                    throw new IllegalArgumentException("not a si53 ID: si53 IDs are below 2^53");
                }
                long base = params.containsKey("base-clock") ? Long.parseLong(params.get("base-clock")) : SI53_DEFAULT_BASE_CLOCK;
                int midBits = params.containsKey("mid-bits") ? Integer.parseInt(params.get("mid-bits")) : SI53_DEFAULT_MID_BITS;
                if (midBits < 0 || midBits > 13) {
                    throw new IllegalArgumentException("mid-bits " + midBits + " is not in 0..13");
                }
                int uinBits = 13 - midBits;
                long mab = v >>> 13;
                m.put("id", v);
                m.put("MAB", mab);
                m.put("MID", (v >>> uinBits) & ((1L << midBits) - 1));
                m.put("UIN", v & ((1L << uinBits) - 1));
                m.put("base_clock", base);
                m.put("timestamp_ms", base + mab);
                m.put("time", timeMillis(base + mab));
                break;
            }
            case "sno80": {
                long head = u64(b, 0);
                long units = head >>> 25;
                long unixMs = SNO80_EPOCH_MS + units * 4;
                m.put("id", text(layout, b));
                m.put("bytes_hex", hex(b));
                m.put("units", units);
                m.put("tick", (head >>> 24) & 1);
                m.put("meta", (head >>> 16) & 255);
                m.put("partition", head & 0xFFFF);
                m.put("partition_bytes_hex", String.format("%04x", head & 0xFFFF));
                m.put("sequence", (long) ((b[8] & 0xFF) << 8 | (b[9] & 0xFF)));
                m.put("unix_ms", unixMs);
                m.put("time", timeMillis(unixMs));
                break;
            }
            case "muid128": {
                long hi = u64(b, 0);
                long lo = u64(b, 8);
                long ts = hi >>> 12;
                m.put("id", text(layout, b));
                m.put("packed_hex", hex(b));
                m.put("timestamp", ts);
                m.put("medallion", (hi & 0xFFF) << 32 | (lo >>> 32));
                m.put("offset", (long) (int) lo);
                m.put("time", timeMicros(ts));
                break;
            }
            case "uuid7": {
                try {
                    requireUuid7(b);
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("not a uuid7 ID: " + e.getMessage(), e);
                }
                long hi = u64(b, 0);
                long lo = u64(b, 8);
                long ms = hi >>> 16;
                if (ms > UUID7_LAST_DECODED_MS) {
                    throw new IllegalArgumentException("not a uuid7 ID that decodes: unix_ts_ms " + ms
                            + " is after 9999-12-31T23:59:59.999Z, the last time RFC 3339 writes (max "
                            + UUID7_LAST_DECODED_MS + ")");
                }
                m.put("id", uuidText(b));
                m.put("hex", hex(b));
                m.put("unix_ts_ms", ms);
                m.put("time", timeMillis(ms));
                if (uuid7Check(hi, lo) == (int) (lo & 0xFF)) {
                    m.put("issuer", "idcar");
                    m.put("counter", (hi & 4095) << 10 | ((lo >>> 52) & 1023));
                    m.put("cluster", (lo >>> 48) & 15);
                    m.put("slot", (lo >>> 32) & 0xFFFF);
                    m.put("random", (lo >>> 8) & 0xFF_FFFF);
                } else {
                    m.put("issuer", "other");
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown layout " + layout);
        }
        return Collections.unmodifiableMap(m);
    }
}
