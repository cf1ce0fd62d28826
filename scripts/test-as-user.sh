#!/usr/bin/env bash
# Runs the store and CLI tests, then the quickstart study, as an ordinary
# user. Root ignores file modes, so a store that makes something read-only
# and then writes it works for root and breaks for everyone else; this is
# where that shows. Run it (as root) after scripts/test.sh has built the
# tests: it creates the user (VITGRAPH_TEST_USER, default `vgtest`), lets it
# traverse to the built binaries and libtorch, and runs the built test
# executables and the quickstart (in a clone the user owns) under that user.
# As an ordinary user already, there is nothing more to show: scripts/test.sh
# ran as one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
    echo "test-as-user: already running as $(id -un) (uid $(id -u)); scripts/test.sh covered it"
    exit 0
fi
source scripts/env.sh
user="${VITGRAPH_TEST_USER:-vgtest}"
id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
# The user may pass through (not list) every folder above what it runs.
traverse() {
    local p
    p=$(readlink -f "$1")
    while [ "$p" != / ]; do chmod o+x "$p"; p=$(dirname "$p"); done
}
target="$(readlink -f "${CARGO_TARGET_DIR:-target}")"
traverse "$target/debug"
# The Jupyter kernel the `Notebook` tests run (scripts/test.sh installs it there).
traverse "$target/pydeps"
# The S3 remote's tests: a server of their own, boto3 from moto's folder.
s3_server=$(scripts/s3-server.sh start)
eval "$s3_server"
trap 'scripts/s3-server.sh stop' EXIT
[ -d "$target/s3deps" ] && traverse "$target/s3deps"
[ -n "${LIBTORCH:-}" ] && traverse "$LIBTORCH/lib"
traverse "$(dirname "$(readlink -f "$(command -v python3)")")"
traverse "$PWD/../shared" 2>/dev/null || true
bin="$target/debug"
as_user() {
    runuser -u "$user" -- env -i HOME="$home" USER="$user" PATH="$PATH" \
        LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" TMPDIR=/tmp NO_COLOR=1 \
        VITGRAPH_LEAN_EXE="$bin/vitgraph-lean" \
        VITGRAPH_PYDEPS="$target/pydeps" VITGRAPH_REQUIRE_JUPYTER=1 VITGRAPH_REQUIRE_HYDRA=1 \
        VITGRAPH_S3_ENDPOINT="$VITGRAPH_S3_ENDPOINT" VITGRAPH_S3_PYTHONPATH="$VITGRAPH_S3_PYTHONPATH" \
        VITGRAPH_REQUIRE_S3=1 "$@"
}
echo "test-as-user: as $user (uid $(id -u "$user")): $(as_user id)"

# The unit tests (the store's among them) and the CLI tests, as built by scripts/test.sh.
mapfile -t exes < <(cargo test $VITGRAPH_TEST_FEATURES --no-run --lib --test cli --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])')
[ "${#exes[@]}" = 2 ] || { echo "test-as-user: expected 2 test executables, found: ${exes[*]}" >&2; exit 1; }
status=0
for exe in "${exes[@]}"; do
    echo "test-as-user: $(basename "$exe")"
    # The tests read fixtures relative to the repository.
    as_user sh -c "cd '$PWD' && '$exe'" || status=1
done

# The quickstart in a clone the user owns, with the binaries just built.
clone="$home/vitgraph-quickstart"
rm -rf "$clone"
git clone --quiet "$PWD" "$clone"
chown -R "$user": "$clone"
mkdir -p "$clone/.bin"
cp "$bin/vitgraph-lean" "$clone/.bin/vitgraph"
[ -x "$bin/vitgraph-torch" ] && cp "$bin/vitgraph-torch" "$clone/.bin/vitgraph-torch"
chown -R "$user": "$clone/.bin"
echo "test-as-user: the quickstart in $clone"
as_user sh -c "cd '$clone' && VITGRAPH_BIN_DIR='$clone/.bin' scripts/quickstart.sh" || status=1
exit $status
