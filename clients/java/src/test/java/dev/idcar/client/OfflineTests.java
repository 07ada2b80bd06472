package dev.idcar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Tests that need no server: known answers, text forms, validation. */
class OfflineTests {

    @Test
    void knownAnswerLable64() {
        Id id = Id.parse("lable64", "7e3c018045810093");
        Map<String, Object> f = Decoder.decode(id);
        assertEquals("lable64", f.get("layout"), "layout");
        assertEquals("7e3c018045810093", f.get("id"), "id");
        assertEquals(1795321511038L, f.get("timestamp_ms"), "timestamp_ms");
        assertEquals(1L, f.get("sequence"), "sequence");
        assertEquals(9L, f.get("generator"), "generator");
        assertEquals(3L, f.get("cluster"), "cluster");
        assertEquals("2026-11-22T04:25:11.038Z", f.get("time"), "time");
        assertEquals(7, f.size(), "number of fields");
        assertEquals("7e3c018045810093", id.toString(), "text form");
        assertEquals(0x7e3c018045810093L, id.asLong(), "asLong");
    }

    @Test
    void knownAnswerMuid128() {
        Id id = Id.parse("muid128", "5D5EAC793E61F-1BFC71B112D-0000000B");
        Map<String, Object> f = id.decode();
        assertEquals("muid128", f.get("layout"), "layout");
        assertEquals("5D5EAC793E61F-1BFC71B112D-0000000B", f.get("id"), "id");
        assertEquals("5d5eac793e61f1bfc71b112d0000000b", f.get("packed_hex"), "packed_hex");
        assertEquals(1642579230975519L, f.get("timestamp"), "timestamp");
        assertEquals(1923190821165L, f.get("medallion"), "medallion");
        assertEquals(11L, f.get("offset"), "offset");
        assertEquals("2022-01-19T08:00:30.975519Z", f.get("time"), "time");
        assertEquals("5D5EAC793E61F-1BFC71B112D-0000000B", id.toString(), "text form");
        assertEquals(16, id.bytes().length, "width");
        assertThrows(IllegalStateException.class, id::asLong);
    }

    @Test
    void lable64AboveTwoToThe63IsNegativeLong() {
        Id id = Id.ofLong("lable64", 0xc63c018045800093L);
        assertTrue(id.asLong() < 0, "negative long");
        assertEquals("c63c018045800093", id.toString(), "text form");
        assertEquals(id, Id.parse("lable64", "c63c018045800093"), "parse");
        Map<String, Object> f = id.decode();
        assertEquals(9L, f.get("generator"), "generator");
        assertEquals(3L, f.get("cluster"), "cluster");
        assertEquals(Long.toUnsignedString(0xc63c018045800093L), id.asBigInteger().toString(), "unsigned value");
    }

    @Test
    void muidNegativeOffset() {
        Id id = Id.parse("muid128", "5D5EAC793E61F-1BFC71B112D-FFFFFFFF");
        assertEquals(-1L, id.decode().get("offset"), "offset is a signed 32-bit integer");
    }

    @Test
    void textFormsRoundTrip() {
        Random r = new Random(7);
        for (int k = 0; k < 500; k++) {
            byte[] b10 = new byte[10];
            byte[] b16 = new byte[16];
            r.nextBytes(b10);
            r.nextBytes(b16);
            long ugd = r.nextLong() >>> 4;
            long si = r.nextLong() >>> 11;
            for (Id id : new Id[] {Id.of("sno80", b10), Id.of("muid128", b16), Id.ofLong("ugd60", ugd),
                Id.ofLong("si53", si), Id.ofLong("lable64", r.nextLong() & ~(63L << 10))}) {
                String text = id.toString();
                assertEquals(id, Id.parse(id.layout(), text), "round trip of " + text);
                assertEquals(text, id.decode().get("id").toString(), "decode id of " + text);
            }
        }
        assertEquals(16, Id.of("sno80", new byte[10]).toString().length(), "sno80 text length");
        assertEquals("2222222222222222", Id.of("sno80", new byte[10]).toString(), "sno80 zero");
        assertEquals("AAAAAAAAAA", Id.ofLong("ugd60", 0).toString(), "ugd60 zero");
    }

    @Test
    void decodeRejectsInvalidIds() {
        assertThrows(IllegalArgumentException.class, () -> Id.ofLong("lable64", 1L << 10).decode());
        assertThrows(IllegalArgumentException.class, () -> Id.ofLong("ugd60", 1L << 60).decode());
        assertThrows(IllegalArgumentException.class, () -> Id.ofLong("si53", 1L << 53).decode());
        assertThrows(IllegalArgumentException.class, () -> Id.of("sno80", new byte[8]));
        assertThrows(IllegalArgumentException.class, () -> Id.parse("lable64", "xyz"));
        assertThrows(IllegalArgumentException.class, () -> Id.parse("muid128", "5D5EAC793E61F"));
    }

    @Test
    void si53UsesParams() {
        long v = (123456789L << 13) | (5L << 10) | 1000;
        Id id = Id.ofLong("si53", v);
        Map<String, Object> f = Decoder.decode(id, Map.of("mid-bits", "3", "base-clock", "1577836800000"));
        assertEquals(v, f.get("id"), "id is a number");
        assertEquals(123456789L, f.get("MAB"), "MAB");
        assertEquals(5L, f.get("MID"), "MID");
        assertEquals(1000L, f.get("UIN"), "UIN");
        assertEquals(1577836800000L, f.get("base_clock"), "base_clock");
        assertEquals(1577836800000L + 123456789L, f.get("timestamp_ms"), "timestamp_ms");
        Map<String, Object> d = id.decode();
        assertEquals((5L << 10 | 1000) >> 8, d.get("MID"), "MID with the default 5 bits");
    }

    @Test
    void describeParsing() {
        Description d = Description.parse(
                "{\"form\":\"dec\",\"layout\":\"si53\",\"params\":{\"base-clock\":\"1577836800000\",\"mid-bits\":\"5\"},\"width\":8}");
        assertEquals("si53", d.layout(), "layout");
        assertEquals(8, d.width(), "width");
        assertEquals("dec", d.form(), "form");
        assertEquals("5", d.params().get("mid-bits"), "mid-bits");
        assertThrows(IdcarProtocolException.class, () -> Description.parse("{\"layout\":\"x\"}"));
        assertThrows(IdcarProtocolException.class, () -> Description.parse("garbage"));
    }

    @Test
    void builderValidationAndClose() {
        assertThrows(IllegalArgumentException.class, () -> IdcarClient.builder().prefetch(10).lowWater(10).build());
        assertThrows(IllegalArgumentException.class, () -> IdcarClient.builder().timeout(Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> IdcarClient.builder().retryDeadline(Duration.ofSeconds(-1)));
        assertThrows(IllegalArgumentException.class, () -> IdcarClient.builder().prefetch(-1));
        String env = System.getenv("IDCAR_SOCKET");
        assertEquals(env != null && !env.isEmpty() ? env : "/tmp/idcar.sock",
                IdcarClient.builder().build().socket().toString(), "default socket");
        IdcarClient c = IdcarClient.builder().socket("/nonexistent/x.sock").prefetch(10).build();
        c.close();
        c.close();
        IdcarException e = assertThrows(IdcarException.class, c::next);
        assertTrue(e.getMessage().contains("closed"), "closed client: " + e.getMessage());
    }

    @Test
    void exceptionsFormOneHierarchyApartFromJavaNet() {
        for (Class<?> c : new Class<?>[] {IdcarConnectException.class, IdcarUnavailableException.class,
            IdcarBadRequestException.class, IdcarProtocolException.class, IdcarTimeoutException.class}) {
            assertTrue(IdcarException.class.isAssignableFrom(c), c + " extends IdcarException");
            assertTrue(c.getSimpleName().startsWith("Idcar"), c + " cannot be confused with java.net's");
        }
        assertTrue(RuntimeException.class.isAssignableFrom(IdcarException.class), "unchecked");
        assertEquals("no lease is held", new IdcarUnavailableException("no lease is held").reason());
        assertEquals("too many", new IdcarBadRequestException("too many").reason());
    }

    @Test
    void jsonReaderReadsWhatDecodePrints() {
        Object o = Json.parse("{\"a\":\"x\\\"y\\u00e9\",\"n\":-12,\"big\":18446744073709551615,\"l\":[1,true,null]}");
        assertTrue(o instanceof Map, "an object");
        Map<?, ?> m = (Map<?, ?>) o;
        assertEquals("x\"y\u00e9", m.get("a"));
        assertEquals(-12L, m.get("n"));
        assertEquals(new java.math.BigInteger("18446744073709551615"), m.get("big"));
        assertEquals(java.util.Arrays.asList(1L, true, null), m.get("l"));
        assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"a\":1} x"));
    }
}
