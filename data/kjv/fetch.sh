#!/usr/bin/env bash
# Regenerates kjv.txt.gz from Debian's `bible-kjv` and `bible-kjv-text` packages (4.38): the
# King James Bible, Genesis 1:1 to Revelation 22:21, as the `bible` program prints it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get download bible-kjv bible-kjv-text
for deb in *.deb; do dpkg -x "$deb" root; done
(cd root && ./usr/bin/bible -p usr/lib "Gen1:1-Rev22:21") > kjv.txt
gzip -9 -n -c kjv.txt > "$here/kjv.txt.gz"
