#!/bin/bash
# Installs the Debian 12 packages sluice needs to build and test, if any is
# missing.  Run as root (or with sudo available).  Idempotent and quiet when
# everything is there.
set -euo pipefail
# libuv1-dev, libhttp-parser-dev, libjansson-dev: `sluice serve`;
# curl, python3: the shell tests (tests/*.sh).
PKGS=(build-essential cmake pkg-config libcmocka-dev libyaml-dev
      libuv1-dev libhttp-parser-dev libjansson-dev curl python3)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
