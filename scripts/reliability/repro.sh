#!/usr/bin/env bash
# The reproductions of the reliability findings F1-F13 (book: "The store's
# guarantees, attacked"), each in a fresh workspace under a temp folder,
# each ending in one line `F<n>: PASS|FAIL <what was seen>`.
# Usage: VG=target/release/vitgraph scripts/reliability/repro.sh [F1 F2 ...]
# Run it as an ordinary user too: root ignores file modes (F1).
set -u
VG=$(readlink -f "${VG:-target/release/vitgraph}")
top=$(mktemp -d "${TMPDIR:-/tmp}/vg-repro.XXXXXX")
trap 'chmod -R u+w "$top" 2>/dev/null; rm -rf "$top"' EXIT
verdict() { printf '%s: %s %s\n' "$1" "$2" "$3"; }
fresh_ws() { rm -rf "$top/$1"; mkdir -p "$top/$1/pipelines" "$top/$1/data"; cd "$top/$1" || exit 1; }

F1() {
    fresh_ws f1; echo one > data/in.txt
    cat > pipelines/p.ron <<'RON'
Pipeline(params: {"v": 1}, stages: {
  "n": Stage(task: Command(run: "echo hello ${v} >&2; cat data/in.txt > ${out}/o.txt",
                           inputs: ["data/in.txt"], outputs: ["o.txt"])),
})
RON
    "$VG" build >/dev/null 2>&1
    "$VG" build -p v=2 >/dev/null 2>&1; b2=$?
    "$VG" verify >/dev/null 2>&1; v=$?
    echo two > data/in.txt
    "$VG" build > b.out 2>&1; b3=$?
    if [ $b2 = 0 ] && [ $v = 0 ] && [ $b3 = 0 ]; then verdict F1 PASS "re-runs exit 0, verify clean (uid $(id -u))"
    else verdict F1 FAIL "build -p v=2 rc=$b2, verify rc=$v, build after input change rc=$b3: $(grep -m1 -i 'error\|denied' b.out)"; fi
}

F2() {
    fresh_ws f2
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: {
  "gen": Stage(task: Command(run: "seq 1 100000 > ${out}/v.txt", outputs: ["v.txt"])),
})
RON
    "$VG" build >/dev/null 2>&1
    h=$("$VG" show gen | awk '$1=="v.txt" && $3=="bytes" {print $4}')
    obj=$(ls cache/objects/${h:0:2}/${h:2}*)
    chmod u+w "$obj"; truncate -s 1000 "$obj"; rm out/gen/v.txt
    "$VG" build > b.out 2>&1; b=$?
    size=$(wc -c < out/gen/v.txt 2>/dev/null || echo 0)
    "$VG" verify >/dev/null 2>&1; v=$?
    if [ "$size" = 588895 ] && [ $b = 0 ] && [ $v = 0 ]; then verdict F2 PASS "damaged object not restored; node re-ran ($(grep -m1 -i damaged b.out)); out/gen/v.txt $size bytes; verify rc=$v"
    else verdict F2 FAIL "build rc=$b, out/gen/v.txt $size bytes (588895 belong), verify rc=$v"; fi
}

F3() {
    fresh_ws f3; echo input-data > data/in.txt
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: {
  "bg": Stage(task: Command(run: "exec 3>${out}/o.txt; echo early >&3; (for i in 1 2 3 4 5 6; do sleep 0.5; echo late >&3; done) & echo started",
                            outputs: ["o.txt"])),
  "ln": Stage(task: Command(run: "ln data/in.txt ${out}/o.txt", inputs: ["data/in.txt"], outputs: ["o.txt"])),
})
RON
    "$VG" build >/dev/null 2>&1; b=$?
    mode=$(stat -c '%A links=%h' data/in.txt)
    chmod u+w data/in.txt; echo appended >> data/in.txt
    sleep 4
    "$VG" verify > v.out 2>&1; v=$?
    bg=$("$VG" status --json | python3 -c 'import json,sys; print([n["state"] for n in json.load(sys.stdin)["nodes"] if n["id"]=="bg"][0])')
    if [ $b = 0 ] && [ $v = 0 ] && [ "$mode" = "-rw-r--r-- links=1" ]; then verdict F3 PASS "verify clean after a background writer and an input edit; input stays $mode; bg $bg"
    else verdict F3 FAIL "build rc=$b; verify rc=$v ($(grep -c damaged v.out) damaged); data/in.txt $mode; bg $bg"; fi
}

F4() {
    fresh_ws f4
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: {
  "rep": Stage(matrix: {"k": [1, 2, 3]}, task: Command(run: "echo same > ${out}/o.txt", outputs: ["o.txt"])),
})
RON
    "$VG" build >/dev/null 2>&1
    stale=$("$VG" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["stale"])')
    if [ "$stale" = 0 ]; then verdict F4 PASS "summary.stale 0 after one build"; else verdict F4 FAIL "summary.stale $stale after one build"; fi
}

F5() {
    fresh_ws f5
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: {
  "c": Stage(matrix: {"v": ["a/b", "a%2Fb"]}, task: Command(run: "echo ${v} > ${out}/o.txt", outputs: ["o.txt"])),
})
RON
    "$VG" build >/dev/null 2>&1; b1=$?
    "$VG" build >/dev/null 2>&1; b2=$?
    dirs=$(ls out/c | tr '\n' ' ')
    stale=$("$VG" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["stale"])')
    if [ $b1 = 0 ] && [ $b2 = 0 ] && [ "$stale" = 0 ]; then verdict F5 PASS "two folders: $dirs; stale $stale"
    else verdict F5 FAIL "builds rc=$b1,$b2; out/c: $dirs; stale $stale"; fi
}

F6() {
    fresh_ws f6
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: {
  "slow": Stage(matrix: {"i": [1, 2]},
    task: Command(run: "bash -c 'sleep 4; echo grandchild-done ${i} >> side.log' marker-gc-$PPID; echo done > ${out}/v.txt", outputs: ["v.txt"])),
})
RON
    local out="" bad=0
    for sig in KILL HUP TERM; do
        rm -f side.log
        "$VG" build -j 2 > b.out 2>&1 & p=$!
        for _ in $(seq 100); do [ "$(pgrep -f marker-gc | wc -l)" -ge 2 ] && break; sleep 0.05; done
        kill -$sig $p; wait $p; rc=$?
        [ $sig = KILL ] && "$VG" status >/dev/null 2>&1   # the next command ends what the dead build left
        sleep 0.3; left=$(pgrep -f marker-gc | wc -l)
        sleep 4.5; written=$(wc -l < side.log 2>/dev/null || echo 0)
        out="$out SIG$sig rc=$rc left=$left wrote=$written;"
        { [ "$left" != 0 ] || [ "$written" != 0 ] || [ $rc = 129 ]; } && bad=1
        pkill -f marker-gc 2>/dev/null
    done
    [ $bad = 0 ] && verdict F6 PASS "$out" || verdict F6 FAIL "$out"
}

F7() {
    fresh_ws f7
    cat > pipelines/p.ron <<'RON'
Pipeline(params: {"r": 0}, stages: {
  "big": Stage(matrix: {"i": [0, 1, 2, 3, 4, 5]},
    task: Command(run: "echo start ${r} ${i} >> side.log; head -c 104857600 /dev/urandom > ${out}/data.bin; echo end ${r} ${i} >> side.log",
                  outputs: ["data.bin"])),
})
RON
    local worst=0 out=""
    for r in 1 2 3 4 5 6 7 8; do
        "$VG" build -j 2 -p r=$r >/dev/null 2>&1 & p=$!; sleep 1.$((RANDOM % 9)); kill -9 $p; wait $p 2>/dev/null
        "$VG" build -j 2 -p r=$r >/dev/null 2>&1
        reruns=$(grep "^start $r " side.log | sort | uniq -d | wc -l)
        out="$out $reruns"; [ "$reruns" -gt "$worst" ] && worst=$reruns
    done
    if [ "$worst" -le 2 ]; then verdict F7 PASS "re-runs per kill:$out (-j 2)"; else verdict F7 FAIL "re-runs per kill:$out (-j 2)"; fi
}

F8() {
    fresh_ws f8
    cat > pipelines/p.ron <<'RON'
Pipeline(params: {"k": 0}, stages: {
  "big": Stage(matrix: {"i": [0, 1, 2, 3]}, task: Command(run: "echo ${k} ${i} > /dev/null; head -c 104857600 /dev/urandom > ${out}/data.bin", outputs: ["data.bin"])),
})
RON
    "$VG" build -j 2 -p k=0 >/dev/null 2>&1; "$VG" build -j 2 -p k=1 >/dev/null 2>&1
    for n in 1 2 3 4 5 6 7 8 9 10; do "$VG" build -j 2 -p k=$((n % 2)) >/dev/null 2>&1 & p=$!; sleep 0.0$((RANDOM % 9 + 1)); kill -9 $p 2>/dev/null; wait $p; done
    before=$(ls out/big | grep -c vitgraph-)
    "$VG" build -p k=1 >/dev/null 2>&1
    after=$(ls out/big | grep -c vitgraph-)
    if [ "$after" = 0 ]; then verdict F8 PASS "leftover folders: $before after the kills, $after after the next build"
    else verdict F8 FAIL "leftover folders: $before after the kills, $after after the next build"; fi
}

F9() {
    fresh_ws f9
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: { "t": Stage(task: Command(run: "head -c 20000000 /dev/zero | tr '\\0' x; exit 3", outputs: ["o.txt"])) })
RON
    "$VG" build 2> b.err >/dev/null; b=$?
    err=$(wc -c < b.err); st=$("$VG" status | wc -c); js=$("$VG" build --json 2>/dev/null | wc -c)
    if [ $b = 1 ] && [ "$err" -lt 20000 ] && [ "$st" -lt 20000 ] && [ "$js" -lt 40000 ]; then verdict F9 PASS "20 MB log: build stderr $err bytes, status $st bytes, build --json $js bytes"
    else verdict F9 FAIL "20 MB log: build rc=$b stderr $err bytes, status $st bytes, build --json $js bytes"; fi
}

F10() {
    fresh_ws f10
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: {
  ".":  Stage(task: Command(run: "echo odd > ${out}/o.txt", outputs: ["o.txt"])),
  "..": Stage(matrix: {"k": [1, 2]}, task: Command(run: "echo ${k} > ${out}/o.txt", outputs: ["o.txt"])),
})
RON
    "$VG" ls > l.out 2>&1; l=$?
    if [ $l = 2 ] && grep -q 'p.ron:2' l.out; then verdict F10 PASS "ls rc=2: $(grep -m1 'stage name' l.out | sed 's/^ *//')"
    else verdict F10 FAIL "ls rc=$l"; fi
}

F11() {
    fresh_ws f11
    H=$(printf 'y%.0s' $(seq 100))
    cat > pipelines/p.ron <<RON
Pipeline(stages: {
  "long3": Stage(matrix: {"a": ["$H"], "b": ["$H"], "c": ["$H"]}, task: Command(run: "echo \${a} > \${out}/o.txt", outputs: ["o.txt"])),
})
RON
    "$VG" build > b.out 2>&1; b=$?
    stale=$("$VG" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["stale"])')
    if [ $b = 0 ] && [ "$stale" = 0 ]; then verdict F11 PASS "built: out/long3/$(ls out/long3 | cut -c1-40)…"
    else verdict F11 FAIL "build rc=$b: $(grep -m1 -o 'File name too long.*' b.out)"; fi
}

F12() {
    fresh_ws f12; echo AAAA-original > data/in.txt
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: {
  "read": Stage(task: Command(run: "while [ ! -e go ]; do sleep 0.05; done; cp data/in.txt ${out}/o.txt; touch copied; while [ ! -e done ]; do sleep 0.05; done", inputs: ["data/in.txt"], outputs: ["o.txt"])),
})
RON
    "$VG" build > b.out 2>&1 & p=$!
    sleep 0.5; cp -p data/in.txt orig; echo BBBB-version2 > data/in.txt; touch go
    for _ in $(seq 200); do [ -e copied ] && break; sleep 0.05; done
    cp orig data/in.txt; touch -r orig data/in.txt; touch done
    wait $p; b=$?
    state=$("$VG" status --json | python3 -c 'import json,sys; n=json.load(sys.stdin)["nodes"][0]; print(n["state"], *[r["kind"] for r in n["reasons"]])')
    if [ "$state" != fresh ]; then verdict F12 PASS "build rc=$b; status: $state"
    else verdict F12 FAIL "build rc=$b; status: $state over $(cat out/read/o.txt)"; fi
}

F13() {
    local out="" ok=1
    fresh_ws f13a; mkdir -p ../shared13; cat > ../shared13/ext.ron <<'RON'
Pipeline(stages: { "ext": Stage(task: Command(run: "echo e > ${out}/e.txt", outputs: ["e.txt"])) })
RON
    ln -s ../../shared13/ext.ron pipelines/ext.ron
    "$VG" ls 2>&1 | grep -q '^ext ' && out="$out symlinked pipeline loaded;" || { ok=0; out="$out symlinked pipeline ignored;"; }
    for o in './o.txt' 's/'; do
        fresh_ws f13b
        printf 'Pipeline(stages: { "t": Stage(task: Command(run: "echo x > ${out}/o.txt", outputs: ["%s"])) })\n' "$o" > pipelines/p.ron
        "$VG" ls >/dev/null 2>&1; rc=$?; out="$out output $o ls rc=$rc;"; [ $rc = 2 ] || ok=0
    done
    fresh_ws f13c
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: { "gen": Stage(matrix: {"i": [1, 2, 3]}, task: Command(run: "echo ${i} > ${out}/v.bin", outputs: ["v.bin"])) })
RON
    "$VG" build >/dev/null 2>&1; rm -rf out/gen/i=3; echo x > out/gen/i=3
    "$VG" status >/dev/null 2>&1; rc=$?; out="$out file in place of a node folder: status rc=$rc;"; [ $rc = 0 ] || ok=0
    "$VG" build >/dev/null 2>&1; rc=$?; out="$out build rc=$rc;"; [ $rc = 0 ] || ok=0
    fresh_ws f13d
    cat > pipelines/p.ron <<'RON'
Pipeline(stages: { "gen": Stage(matrix: {"i": [RANGE]}, task: Command(run: "echo ${i} > ${out}/v.bin", outputs: ["v.bin"])) })
RON
    sed -i "s/RANGE/$(seq -s, 1 400)/" pipelines/p.ron
    "$VG" build >/dev/null 2>&1
    python3 -c 'import sqlite3; sqlite3.connect("cache/state.sqlite").execute("PRAGMA wal_checkpoint(TRUNCATE)")'
    size=$(stat -c %s cache/state.sqlite)
    dd if=/dev/zero of=cache/state.sqlite bs=1024 seek=$((size / 2048)) count=8 conv=notrunc 2>/dev/null
    "$VG" verify >/dev/null 2>&1; rc=$?; out="$out damaged database: verify rc=$rc"; [ $rc != 0 ] || ok=0
    [ $ok = 1 ] && verdict F13 PASS "$out" || verdict F13 FAIL "$out"
}

cases=${*:-F1 F2 F3 F4 F5 F6 F7 F8 F9 F10 F11 F12 F13}
for c in $cases; do ( "$c" ); done
