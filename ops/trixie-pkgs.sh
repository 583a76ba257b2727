# Sourced by ops/shaderc-trixie.sh and ops/mesa-trixie.sh: Debian 13
# (trixie) packages fetched under a private apt configuration (its own source
# list, lists and cache: the system's sources stay untouched and nothing is
# installed) and unpacked with dpkg -x into one folder, whose programs start
# through that folder's own loader (Debian 12's glibc is older).
#
#   trixie_fetch STAGE "SOURCES_LINES" PKG=VERSION...
#
# Each package is fetched at its pinned version, or at the suite's current one
# when the archive no longer has it (security updates replace runtime
# packages); all of them are unpacked into STAGE (created empty).
trixie_fetch() {
  local stage=$1 sources=$2 work p name
  shift 2
  work=$(mktemp -d)
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
  printf '%s\n' "$sources" >"$work/sources.list"
  local apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
             -o APT::Architecture=amd64 -o APT::Sandbox::User=root -q)
  apt-get "${apt[@]}" update >/dev/null || { rm -rf "$work"; return 1; }
  for p in "$@"; do
    name=${p%%=*}
    if ! (cd "$work/debs" && apt-get "${apt[@]}" download "$p" >/dev/null 2>&1); then
      echo "trixie: $p is no longer in the archive; taking its current version"
      (cd "$work/debs" && apt-get "${apt[@]}" download "$name" >/dev/null) || { rm -rf "$work"; return 1; }
    fi
  done
  rm -rf "$stage"
  mkdir -p "$stage"
  for f in "$work"/debs/*.deb; do dpkg -x "$f" "$stage"; done
  rm -rf "$work"
}
