#!/usr/bin/env bash
# Installs Debian packages the tests or the pipeline need, when missing.
# Usage: scripts/system-deps.sh kcat [zookeeper] [postgresql] [java] [nftables] [chromium]
set -euo pipefail

# Spark 4 needs Java 17 or newer
java_ok() {
    command -v java >/dev/null 2>&1 || return 1
    local major
    major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)
    [ -n "$major" ] && [ "$major" -ge 17 ]
}

# the server binaries (initdb, pg_ctl) that millrace.testing.postgres runs
pg_ok() {
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1
}

missing=()
for dep in "$@"; do
    case "$dep" in
        kcat)       command -v kcat >/dev/null 2>&1 || missing+=(kcat) ;;
        java)       java_ok || missing+=(default-jre-headless) ;;
        zookeeper)  [ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper) ;;
        postgresql) pg_ok || missing+=(postgresql) ;;
        # nft: the network partitions of millrace.testing.faults.network
        nftables)   { command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ]; } || missing+=(nftables) ;;
        # the console's browser tests: Playwright drives Debian's Chromium (no download)
        chromium)   [ -x /usr/bin/chromium ] || missing+=(chromium) ;;
        *) echo "system-deps: unknown dependency $dep" >&2; exit 2 ;;
    esac
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "system-deps: need root to install: ${missing[*]}" >&2; exit 1
    fi
fi
echo "== installing Debian packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
