#!/usr/bin/env bash
# Make sure a ZooKeeper server can be started (kit/localzk.py): Debian's zookeeper package.
# Installs it with apt-get when it is missing and we are root; otherwise says what to do.
set -euo pipefail
if [ -f /usr/share/java/zookeeper.jar ]; then
  exit 0
fi
if ! command -v java >/dev/null 2>&1; then
  echo "ensure_zookeeper: java is missing (ZooKeeper needs Java 11+)" >&2
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing Debian's zookeeper package (jars only; no service is started)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >/dev/null
else
  echo "ensure_zookeeper: no ZooKeeper jars; run 'sudo apt-get install zookeeper' (or pip install pyspark)" >&2
fi
