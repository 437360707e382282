# Sourced by the bootstraps: which Debian packages are missing, and installing them with apt as root.

missing_packages() {  # the given packages dpkg does not have installed, one per line (one dpkg-query for all)
  local installed pkg
  installed=$(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null | awk '/ install ok installed$/ {print $1}')
  for pkg in "$@"; do
    grep -qxF "$pkg" <<<"$installed" || echo "$pkg"
  done
}

can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || echo "apt-get update failed; trying with the cached package lists" >&2
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
