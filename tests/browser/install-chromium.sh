#!/usr/bin/env bash
# Headless Chromium from Debian's packages, unpacked into DEST (no root, nothing installed system-wide), for the
# test that opens the MLflow UI link rbench prints (tests/system/test_getting_started.py). DEST/chromium runs it.
# The libraries beyond the base system are those `ldd` found missing on Debian bookworm (amd64); a library still
# missing is named and the script fails. Library folders follow this machine's multiarch triplet.
set -euo pipefail
DEST=${1:?usage: install-chromium.sh DEST}
PACKAGES="chromium chromium-common libopenh264-7 libdouble-conversion3 libharfbuzz-subset0 libpulse0 libflac12
  libopus0 libxnvctrl0 libminizip1 libopenjp2-7 libogg0 libsndfile1 libasyncns0 libmp3lame0 libmpg123-0 libvorbis0a
  libvorbisenc2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# shellcheck disable=SC2086
if ! apt-get download $PACKAGES >apt.log 2>&1; then
  lists="$work/lists"  # no package lists on this machine (or not readable): fetch them into a folder of our own
  mkdir -p "$lists/partial"
  apt-get -o Dir::State::Lists="$lists" update >>apt.log 2>&1
  apt-get -o Dir::State::Lists="$lists" download $PACKAGES >>apt.log 2>&1 || { cat apt.log; exit 1; }
fi
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp/root"
for deb in ./*.deb; do dpkg -x "$deb" "$DEST.tmp/root"; done
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine 2>/dev/null || echo "$(uname -m)-linux-gnu")
libs="$DEST/root/usr/lib/$triplet:$DEST/root/usr/lib/$triplet/pulseaudio:$DEST/root/usr/lib/chromium"
cat >"$DEST.tmp/chromium" <<WRAPPER
#!/bin/sh
LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$DEST/root/usr/lib/chromium/chromium" "\$@"
WRAPPER
chmod +x "$DEST.tmp/chromium"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
missing=$(LD_LIBRARY_PATH="$libs" ldd "$DEST/root/usr/lib/chromium/chromium" | grep "not found" || true)
if [ -n "$missing" ]; then
  echo "install-chromium: libraries missing on this machine:"; echo "$missing"; exit 1
fi
"$DEST/chromium" --version
