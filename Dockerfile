# Dockerfile: gpured in a container. The build stage runs ./gpured.sh build (the script CI tests)
# in BUILD_IMAGE; the runtime stage runs that binary in RUNTIME_IMAGE as a non-root user, data on
# /data, bearer tokens from the secret file /run/secrets/gpured-tokens (README: "Run it in a
# container"). By default the bases are NVIDIA's CUDA devel and runtime images (the GPU build):
#   docker build -t gpured .
#   docker run --gpus all -p 127.0.0.1:8080:8080 -v gpured-data:/data \
#     -v "$PWD/deploy/gpured-tokens:/run/secrets/gpured-tokens:ro" gpured
# Any Debian 12 or Ubuntu base works for both: without nvcc the build is CPU-only, and the runtime
# stage installs whatever packages that base names the linked libraries (tests/container does this):
#   docker build --build-arg BUILD_IMAGE=debian:12 --build-arg RUNTIME_IMAGE=debian:12 -t gpured:cpu .
ARG BUILD_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu24.04
ARG RUNTIME_IMAGE=nvidia/cuda:13.0.0-runtime-ubuntu24.04

FROM ${BUILD_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY . .
# The runtime stage installs the packages that own the libraries the binary links (found here,
# so the two stages cannot drift apart).
RUN BUILD_DIR=/src/build ./gpured.sh build \
 && install -D -m 0755 build/gpured /out/gpured \
 && ldd build/gpured | awk '$3 ~ /^\// {print $3}' | xargs -r realpath \
    | while read -r f; do dpkg -S "$f" 2>/dev/null || dpkg -S "${f#/usr}" 2>/dev/null || true; done \
    | cut -d: -f1 | sort -u > /out/runtime-packages \
 && cat /out/runtime-packages

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/runtime-packages /tmp/runtime-packages
# lean: the packages' docs, manuals and translations stay out (their copyright files stay)
RUN printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/locale/*' > /etc/dpkg/dpkg.cfg.d/90-gpured-lean \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive xargs -a /tmp/runtime-packages apt-get install -y --no-install-recommends curl \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin gpured \
 && install -d -o gpured -g gpured -m 0750 /data
COPY --from=build /out/gpured /usr/local/bin/gpured
USER gpured:gpured
# Secure by default: the server listens on every address of the container, so it needs tokens.
# GPURED_TOKENS_FILE names the secret that compose (secrets:), Kubernetes (a Secret volume) or
# `docker run -v FILE:/run/secrets/gpured-tokens:ro` mounts there, readable by uid or gid 10001.
# Without that file gpured refuses to start. To serve with no auth at all, knowingly (a private
# network, an authenticating proxy in front): -e GPURED_TOKENS_FILE= -e GPURED_INSECURE_NO_AUTH=1
# (an empty variable counts as unset; gpured then logs a warning).
ENV GPURED_BIND=0.0.0.0 GPURED_PORT=8080 GPURED_DATA_DIR=/data GPURED_TOKENS_FILE=/run/secrets/gpured-tokens
VOLUME /data
EXPOSE 8080
# /healthz (and /readyz) answer without a token
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
# SIGTERM: the running job finishes, queued jobs stay in the store for the next start
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/gpured", "serve"]
