#!/usr/bin/env bash
# Runs the workspace's test binaries as `cargo test --workspace --no-fail-fast` does (each in
# its package's directory; every binary runs even when one fails), but not strictly one after
# another: most of the suite waits on real time and real peers (emulated links, GStreamer),
# so a few long binaries that mostly wait run in a lane of their own beside the others.
#
#   scripts/run-tests.sh BINARIES
#
# BINARIES lists one test binary a line: its path, then its package's directory (test.sh
# takes both from `cargo test --no-run --message-format=json`). Each binary's output is
# printed whole when it ends, headed by its name (package directory/test) and its time, so
# the two lanes never interleave lines; the slowest are listed at the end. Exits 1 if any
# binary failed. Extra arguments after BINARIES go to every binary (e.g. `--nocapture`).
#
# The lanes, by name (a name that no longer exists is reported, so the lists stay true):
# - WAITING run one after another, beside the rest. Each spends most of its time waiting (CPU
#   time a quarter of its wall time or less, measured on these 2-core machines) and makes
#   its own network namespaces or takes free ports, so it shares nothing with the others.
# - BUSY use both cores for most of their time (video encoding and picture quality): they
#   run last, alone, so that nothing of theirs slows the real-time tests.
# - Everything else runs one after another, as cargo would, beside WAITING.
set -uo pipefail

WAITING=(lab/emu_mode cli/fec_interop cli/rtx_interop apps/streams cli/bench_viewers)
BUSY=(lab/seed001_video lab/repair lab/seed002)

list=${1:?usage: run-tests.sh BINARIES [ARGS...]}
shift
out=$(mktemp -d "${TMPDIR:-/tmp}/metronome-tests.XXXXXX")
# On the way out, also when stopped: the waiting lane, then the binary running here (each binary
# runs in a session of its own, so this stops what it started too).
lane=
current=
stop() {
  [ -n "$lane" ] && { kill "$lane" 2>/dev/null && wait "$lane"; }
  [ -n "$current" ] && kill -- -"$current" 2>/dev/null
  return 0
}
trap 'stop; rm -rf "$out"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# name PATH DIR: the binary's name as the lists spell it (cargo adds a hash to the file name).
name() {
  local file=${1##*/}
  echo "${2##*/}/${file%-*}"
}

# run NAME PATH DIR [ARGS...]: runs one binary, then prints its output under a lock.
run() {
  local name=$1 exe=$2 dir=$3 log="$out/${1//\//_}.log" start rc secs
  shift 3
  start=$EPOCHREALTIME
  (cd "$dir" && exec setsid "$exe" "$@") >"$log" 2>&1 </dev/null &
  current=$!
  wait "$current"
  rc=$?
  current=
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
  printf '%s %.1f\n' "$name" "$secs" >>"$out/times"
  [ "$rc" = 0 ] || echo "$name" >>"$out/failed"
  {
    flock 9
    printf '     Running %s (%.1f s%s)\n' "$name" "$secs" "$([ "$rc" = 0 ] || echo ", FAILED: exit $rc")"
    cat "$log"
  } 9>"$out/print.lock"
}

# lane FILE [ARGS...]: runs the binaries FILE lists, one after another.
lane() {
  local file=$1 name exe dir
  shift
  while read -r name exe dir; do
    run "$name" "$exe" "$dir" "$@"
  done <"$file"
}

in_list() {
  local x=$1
  shift
  for y in "$@"; do [ "$x" = "$y" ] && return 0; done
  return 1
}

: >"$out/waiting"
: >"$out/busy"
: >"$out/rest"
: >"$out/times"
while read -r exe dir; do
  n=$(name "$exe" "$dir")
  if in_list "$n" "${WAITING[@]}"; then
    echo "$n $exe $dir" >>"$out/waiting"
  elif in_list "$n" "${BUSY[@]}"; then
    echo "$n $exe $dir" >>"$out/busy"
  else
    echo "$n $exe $dir" >>"$out/rest"
  fi
done <"$list"
for n in "${WAITING[@]}" "${BUSY[@]}"; do
  grep -q "^$n " "$out/waiting" "$out/busy" ||
    echo "run-tests.sh: no test binary $n: update the lists at the top of scripts/run-tests.sh" >&2
done

# The waiting lane in a shell of its own, which stops its binary when stopped.
export -f run lane stop
export out
bash -c 'lane= current=; trap stop EXIT; trap "exit 143" TERM; lane "$@"' lane "$out/waiting" "$@" &
lane=$!
lane "$out/rest" "$@"
wait "$lane"
lane=
lane "$out/busy" "$@"

echo "slowest test binaries (wall seconds):"
sort -k2 -n -r "$out/times" | head -8 | awk '{ printf "  %-28s %7.1f\n", $1, $2 }'
if [ -s "$out/failed" ]; then
  echo "FAILED test binaries: $(tr '\n' ' ' <"$out/failed")" >&2
  exit 1
fi
