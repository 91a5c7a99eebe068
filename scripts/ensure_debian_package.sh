#!/usr/bin/env bash
# Make sure a Debian package the tests or the demo need is installed.
#   ensure_debian_package.sh PACKAGE FILE WHAT
# Nothing to do when FILE exists. Otherwise installs PACKAGE with apt-get when we are root,
# else says on stderr how to install it (WHAT says what is missing without it).
# Used by make for `zookeeper` (kit/cluster/zk/server.py runs its jars) and `chromium` (the dashboard's
# browser tests; Playwright's own browser download does not work on these machines).
set -euo pipefail
package=$1 file=$2 what=$3
if [ -e "$file" ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing Debian's $package ($what)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
else
  echo "ensure_debian_package: no $package ($what): run 'sudo apt-get install $package'" >&2
fi
