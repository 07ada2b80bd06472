package dev.idcar.client;

import java.math.BigInteger;
import java.util.Arrays;

/**
 * One ID: its layout and its raw bytes (big-endian, as the server sends them). Immutable.
 * {@link #toString()} is the layout's default text form, as {@code idcar} prints it.
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
     * Parses the layout's default text form (hex, b64, dec, b32, muid).
     *
     * @param layout the layout name
     * @param text the text form, as {@link #toString()} gives it
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
     * @throws IllegalStateException for sno80 and muid128 (10 and 16 bytes)
     */
    public long asLong() {
        if (bytes.length != 8) {
            throw new IllegalStateException(layout + " IDs are " + bytes.length + " bytes, not a long");
        }
        return Decoder.u64(bytes, 0);
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

    /** The layout's default text form: lable64 hex, ugd60 b64, si53 dec, sno80 b32, muid128 muid. */
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
