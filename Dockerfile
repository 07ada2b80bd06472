# syntax=docker/dockerfile:1
# idcar's image: built with the Rust toolchain, run on a slim Debian as a non-root user with
# only the stripped binary. Base images are pinned; the build is --locked to Cargo.lock.
FROM rust:1.89.0-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY examples ./examples
# The Cargo workspace's other members: cargo reads their manifests and finds their targets.
# The core, the lease and the generated etcd API are the server's dependencies; the test kit,
# the Rust client and the fault campaign are not built into the image.
COPY crates ./crates
COPY clients/rust/Cargo.toml ./clients/rust/Cargo.toml
COPY clients/rust/src ./clients/rust/src
COPY campaign/Cargo.toml ./campaign/Cargo.toml
COPY campaign/src ./campaign/src
# The commit the image is built from, for `idcar --version` and idcar_build_info (the build
# context has no .git): docker build --build-arg IDCAR_COMMIT=$(git rev-parse --short=12 HEAD)
ARG IDCAR_COMMIT=unknown
ENV CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_STRIP=symbols \
    IDCAR_COMMIT=${IDCAR_COMMIT}
RUN cargo build --release --locked --bin idcar

FROM debian:12.8-slim
COPY --from=build /src/target/release/idcar /usr/local/bin/idcar
# The socket directory belongs to idcar's uid and group, setgid so the socket keeps the
# group: a named volume mounted there starts with this ownership and stays writable for the
# non-root user, and an app container in group 10001 can connect (socket mode 660).
RUN groupadd --system --gid 10001 idcar \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin idcar \
    && mkdir -p /run/idcar /var/lib/idcar \
    && chown 10001:10001 /run/idcar /var/lib/idcar \
    && chmod 2770 /run/idcar \
    && chmod 0700 /var/lib/idcar
ENV IDCAR_SOCKET=/run/idcar/idcar.sock \
    IDCAR_SOCKET_MODE=660 \
    IDCAR_STATE_FILE=/var/lib/idcar/idcar.state \
    IDCAR_ADMIN_ADDR=0.0.0.0:9750
USER 10001:10001
EXPOSE 9750
# Readiness through the admin listener; never consumes an ID.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
    CMD ["idcar", "probe"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["idcar"]
CMD ["serve"]
