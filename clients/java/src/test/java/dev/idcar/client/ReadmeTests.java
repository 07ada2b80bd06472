package dev.idcar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * README.md's example, so the README cannot drift from what works: it starts with the install
 * line (a sh block), and its first java block, run as a single-file program with IDCAR_SOCKET
 * pointing at a real server, prints an ID that server issued on its first line.
 */
class ReadmeTests {

    /** A fenced block: its tag and its text. */
    private static final class Block {
        final String tag;
        final String text;

        Block(String tag, String text) {
            this.tag = tag;
            this.text = text;
        }
    }

    private static List<Block> blocks(String markdown) {
        List<Block> out = new ArrayList<>();
        String tag = null;
        StringBuilder text = new StringBuilder();
        for (String line : markdown.split("\n", -1)) {
            if (tag == null && line.startsWith("```")) {
                tag = line.substring(3).trim();
                text.setLength(0);
            } else if (tag != null && line.trim().equals("```")) {
                out.add(new Block(tag, text.toString()));
                tag = null;
            } else if (tag != null) {
                text.append(line).append('\n');
            }
        }
        return out;
    }

    private static String readme() throws Exception {
        return Files.readString(SourceLauncher.projectDir().resolve("README.md"), StandardCharsets.UTF_8);
    }

    @Test
    void readmeStartsWithTheInstallLine() throws Exception {
        String md = readme();
        assertTrue(md.startsWith("# "), "a title first");
        List<Block> bs = blocks(md);
        assertFalse(bs.isEmpty(), "fenced blocks");
        assertEquals("sh", bs.get(0).tag, "the first block is the install line");
        assertTrue(bs.get(0).text.contains("mvn") && bs.get(0).text.contains("install"), bs.get(0).text);
        String head = md.substring(0, md.indexOf("```sh"));
        assertFalse(head.contains("\n#"), "nothing but the title and a sentence or two before the install line");
    }

    @Test
    @Timeout(120)
    void readmeExampleRunsAgainstARealServer() throws Exception {
        Block example = blocks(readme()).stream().filter(b -> b.tag.equals("java")).findFirst()
                .orElseThrow(() -> new AssertionError("README.md has no ```java block"));
        assertTrue(example.text.lines().count() <= 12, "a short example:\n" + example.text);
        Path dir = Files.createTempDirectory("idcar-java-readme-");
        Path source = dir.resolve("Example.java");
        try (ServerProcess s = ServerProcess.start("lable64")) {
            Files.writeString(source, example.text, StandardCharsets.UTF_8);
            SourceLauncher.Result r = SourceLauncher.run(source, Map.of("IDCAR_SOCKET", s.socket.toString()),
                    Duration.ofSeconds(60));
            assertEquals(0, r.code, r::toString);
            List<String> lines = r.lines();
            assertFalse(lines.isEmpty(), r::toString);
            String first = lines.get(0);
            // an ID of this server: idcar decode accepts it (exit 0) and the client reads it alike
            Map<String, Object> fields = ServerProcess.cliDecode("lable64", first);
            assertEquals(first, fields.get("id"), r::toString);
            assertEquals(fields, Id.parse("lable64", first).decode(), r::toString);
            long issued = (Long) fields.get("timestamp_ms");
            assertTrue(Math.abs(System.currentTimeMillis() - issued) < 120_000, "issued just now: " + fields);
        } finally {
            Files.deleteIfExists(source);
            Files.deleteIfExists(dir);
        }
    }
}
