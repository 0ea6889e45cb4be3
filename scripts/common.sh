# Shared by run-app.sh and run-tests.sh: install what is missing, then build.
# Sourced, not run.

set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${CLUSTERSCOPE_BUILD_DIR:-$ROOT/build}"

# Debian/Ubuntu packages the build, the tests and the app need.
PACKAGES=(
  cmake ninja-build g++ ccache pkg-config
  nlohmann-json3-dev libsqlite3-dev libcli11-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev qt6-svg-dev libqt6svgwidgets6 libqt6sql6-sqlite
  libgl1-mesa-dev fonts-dejavu-core xvfb xauth
  zlib1g-dev
  python3-torch  # bench/cpu_engine_vs_pytorch.py: the CPU engine's peer
)

install_dependencies() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "== dependencies: all installed"
    return
  fi
  echo "== installing: ${missing[*]}"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {
  # CMake looks for nvcc the same way: CUDACXX, /usr/local/cuda, then PATH.
  if [ -n "${CUDACXX:-}" ] || [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc > /dev/null; then
    echo "== CUDA toolkit found (nvcc): the CUDA engine is built"
  else
    echo "== no CUDA toolkit (no nvcc in CUDACXX, /usr/local/cuda or on PATH): building without the CUDA engine"
  fi
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
  cmake --build "$BUILD_DIR" --parallel "$(nproc)"
}
