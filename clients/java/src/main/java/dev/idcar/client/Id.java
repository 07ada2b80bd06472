package dev.idcar.client;

import java.math.BigInteger;
import java.util.Arrays;
import java.util.UUID;

/**
 * One ID: its layout and its raw bytes (big-endian, as the server sends them). Immutable.
 * {@link #toString()} is the layout's default text form, as {@code idcar} prints it;
 * {@link #asLong()} gives the IDs of the 8-byte layouts as a {@code long}, {@link #toUuid()}
 * those of uuid7 as a {@link UUID}.
 */
public final class Id implements Comparable<Id> {
    private final String layout;
    private final byte[] bytes;

    private Id(String layout, byte[] bytes) {
        this.layout = layout;
        this.bytes = bytes;
    }

    /**
     * An ID from its raw bytes.
     *
     * @param layout the layout name
     * @param bytes the raw bytes, big-endian (copied)
     * @return the ID
     * @throws IllegalArgumentException when the width does not match the layout
     */
    public static Id of(String layout, byte[] bytes) {
        return ofOwned(layout, bytes.clone());
    }

    static Id ofOwned(String layout, byte[] bytes) {
        int want = Decoder.width(layout);
        if (want > 0 && bytes.length != want) {
            throw new IllegalArgumentException(layout + " IDs are " + want + " bytes, got " + bytes.length);
        }
        return new Id(layout, bytes);
    }

    /**
     * An ID of an 8-byte layout (lable64, ugd60, si53) from its 64 bits.
     *
     * @param layout the layout name
     * @param value the 64 bits, as {@link IdcarClient#nextId()} gives them
     * @return the ID
     * @throws IllegalArgumentException when the layout's IDs are not 8 bytes
     */
    public static Id ofLong(String layout, long value) {
        byte[] b = new byte[8];
        for (int i = 7; i >= 0; i--) {
            b[i] = (byte) value;
            value >>>= 8;
        }
        return ofOwned(layout, b);
    }

    /**
     * A uuid7 ID from a {@link UUID}: its 128 bits, most significant first. Any UUID is taken
     * ({@link #decode()} refuses one that is not version 7 with RFC 9562's variant).
     *
     * @param uuid the UUID
     * @return the ID, of layout {@code uuid7}
     */
    public static Id ofUuid(UUID uuid) {
        long hi = uuid.getMostSignificantBits();
        long lo = uuid.getLeastSignificantBits();
        byte[] b = new byte[16];
        for (int i = 0; i < 8; i++) {
            b[i] = (byte) (hi >>> (56 - 8 * i));
            b[8 + i] = (byte) (lo >>> (56 - 8 * i));
        }
        return new Id("uuid7", b);
    }

    /**
     * Parses an ID's text: the layout's default text form (lable64 hex, ugd60 b64, si53 dec,
     * sno80 b32, muid128 muid, uuid7 uuid); for uuid7 also its {@code hex} and {@code ulid}
     * forms, told apart by their shape, in either case. uuid7 text must be a version-7 UUID with
     * RFC 9562's variant.
     *
     * @param layout the layout name
     * @param text the text form, as {@link #toString()} or {@link #format(String)} gives it
     * @return the ID
     * @throws IllegalArgumentException when {@code text} is not an ID of {@code layout}
     */
    public static Id parse(String layout, String text) {
        return Decoder.parse(layout, text);
    }

    /**
     * The layout this ID belongs to.
     *
     * @return the layout name, e.g. {@code lable64}
     */
    public String layout() {
        return layout;
    }

    /**
     * The ID's width in bytes.
     *
     * @return 8, 10 or 16
     */
    public int width() {
        return bytes.length;
    }

    /**
     * The raw bytes, big-endian, as the server sent them.
     *
     * @return a copy
     */
    public byte[] bytes() {
        return bytes.clone();
    }

    byte[] raw() {
        return bytes;
    }

    /**
     * The 64 bits of an 8-byte ID as a {@code long}. lable64 IDs at or above 2^63 are negative:
     * the same 64 bits ({@link Long#toUnsignedString(long)} shows the unsigned value).
     *
     * @return the 64 bits
     * @throws IllegalStateException for sno80, muid128 and uuid7 (10 and 16 bytes)
     */
    public long asLong() {
        if (bytes.length != 8) {
            throw new IllegalStateException(layout + " IDs are " + bytes.length + " bytes, not a long");
        }
        return Decoder.u64(bytes, 0);
    }

    /**
     * A uuid7 ID as a {@link UUID}: the same 128 bits, so its {@link UUID#toString()} is the
     * ID's text form, {@link UUID#version()} is 7 and {@link UUID#variant()} is 2.
     *
     * @return the UUID
     * @throws IllegalStateException when the ID's layout is not uuid7
     */
    public UUID toUuid() {
        if (!layout.equals("uuid7")) {
            throw new IllegalStateException("layout " + layout + " IDs are not UUIDs (only uuid7's are)");
        }
        return new UUID(Decoder.u64(bytes, 0), Decoder.u64(bytes, 8));
    }

    /**
     * The ID as an unsigned integer (any layout).
     *
     * @return the non-negative value of the bytes
     */
    public BigInteger asBigInteger() {
        return new BigInteger(1, bytes);
    }

    /**
     * Decodes the ID with the layout's default parameters; see {@link Decoder#decode(Id, java.util.Map)}
     * (and {@link IdcarClient#decode(Id)}, which uses the server's parameters).
     *
     * @return the fields, as {@code idcar decode --json} prints them
     * @throws IllegalArgumentException when the bytes are not a valid ID of the layout
     */
    public java.util.Map<String, Object> decode() {
        return Decoder.decode(this);
    }

    /**
     * The ID in one of its layout's text forms, as {@code idcar} prints it: for uuid7
     * {@code uuid} (the default: lower-case 8-4-4-4-12 hex digits), {@code hex} (32 lower-case
     * hex digits) or {@code ulid} (26 characters of Crockford base32); for the other layouts
     * their default form (see {@link Decoder#forms(String)}).
     *
     * @param form the text form's name
     * @return the text
     * @throws IllegalArgumentException when {@code form} is not one of the layout's forms
     */
    public String format(String form) {
        return Decoder.text(layout, form, bytes);
    }

    /**
     * The layout's default text form: lable64 hex, ugd60 b64, si53 dec, sno80 b32, muid128 muid,
     * uuid7 uuid.
     */
    @Override
    public String toString() {
        return Decoder.text(layout, bytes);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Id && ((Id) o).layout.equals(layout) && Arrays.equals(((Id) o).bytes, bytes);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(bytes);
    }

    /** Orders by the raw bytes as unsigned big-endian numbers (then by layout name). */
    @Override
    public int compareTo(Id o) {
        int c = Arrays.compareUnsigned(bytes, o.bytes);
        return c != 0 ? c : layout.compareTo(o.layout);
    }
}
