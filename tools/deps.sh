#!/usr/bin/env bash
# Installs graft's Debian build dependencies when they are missing. As root it runs apt-get;
# otherwise it prints the command to run and fails, so nothing half-configures.
set -euo pipefail
pkgs=(meson ninja-build g++ pkg-config catch2 libcli11-dev libdnnl-dev zlib1g-dev nlohmann-json3-dev libdw-dev libopenmpi-dev openmpi-bin)
[ "${GRAFT_WITH_DATA:-0}" = 1 ] && pkgs+=(dataset-fashion-mnist fortunes fortunes-min)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = 0 ]; then
  echo "graft: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "graft: missing packages. Run as root:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
