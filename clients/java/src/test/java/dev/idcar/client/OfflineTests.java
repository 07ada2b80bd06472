package dev.idcar.client;

import java.time.Duration;
import java.util.Map;
import java.util.Random;

/** Tests that need no server: known answers, text forms, validation. */
final class OfflineTests {
    private OfflineTests() {
    }

    static void testKnownAnswerLable64() {
        Id id = Id.parse("lable64", "7e3c018045810093");
        Map<String, Object> f = Decoder.decode(id);
        Check.equal("lable64", f.get("layout"), "layout");
        Check.equal("7e3c018045810093", f.get("id"), "id");
        Check.equal(1795321511038L, f.get("timestamp_ms"), "timestamp_ms");
        Check.equal(1L, f.get("sequence"), "sequence");
        Check.equal(9L, f.get("generator"), "generator");
        Check.equal(3L, f.get("cluster"), "cluster");
        Check.equal("2026-11-22T04:25:11.038Z", f.get("time"), "time");
        Check.equal(7, f.size(), "number of fields");
        Check.equal("7e3c018045810093", id.toString(), "text form");
        Check.equal(0x7e3c018045810093L, id.asLong(), "asLong");
    }

    static void testKnownAnswerMuid128() {
        Id id = Id.parse("muid128", "5D5EAC793E61F-1BFC71B112D-0000000B");
        Map<String, Object> f = id.decode();
        Check.equal("muid128", f.get("layout"), "layout");
        Check.equal("5D5EAC793E61F-1BFC71B112D-0000000B", f.get("id"), "id");
        Check.equal("5d5eac793e61f1bfc71b112d0000000b", f.get("packed_hex"), "packed_hex");
        Check.equal(1642579230975519L, f.get("timestamp"), "timestamp");
        Check.equal(1923190821165L, f.get("medallion"), "medallion");
        Check.equal(11L, f.get("offset"), "offset");
        Check.equal("2022-01-19T08:00:30.975519Z", f.get("time"), "time");
        Check.equal("5D5EAC793E61F-1BFC71B112D-0000000B", id.toString(), "text form");
        Check.equal(16, id.bytes().length, "width");
        Check.fails(IllegalStateException.class, id::asLong);
    }

    static void testLable64AboveTwoToThe63IsNegativeLong() {
        Id id = Id.ofLong("lable64", 0xc63c018045800093L);
        Check.isTrue(id.asLong() < 0, "negative long");
        Check.equal("c63c018045800093", id.toString(), "text form");
        Check.equal(id, Id.parse("lable64", "c63c018045800093"), "parse");
        Map<String, Object> f = id.decode();
        Check.equal(9L, f.get("generator"), "generator");
        Check.equal(3L, f.get("cluster"), "cluster");
        Check.equal(Long.toUnsignedString(0xc63c018045800093L), id.asBigInteger().toString(), "unsigned value");
    }

    static void testMuidNegativeOffset() {
        Id id = Id.parse("muid128", "5D5EAC793E61F-1BFC71B112D-FFFFFFFF");
        Check.equal(-1L, id.decode().get("offset"), "offset is a signed 32-bit integer");
    }

    static void testTextFormsRoundTrip() {
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
                Check.equal(id, Id.parse(id.layout(), text), "round trip of " + text);
                Check.equal(text, id.decode().get("id").toString(), "decode id of " + text);
            }
        }
        Check.equal(16, Id.of("sno80", new byte[10]).toString().length(), "sno80 text length");
        Check.equal("2222222222222222", Id.of("sno80", new byte[10]).toString(), "sno80 zero");
        Check.equal("AAAAAAAAAA", Id.ofLong("ugd60", 0).toString(), "ugd60 zero");
    }

    static void testDecodeRejectsInvalidIds() {
        Check.fails(IllegalArgumentException.class, () -> Id.ofLong("lable64", 1L << 10).decode());
        Check.fails(IllegalArgumentException.class, () -> Id.ofLong("ugd60", 1L << 60).decode());
        Check.fails(IllegalArgumentException.class, () -> Id.ofLong("si53", 1L << 53).decode());
        Check.fails(IllegalArgumentException.class, () -> Id.of("sno80", new byte[8]));
        Check.fails(IllegalArgumentException.class, () -> Id.parse("lable64", "xyz"));
        Check.fails(IllegalArgumentException.class, () -> Id.parse("muid128", "5D5EAC793E61F"));
    }

    static void testSi53UsesParams() {
        long v = (123456789L << 13) | (5L << 10) | 1000;
        Id id = Id.ofLong("si53", v);
        Map<String, Object> f = Decoder.decode(id, Map.of("mid-bits", "3", "base-clock", "1577836800000"));
        Check.equal(v, f.get("id"), "id is a number");
        Check.equal(123456789L, f.get("MAB"), "MAB");
        Check.equal(5L, f.get("MID"), "MID");
        Check.equal(1000L, f.get("UIN"), "UIN");
        Check.equal(1577836800000L, f.get("base_clock"), "base_clock");
        Check.equal(1577836800000L + 123456789L, f.get("timestamp_ms"), "timestamp_ms");
        Map<String, Object> d = id.decode();
        Check.equal((5L << 10 | 1000) >> 8, d.get("MID"), "MID with the default 5 bits");
    }

    static void testDescribeParsing() {
        Description d = Description.parse(
                "{\"form\":\"dec\",\"layout\":\"si53\",\"params\":{\"base-clock\":\"1577836800000\",\"mid-bits\":\"5\"},\"width\":8}");
        Check.equal("si53", d.layout(), "layout");
        Check.equal(8, d.width(), "width");
        Check.equal("dec", d.form(), "form");
        Check.equal("5", d.params().get("mid-bits"), "mid-bits");
        Check.fails(ProtocolException.class, () -> Description.parse("{\"layout\":\"x\"}"));
        Check.fails(ProtocolException.class, () -> Description.parse("garbage"));
    }

    static void testBuilderValidationAndClose() {
        Check.fails(IllegalArgumentException.class, () -> IdcarClient.builder().prefetch(10).lowWater(10).build());
        Check.fails(IllegalArgumentException.class, () -> IdcarClient.builder().timeout(Duration.ZERO));
        Check.fails(IllegalArgumentException.class, () -> IdcarClient.builder().retryDeadline(Duration.ofSeconds(-1)));
        Check.fails(IllegalArgumentException.class, () -> IdcarClient.builder().prefetch(-1));
        String env = System.getenv("IDCAR_SOCKET");
        Check.equal(env != null && !env.isEmpty() ? env : "/tmp/idcar.sock",
                IdcarClient.builder().build().socket().toString(), "default socket");
        IdcarClient c = IdcarClient.builder().socket("/nonexistent/x.sock").prefetch(10).build();
        c.close();
        c.close();
        IdcarException e = Check.fails(IdcarException.class, c::next);
        Check.isTrue(e.getMessage().contains("closed"), "closed client: " + e.getMessage());
    }
}
