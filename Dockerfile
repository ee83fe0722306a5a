# Metronome in a container: `docker build -t metronome .`, then for example
#   docker run --rm --network host --cap-add SYS_NICE --cap-add IPC_LOCK \
#     --ulimit rtprio=99 --ulimit memlock=-1 metronome serve --rtsp 0.0.0.0:8554
# The capabilities and limits are what the pacing threads need for real-time scheduling and
# locked memory; without them it still runs and says what it could not get.
FROM rust:1-bookworm AS build
# nasm: openh264 builds its fast assembly with it (without, it silently builds slower code).
# FFmpeg's libraries (decoding what viewers received, encoding the VBR ladder), and what the
# binding's generator needs to read their headers (pkg-config, libclang).
RUN apt-get update && apt-get install -y --no-install-recommends nasm \
      libavcodec-dev libavformat-dev libavutil-dev libswscale-dev pkg-config clang libclang-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release -p metronome

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libavcodec59 libavformat59 \
      libavutil57 libswscale6 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/metronome /usr/local/bin/metronome
COPY packaging/metronome.toml /etc/metronome/metronome.toml
EXPOSE 8554/tcp 8089/tcp
ENTRYPOINT ["/usr/local/bin/metronome"]
CMD ["serve", "--config", "/etc/metronome/metronome.toml"]
