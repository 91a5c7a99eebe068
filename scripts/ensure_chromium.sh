#!/usr/bin/env bash
# Make sure the dashboard's browser tests have a browser: Debian's chromium (/usr/bin/chromium).
# Playwright drives it through executable_path; Playwright's own browser download does not work
# on these machines, so it is never attempted. Installs with apt-get when missing and we are root;
# otherwise says what to do (the browser tests then skip, naming this script).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing Debian's chromium (headless browser for the dashboard tests)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
else
  echo "ensure_chromium: no chromium; run 'sudo apt-get install chromium' (dashboard browser tests will skip)" >&2
fi
