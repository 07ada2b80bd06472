package dev.idcar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * uuid7: the known answers of the repository's tests/vectors/uuid7.jsonl (text forms, decode,
 * refusals, java.util.UUID), decode equal to {@code idcar decode --json} for them, and a uuid7
 * server's IDs as UUIDs.
 */
class Uuid7Tests {

    /** The vectors: one JSON object a line, read from the repository (../../ of clients/java). */
    static List<Map<String, Object>> vectors() throws Exception {
        Path p = SourceLauncher.projectDir().resolve("../../tests/vectors/uuid7.jsonl").normalize();
        assertTrue(Files.isRegularFile(p), p + " exists");
        List<Map<String, Object>> out = new ArrayList<>();
        for (String line : Files.readAllLines(p, StandardCharsets.UTF_8)) {
            if (line.isBlank()) {
                continue;
            }
            Object o = Json.parse(line);
            assertTrue(o instanceof Map, "a JSON object: " + line);
            @SuppressWarnings("unchecked")
            Map<String, Object> m = (Map<String, Object>) o;
            out.add(m);
        }
        return out;
    }

    private static List<Map<String, Object>> vectors(String kind) throws Exception {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Map<String, Object> v : vectors()) {
            String k = v.containsKey("error") ? "error" : v.get("time") == null ? "late" : (String) v.get("issuer");
            if (k.equals(kind)) {
                out.add(v);
            }
        }
        assertFalse(out.isEmpty(), "vectors of kind " + kind);
        return out;
    }

    /** The fields decode must give for a vector, as {@code idcar decode --json} prints them. */
    private static Map<String, Object> expected(Map<String, Object> v) {
        Map<String, Object> m = new TreeMap<>();
        m.put("layout", "uuid7");
        m.put("id", v.get("uuid"));
        m.put("hex", v.get("hex"));
        m.put("unix_ts_ms", v.get("unix_ts_ms"));
        m.put("time", v.get("time"));
        m.put("issuer", v.get("issuer"));
        if ("idcar".equals(v.get("issuer"))) {
            for (String k : new String[] {"counter", "cluster", "slot", "random"}) {
                m.put(k, v.get(k));
            }
        }
        return m;
    }

    /** Every text form of a vector parses to the same ID and is written back exactly. */
    private static Id textForms(Map<String, Object> v) {
        String uuid = (String) v.get("uuid");
        String hex = (String) v.get("hex");
        Id id = Id.parse("uuid7", uuid);
        assertEquals("uuid7", id.layout(), "layout");
        assertEquals(16, id.width(), "width");
        assertEquals(uuid, id.toString(), "default text form");
        assertEquals(uuid, id.format("uuid"), "uuid form");
        assertEquals(hex, id.format("hex"), "hex form");
        for (String text : new String[] {uuid.toUpperCase(Locale.ROOT), hex, hex.toUpperCase(Locale.ROOT)}) {
            assertEquals(id, Id.parse("uuid7", text), "parse of " + text);
        }
        assertEquals(id, Decoder.parse("uuid7", "uuid", uuid), "parse as uuid");
        assertEquals(id, Decoder.parse("uuid7", "hex", hex), "parse as hex");
        assertThrows(IllegalArgumentException.class, () -> Decoder.parse("uuid7", "hex", uuid), "uuid text is not hex");
        if (v.containsKey("ulid")) {
            String ulid = (String) v.get("ulid");
            assertEquals(ulid, id.format("ulid"), "ulid form");
            assertEquals(id, Id.parse("uuid7", ulid), "parse of " + ulid);
            assertEquals(id, Id.parse("uuid7", ulid.toLowerCase(Locale.ROOT)), "parse of lower-case " + ulid);
            assertEquals(id, Decoder.parse("uuid7", "ulid", ulid), "parse as ulid");
        }
        if (v.containsKey("check")) {
            assertEquals(v.get("check"), (long) (id.bytes()[15] & 0xFF), "check byte");
        }
        // java.util.UUID agrees: the same 128 bits, version 7, RFC 9562's variant
        UUID u = UUID.fromString(uuid);
        assertEquals(7, u.version(), "version of " + uuid);
        assertEquals(2, u.variant(), "variant of " + uuid);
        assertEquals(u, id.toUuid(), "toUuid of " + uuid);
        assertEquals(uuid, id.toUuid().toString(), "UUID text of " + uuid);
        assertEquals(id, Id.ofUuid(u), "ofUuid of " + uuid);
        return id;
    }

    @Test
    void vectorsIdcar() throws Exception {
        List<Map<String, Object>> vs = vectors("idcar");
        assertTrue(vs.size() >= 9, "idcar vectors: " + vs.size());
        for (Map<String, Object> v : vs) {
            Id id = textForms(v);
            Map<String, Object> f = id.decode();
            assertEquals(expected(v), f, "decode of " + v.get("uuid"));
            assertEquals(10, f.size(), "keys of " + v.get("uuid"));
            assertEquals(f, Decoder.decode(id, Map.of("cluster-id", "0")), "describe params change nothing");
        }
    }

    @Test
    void vectorsOtherIssuer() throws Exception {
        for (Map<String, Object> v : vectors("other")) {
            Id id = textForms(v);
            Map<String, Object> f = id.decode();
            assertEquals(expected(v), f, "decode of " + v.get("uuid"));
            assertEquals(6, f.size(), "keys of another generator's UUIDv7: " + f);
        }
    }

    @Test
    void vectorsAfterYear9999AreRefusedByDecode() throws Exception {
        for (Map<String, Object> v : vectors("late")) {
            Id id = textForms(v); // the text forms still read and write
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, id::decode, "decode of " + v);
            assertTrue(e.getMessage().contains("9999-12-31T23:59:59.999Z"), e.getMessage());
        }
    }

    @Test
    void vectorsRefusedText() throws Exception {
        List<Map<String, Object>> vs = vectors("error");
        assertTrue(vs.size() >= 7, "refused texts: " + vs.size());
        for (Map<String, Object> v : vs) {
            String text = (String) v.get("text");
            String kind = (String) v.get("error");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Id.parse("uuid7", text),
                    "parse of " + text + " (" + v.get("note") + ")");
            String m = e.getMessage();
            assertTrue(m.startsWith("not a uuid7 ID: " + text), m);
            switch (kind) {
                case "wrong_length":
                    assertTrue(m.contains("wrong length"), kind + ": " + m);
                    break;
                case "bad_char":
                    assertTrue(m.contains("bad character"), kind + ": " + m);
                    break;
                case "unrecognised":
                    assertTrue(m.contains("version") || m.contains("variant"), kind + ": " + m);
                    assertFalse(m.contains("wrong length") || m.contains("bad character"), kind + ": " + m);
                    // bytes that are not a UUIDv7 are refused by decode too
                    UUID u = UUID.fromString(text);
                    assertThrows(IllegalArgumentException.class, () -> Id.ofUuid(u).decode(), "decode of " + text);
                    break;
                default:
                    throw new AssertionError("unknown error kind " + kind);
            }
        }
    }

    @Test
    void textFormsRoundTripAndRefuseWhatIsNotAForm() {
        Random r = new Random(9562);
        for (int k = 0; k < 500; k++) {
            byte[] b = new byte[16];
            r.nextBytes(b);
            b[6] = (byte) (0x70 | (b[6] & 0x0F));
            b[8] = (byte) (0x80 | (b[8] & 0x3F));
            Id id = Id.of("uuid7", b);
            for (String form : Decoder.forms("uuid7")) {
                String text = id.format(form);
                assertEquals(id, Id.parse("uuid7", text), form + " round trip of " + text);
                assertEquals(id, Decoder.parse("uuid7", form, text), form + " round trip of " + text);
            }
            assertEquals(id.toString(), id.toUuid().toString(), "UUID text");
            assertEquals(id, Id.ofUuid(id.toUuid()), "UUID round trip");
        }
        assertEquals(List.of("uuid", "hex", "ulid"), Decoder.forms("uuid7"), "uuid7's forms, the default first");
        assertEquals("uuid", Decoder.defaultForm("uuid7"), "default form");
        assertEquals(16, Decoder.width("uuid7"), "width");
        Id id = Id.parse("uuid7", "01a20180-3c7e-74b5-a873-0009a1b2c3ac");
        assertThrows(IllegalArgumentException.class, () -> id.format("b32"), "not a uuid7 form");
        assertThrows(IllegalArgumentException.class, () -> id.format("nope"), "not a form");
        assertThrows(IllegalStateException.class, id::asLong, "16 bytes are not a long");
        assertThrows(IllegalArgumentException.class, () -> Id.of("uuid7", new byte[8]), "8 bytes");
        Id lable = Id.parse("lable64", "7e3c018045810093");
        IllegalStateException e = assertThrows(IllegalStateException.class, lable::toUuid, "lable64 is no UUID");
        assertTrue(e.getMessage().contains("lable64") && e.getMessage().contains("uuid7"), e.getMessage());
        assertThrows(IllegalStateException.class, () -> Id.parse("muid128", "5D5EAC793E61F-1BFC71B112D-0000000B").toUuid());
        assertEquals("7e3c018045810093", lable.format("hex"), "lable64's default form by name");
        assertThrows(IllegalArgumentException.class, () -> lable.format("ulid"), "ulid is uuid7's");
        // shapes that are no form, and characters outside ASCII
        for (String bad : new String[] {"", "01a201803c7e74b5a8730009a1b2c3a", "01a20180-3c7e-74b5-a873-0009a1b2c3a\u0661",
            "01a201803c7e74b5a8730009a1b2c3\uff41c", "01M80R0F3YEJTTGWR016GV5GXI", "01M80R0F3YEJTTGWR016GV5GXU"}) {
            assertThrows(IllegalArgumentException.class, () -> Id.parse("uuid7", bad), "parse of " + bad);
        }
    }

    /** The client's decode equals {@code idcar decode --layout uuid7 --json} for every vector. */
    @Test
    @Timeout(120)
    void vectorsDecodeAsTheCliDecodes() throws Exception {
        for (Map<String, Object> v : vectors()) {
            if (v.containsKey("error") || v.get("time") == null) {
                continue;
            }
            Id id = Id.parse("uuid7", (String) v.get("uuid"));
            assertEquals(ServerProcess.cliDecode("uuid7", id.toString()), id.decode(), "decode of " + id);
            assertEquals(ServerProcess.cliDecode("uuid7", id.format("ulid")), id.decode(), "decode of " + id.format("ulid"));
        }
    }

    /** A uuid7 server's IDs are UUIDs: version 7, variant 2, text equal to the ID's. */
    @Test
    @Timeout(120)
    void serverIdsAreUuids() throws Exception {
        try (ServerProcess s = ServerProcess.start("uuid7"); IdcarClient c = s.client().build()) {
            Description d = c.describe();
            assertEquals("uuid7", d.layout(), "layout");
            assertEquals(16, d.width(), "width");
            assertEquals("uuid", d.form(), "form");
            assertEquals("0", d.params().get("cluster-id"), "params: " + d.params());
            Id id = c.next();
            UUID u = id.toUuid();
            assertEquals(id.toString(), u.toString(), "UUID text is the ID's text");
            assertEquals(7, u.version(), "version");
            assertEquals(2, u.variant(), "variant");
            assertEquals(u, UUID.fromString(id.toString()), "UUID.fromString");
            assertEquals("idcar", c.decode(id).get("issuer"), "issued by idcar");
            UUID next = c.nextUuid();
            assertEquals(7, next.version(), "nextUuid version");
            assertTrue(Id.ofUuid(next).compareTo(id) > 0, "later IDs are greater");
            List<UUID> us = c.uuids(2500); // split into requests of at most 1,000
            assertEquals(2500, us.size(), "uuids(n)");
            Set<UUID> seen = new HashSet<>(List.of(u, next));
            Id prev = Id.ofUuid(next);
            for (UUID x : us) {
                assertTrue(seen.add(x), "duplicate " + x);
                Id xi = Id.ofUuid(x);
                assertTrue(xi.compareTo(prev) > 0, "in order of issue: " + x + " after " + prev);
                assertTrue(xi.toString().compareTo(prev.toString()) > 0, "text sorts as issued: " + x);
                prev = xi;
            }
            assertThrows(IllegalStateException.class, c::nextId, "uuid7 IDs are not longs");
            assertThrows(IllegalArgumentException.class, () -> c.uuids(0));
            try (IdcarClient p = s.client().prefetch(100).build()) {
                UUID a = p.nextUuid();
                UUID b = p.nextUuid();
                assertTrue(Id.ofUuid(b).compareTo(Id.ofUuid(a)) > 0, "prefetched in order");
                assertTrue(seen.add(a) && seen.add(b), "prefetched IDs are new");
            }
        }
        try (ServerProcess s = ServerProcess.start("lable64"); IdcarClient c = s.client().build()) {
            IllegalStateException e = assertThrows(IllegalStateException.class, c::nextUuid);
            assertTrue(e.getMessage().contains("lable64"), e.getMessage());
            assertThrows(IllegalStateException.class, () -> c.uuids(3));
        }
    }
}
