#!/usr/bin/env bash
# An S3-compatible server for the S3 remote's tests: moto's server mode
# (from PyPI, installed once into target/s3deps), speaking the S3 protocol
# over HTTP on 127.0.0.1 at a free port, its data in memory.
#
#   eval "$(scripts/s3-server.sh start)"   # exports VITGRAPH_S3_ENDPOINT,
#                                          # VITGRAPH_S3_PID, VITGRAPH_S3_PYTHONPATH
#   scripts/s3-server.sh stop              # ends the server started above
#
# The tests create their own buckets; any access key works.
set -euo pipefail
cd "$(dirname "$0")/.."
deps="$(pwd)/${CARGO_TARGET_DIR:-target}/s3deps"
case "${1:-}" in
start)
    if ! PYTHONPATH="$deps" python3 -c "import moto.server, flask, flask_cors, boto3" 2>/dev/null; then
        python3 -m pip install --quiet --disable-pip-version-check --target "$deps" \
            moto flask flask-cors 2>&1 | grep -v -i "warning\|dependency conflicts\|requires\|incompatible" >&2 || true
        PYTHONPATH="$deps" python3 -c "import moto.server, flask, flask_cors, boto3" \
            || { echo "scripts/s3-server.sh: moto could not be installed into $deps (pip install --target)" >&2; exit 1; }
    fi
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    log="${TMPDIR:-/tmp}/vitgraph-s3-server-$port.log"
    PYTHONPATH="$deps" nohup python3 -m moto.server -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
        if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/moto-api/')" 2>/dev/null; then
            echo "export VITGRAPH_S3_ENDPOINT=http://127.0.0.1:$port VITGRAPH_S3_PID=$pid VITGRAPH_S3_PYTHONPATH=$deps"
            exit 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "scripts/s3-server.sh: the server did not start; its log, $log:" >&2
    cat "$log" >&2
    exit 1
    ;;
stop)
    [ -n "${VITGRAPH_S3_PID:-}" ] && kill "$VITGRAPH_S3_PID" 2>/dev/null || true
    ;;
*)
    echo "usage: scripts/s3-server.sh start|stop" >&2
    exit 2
    ;;
esac
