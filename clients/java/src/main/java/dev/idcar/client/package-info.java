/**
 * The Java client of idcar, a unique-ID sidecar serving IDs over a Unix domain socket.
 *
 * <p>{@link dev.idcar.client.IdcarClient} (thread-safe, {@code AutoCloseable}, built with
 * {@link dev.idcar.client.IdcarClient#builder()}) takes IDs from the server;
 * {@link dev.idcar.client.Id} is one ID (raw bytes, text form, {@code long} for the 8-byte
 * layouts, {@link java.util.UUID} for uuid7); {@link dev.idcar.client.Decoder} gives the fields of every layout, as
 * {@code idcar decode --json} does; {@link dev.idcar.client.Description} is the server's
 * describe answer. Errors are unchecked {@link dev.idcar.client.IdcarException}s.
 */
package dev.idcar.client;
