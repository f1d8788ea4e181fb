#!/usr/bin/env bash
# gpured.sh: the two commands of the README. Installs what is missing (Debian 12), builds, then
#   ./gpured.sh serve [gpured serve options]   starts the service (CPU backend without a GPU)
#   ./gpured.sh test                           runs every test (ctest: unit, e2e on SQLite and PostgreSQL,
#                                              gpu-labelled, fuzz), then the unit and CPU e2e suites again
#                                              under ASan+UBSan, and the race-labelled ones under TSan
#   ./gpured.sh build                          only builds (what the Dockerfile runs)
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages the build and tests need (versions checked by CMakeLists.txt's minimums).
# libjs-chart.js and python3-yaml: the dashboard's Chart.js and the OpenAPI spec are embedded at build time.
# libpq-dev: the PostgreSQL store (--store postgresql://...).
PKGS=(build-essential cmake pkg-config curl python3 libmicrohttpd-dev libjansson-dev libsqlite3-dev libcmocka-dev
      libssl-dev libjs-chart.js python3-yaml libpq-dev)
# Only the tests need these: the dashboard runs in headless Chromium; schemathesis goes in a venv;
# NumPy writes the .npy files uploaded and reads the downloads back; postgresql: the suites' own
# throwaway cluster (initdb + pg_ctl, tests/pg_cluster.py) for the e2e.pg copies; prometheus: a real
# Prometheus scrapes the test server and promtool tests the alert rules; python3-requests,
# python3-aiohttp (AsyncClient) and flit (flit_core): the Python client (clients/python) is
# tested, and built and installed offline into a venv.
# podman, runc and debootstrap: the image is built from the Dockerfile on a Debian base made here and
# run (tests/container); docker-compose: its schema validates deploy/compose.yaml.
TEST_PKGS=(chromium chromium-driver python3-selenium python3-venv python3-numpy clang libclang-rt-14-dev
           postgresql prometheus python3-requests python3-aiohttp flit
           podman runc debootstrap docker-compose)

install_missing() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "gpured.sh: installing ${missing[*]}" >&2
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() { # [extra cmake arguments]
  local args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "$@")
  # CUDA for sm_90 only (the H100/H200 gpured runs on); without nvcc the build is CPU-only.
  if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
    args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  fi
  args+=(-DCMAKE_CUDA_ARCHITECTURES=90)
  if [ "${CI:-}" = "true" ]; then
    args+=(-DGPURED_WERROR=ON)
  fi
  cmake -S . -B "${BUILD_DIR:-build}" "${args[@]}" >/dev/null
  cmake --build "${BUILD_DIR:-build}" -j"$(nproc)"
}

case "${1:-}" in
  serve)
    shift
    install_missing "${PKGS[@]}"
    build
    exec "${BUILD_DIR:-build}/gpured" serve "$@"
    ;;
  build)
    install_missing "${PKGS[@]}"
    build
    ;;
  test)
    install_missing "${PKGS[@]}" "${TEST_PKGS[@]}"
    build
    (cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)" --timeout 900)
    # every unit and CPU end-to-end suite once more, built with AddressSanitizer and UBSan: a report
    # (a leak at exit included) stops the program, and the suite fails
    BUILD_DIR=${BUILD_DIR:-build}-asan build -DGPURED_CUDA=OFF -DGPURED_SANITIZE=address,undefined
    (cd "${BUILD_DIR:-build}-asan" &&
      ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        ctest --output-on-failure -j"$(nproc)" --timeout 900 -L 'unit|cpu' -LE fuzz)
    # the suites where threads meet (label race) once more with ThreadSanitizer: a report stops the
    # program. OpenMP stays single-threaded there: libgomp is not instrumented, and its own
    # synchronisation would read as races in the CPU backend's loops.
    BUILD_DIR=${BUILD_DIR:-build}-tsan build -DGPURED_CUDA=OFF -DGPURED_SANITIZE=thread
    cd "${BUILD_DIR:-build}-tsan"
    OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      exec ctest --output-on-failure -j"$(nproc)" --timeout 900 -L race
    ;;
  *)
    echo "usage: ./gpured.sh serve [options] | ./gpured.sh test | ./gpured.sh build" >&2
    exit 2
    ;;
esac
