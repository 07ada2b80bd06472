# Two stages: build with the Rust toolchain, run on a slim Debian with only the binary.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --bin idcar

FROM debian:bookworm-slim
COPY --from=build /src/target/release/idcar /usr/local/bin/idcar
# The socket and the state file live on volumes shared with (or outliving) the app.
ENV IDCAR_SOCKET=/run/idcar/idcar.sock \
    IDCAR_STATE_FILE=/var/lib/idcar/idcar.state \
    IDCAR_ADMIN_ADDR=0.0.0.0:9750
RUN mkdir -p /run/idcar /var/lib/idcar
EXPOSE 9750
ENTRYPOINT ["idcar"]
CMD ["serve"]
