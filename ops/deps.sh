#!/usr/bin/env bash
# Installs every Debian 12 package folio needs to build, run and test.
# Idempotent: asks dpkg first and runs apt-get (update + install) only for
# what is missing, so a provisioned machine pays nothing.
#   ops/deps.sh             everything: build, run and test
#   ops/deps.sh --service   what building and running the service needs
#                           (no test-only tools fetched: npm for the
#                           browser check)
set -euo pipefail
SERVICE_ONLY=0
[ "${1:-}" = --service ] && SERVICE_ONLY=1

PKGS=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev
  libvulkan-dev glslc spirv-tools mesa-vulkan-drivers vulkan-validationlayers vulkan-tools
  libturbojpeg0-dev libjpeg-turbo-progs libleptonica-dev libtesseract-dev libpng-dev
  tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd fonts-dejavu-core
  fonts-liberation fonts-freefont-ttf
  libpq-dev postgresql postgresql-contrib pgbouncer
  libssl-dev
  libpoppler-glib-dev libseccomp-dev poppler-utils qpdf img2pdf
  python3 iproute2
  libsystemd-dev libmicrohttpd-dev
  help2man lintian
  prometheus chromium-headless-shell nodejs
)

# One dpkg-query for the whole list: a query (and a grep) per package was
# 9 s of a first start on a loaded machine.
declare -A have=()
while IFS=$'\t' read -r name status; do
  [ "$status" = "install ok installed" ] && have[$name]=1
done < <(dpkg-query -W -f='${Package}\t${Status}\n' "${PKGS[@]}" 2>/dev/null || true)
missing=()
for p in "${PKGS[@]}"; do
  [ -n "${have[$p]:-}" ] || missing+=("$p")
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} packages present"
else
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The shader compiler for the cooperative-matrix kernels: Debian 13's shaderc
# in /opt/folio/shaderc-trixie, unless the system glslc is new enough
# (ops/shaderc-trixie.sh says why; CMake finds it there, FOLIO_GLSLC overrides).
$SUDO bash "$(dirname "$0")/shaderc-trixie.sh"

# The browser test's npm packages (playwright-core, which drives Debian's
# Chromium: tests/e2e/test_review.sh), exactly as tests/browser's lockfile
# says, from the npm registry; no browser download.
# The browser check's node modules serve tests only: the run command
# (ops/run-local.sh --service) does not wait for npm.
[ "$SERVICE_ONLY" = 1 ] && exit 0
BROWSER_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
if [ ! -d "$BROWSER_DIR/node_modules/playwright-core" ]; then
  echo "deps: npm ci in $BROWSER_DIR"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$BROWSER_DIR" --no-audit --no-fund --loglevel=error
fi
