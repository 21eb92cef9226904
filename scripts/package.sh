#!/bin/bash
# Builds the Debian package of sluice (scripts/package.sh [--build-dir DIR]
# [--out DIR]): sluice_VERSION_ARCH.deb with the `sluice` binary,
# libsluice (the shared library, its headers and sluice.pc for
# pkg-config), the man pages, /etc/sluice/ (sluice.yaml and the example
# rules) and the hardened systemd unit (packaging/; docs/operations.md).
#
# --build-dir: a build to package (built here if it is not); default
# build-deb, configured RelWithDebInfo.  --out: where the .deb goes
# (default: the current directory).  Debian 12's dpkg-deb and
# dpkg-shlibdeps (dpkg-dev), nothing else: no debian/ directory.  The
# maintainer is $DEBFULLNAME <$DEBEMAIL> when the environment says (as
# Debian's tools read them), else the project's address; lintian finds no
# error in the result (tests/test_package.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-deb"
out="$PWD"
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$(realpath "$2"); shift 2 ;;
    --out) out=$(realpath "$2"); shift 2 ;;
    *) echo "usage: scripts/package.sh [--build-dir DIR] [--out DIR]" >&2; exit 2 ;;
  esac
done

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target sluice sluice_shared man >/dev/null

# The version is written in sluice.h, where CMakeLists.txt reads it.
version=$(sed -n 's/^#define SL_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
  "$root/include/sluice.h" | paste -sd.)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg="$stage/debian/sluice"

DESTDIR="$pkg" cmake --install "$build" --prefix /usr --strip >/dev/null
gzip -9n "$pkg"/usr/share/man/man1/*.1
install -Dm644 "$root/packaging/sluice.service" "$pkg/lib/systemd/system/sluice.service"
install -Dm644 "$root/packaging/sluice.yaml" "$pkg/etc/sluice/sluice.yaml"
for f in "$root"/examples/rules/*.yaml; do
  install -Dm644 "$f" "$pkg/etc/sluice/rules/$(basename "$f")"
done
doc="$pkg/usr/share/doc/sluice"
install -Dm644 "$root/README.md" "$doc/README.md"
install -Dm644 "$root/docs/operations.md" "$doc/operations.md"
maintainer="${DEBFULLNAME:-sluice maintainers} <${DEBEMAIL:-maintainers@sluice-ratelimit.org}>"
year=$(date -u +%Y)
cat >"$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: sluice
Source: the sluice repository this package was built from

Files: *
Copyright: 2026-$year the sluice authors
License: as stated in the sluice repository
EOF
# A native package's changelog: this version, built from the tree.
{
  echo "sluice ($version) unstable; urgency=medium"
  echo
  echo "  * Built from the sluice repository; the changes are its history."
  echo
  echo " -- $maintainer  $(date -u -R)"
} | gzip -9n >"$doc/changelog.gz"
# One package holds the library with its headers and development link,
# for programs that embed it: said to lintian, with the reason.
install -Dm644 /dev/stdin "$pkg/usr/share/lintian/overrides/sluice" <<EOF
# libsluice, its headers, sluice.pc and the libsluice.so link ship with
# the daemon in one package: embedding programs build against it as is.
sluice: link-to-shared-library-in-wrong-package *
sluice: package-name-doesnt-match-sonames libsluice0
EOF

# Depends: the shared libraries the binary and libsluice load, as
# dpkg-shlibdeps finds them (it wants a debian/control to read).
mkdir -p "$pkg/DEBIAN" # dpkg-shlibdeps finds the package's root by it
printf 'Source: sluice\n\nPackage: sluice\nArchitecture: any\n' >"$stage/debian/control"
lib=$(cd "$stage" && echo debian/sluice/usr/lib/*/libsluice.so.0.*)
depends=$(cd "$stage" && dpkg-shlibdeps -O -edebian/sluice/usr/bin/sluice -e"$lib" |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "package.sh: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

install -m755 "$root"/packaging/{postinst,prerm,postrm} "$pkg/DEBIAN/"
# libsluice: other packages' Depends for it (shlibs), and ld.so.cache
# made again when it is installed or removed (the ldconfig trigger).
soname=$(objdump -p "$stage/$lib" | sed -n 's/^ *SONAME *libsluice\.so\.\([0-9]*\)$/\1/p')
echo "libsluice ${soname:?no SONAME in libsluice} sluice (>= $version)" >"$pkg/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$pkg/DEBIAN/triggers"
(cd "$pkg" && find etc -type f | sed 's|^|/|' | sort) >"$pkg/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: sluice
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $depends
Section: net
Priority: optional
Description: exact rate limiter: decision service, reverse proxy and library
 sluice decides, for a key, a cost and a time, whether a request may pass,
 with every classic algorithm exact to the nanosecond. sluice serve is a
 decision service (HTTP, nginx auth_request, envoy's RLS over gRPC, the
 Redis protocol) configured with lyft/ratelimit rules, sharing counters
 through Redis; sluice proxy is a rate-limiting reverse proxy; sluice
 wait paces scripts. libsluice, its header and sluice.pc embed it.
EOF
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' |
  sort -z | xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
deb="$out/sluice_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"
