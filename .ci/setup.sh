# Sourced by .ci/up and .ci/test: installs the Debian packages deskgate needs
# when they are missing (idempotent: nothing is fetched when all are there),
# then configures and builds one build directory.
set -euo pipefail

DG_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Build tools and libraries, then what runs inside jails and tests.
DG_PACKAGES=(
  cmake make gcc pkg-config
  libwebsockets-dev libwebsockets-evlib-ev libev-dev libjansson-dev libvncserver-dev libpng-dev libseccomp-dev
  libcriterion-dev libssl-dev libidn2-dev x11proto-dev libcurl4-openssl-dev
  # `deskgate export`: codecs and containers, the overlay; ffmpeg (ffprobe)
  # for its test
  libavcodec-dev libavformat-dev libswscale-dev libavutil-dev libcairo2-dev
  libfontconfig-dev ffmpeg
  tigervnc-standalone-server x11-xkb-utils xkb-data xfonts-base fonts-dejavu-core
  # CJK glyphs in the desktops (Chinese, Japanese, Korean; 1.6 MB, against
  # 56 MB for fonts-noto-cjk)
  fonts-wqy-microhei
  xterm matchbox-window-manager x11-utils chromium
  xvfb xdotool scrot
  # `deskgate vnc`'s test: TigerVNC's viewer under Xvfb, its window read with xwd
  tigervnc-viewer x11-apps
  python3 python3-websockets iproute2 curl openssl ca-certificates nodejs
  clang libclang-rt-dev
  # the balancer of several gateways (deploy/, tests/cluster); the
  # Kubernetes manifests' check reads YAML (tests/deploy)
  haproxy python3-yaml
)

dg_install_missing() {
  local missing=()
  for p in "${DG_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if ((${#missing[@]})); then
    echo "deskgate: installing ${missing[*]}"
    [ "$(id -u)" = 0 ] || { echo "deskgate: run as root to install packages" >&2; exit 1; }
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

# dg_build DIR [cmake options...]
dg_build() {
  local dir=$1; shift
  cmake -S "$DG_ROOT" -B "$DG_ROOT/$dir" "$@" >/dev/null
  cmake --build "$DG_ROOT/$dir" -j"$(nproc)"
}

# The libFuzzer targets (clang, ASan+UBSan) into build-fuzz/: tests/fuzz/run.sh
# and .ci/test.
dg_build_fuzz() {
  dg_build build-fuzz -DDG_FUZZ=ON -DCMAKE_C_COMPILER=clang
}
