#!/usr/bin/env bash
# Runs the workspace's test binaries as `cargo test --workspace --no-fail-fast` does (each in
# its package's directory; every binary runs even when one fails), but not strictly one after
# another: most of the suite waits on real time and real peers (emulated links, GStreamer),
# so a few long binaries that mostly wait run in a lane of their own beside the others.
#
#   scripts/run-tests.sh BINARIES [ARGS...]
#
# BINARIES lists one test binary a line: its path, a tab, then its package's directory
# (test.sh takes both from `cargo test --no-run --message-format=json`). Each binary's output
# is printed whole when it ends, headed by its name (package directory/test) and its time, so
# the two lanes never interleave lines; the slowest are listed at the end. Exits 1 if any
# binary failed. ARGS go to every binary (e.g. `--nocapture`).
#
# The lanes, by name (a name that no longer exists is reported, so the lists stay true):
# - WAITING run one after another, beside the rest. emu_mode, fec_interop and rtx_interop spend
#   most of their time waiting (CPU time a quarter of their wall time or less, measured on
#   these 2-core machines), and each makes its own network namespaces or takes free ports.
#   Their tests that run live media hold the machine's one real-time slot
#   (`metronome_testkit::realtime_slot`, a lock between processes), so a test of the other lane
#   that holds it too would take turns with them, not run beside them. cli/emu is here because
#   its tests look at namespaces of killed runs, which other emulator runs clean up: not beside
#   the emulator tests of this lane.
# - LAST run after both lanes, alone: those that use both cores for most of their time (video
#   encoding and picture quality), so that nothing of theirs slows the real-time tests; and the
#   others whose tests hold the real-time slot, which beside WAITING would only wait for it
#   (seen: raw_interop's 16 s took 230 s there).
# - Everything else runs one after another, in file-name order, beside WAITING.
set -uo pipefail

WAITING=(lab/emu_mode cli/fec_interop cli/rtx_interop cli/emu)
LAST=(lab/seed001_video lab/repair lab/seed002
  cli/coded_interop cli/raw_interop cli/rtsp_raw_interop apps/streams cli/bench_viewers)

list=${1:?usage: run-tests.sh BINARIES [ARGS...]}
shift
out=$(mktemp -d "${TMPDIR:-/tmp}/run-tests.XXXXXX")

# On the way out, also when stopped: the waiting lane, then the binary running here, whose
# output so far is printed (each binary runs in a session of its own, so this stops what it
# started too).
waiting_lane=
current=
current_name=
stop() {
  # Whatever reads this output (tee) may have been stopped too: writing must not kill this.
  trap '' PIPE
  exec 9>&-
  [ -n "$waiting_lane" ] && { kill "$waiting_lane" 2>/dev/null && wait "$waiting_lane"; }
  if [ -n "$current" ]; then
    kill -- -"$current" 2>/dev/null
    echo "     Stopped $current_name; its output so far:"
    cat "$out/${current_name//\//_}.log" 2>/dev/null
  fi
  return 0
}
# A signal stops everything, then this script dies of the same signal, so that the caller
# (test.sh, a shell) stops too.
die() {
  stop
  rm -rf "$out"
  trap - "$1" EXIT
  kill -"$1" $$
}
trap 'stop; rm -rf "$out"' EXIT
trap 'die TERM' TERM
trap 'die INT' INT

# name PATH DIR: the binary's name as the lists spell it (cargo adds a hash to the file name).
name() {
  local file=${1##*/}
  echo "${2##*/}/${file%-*}"
}

# run NAME PATH DIR [ARGS...]: runs one binary, then prints its output under a lock. SIGINT
# and SIGQUIT are restored to their defaults: a background lane's children would otherwise
# inherit them ignored.
run() {
  local name=$1 exe=$2 dir=$3 log="$out/${1//\//_}.log" start rc secs
  shift 3
  start=$EPOCHREALTIME
  current_name=$name
  (cd "$dir" && exec setsid env --default-signal=INT,QUIT "$exe" "$@") >"$log" 2>&1 </dev/null &
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

# lane FILE [ARGS...]: runs the binaries FILE lists (name, path, directory), one after another.
lane() {
  local file=$1 name exe dir
  shift
  while IFS=$'\t' read -r name exe dir; do
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
: >"$out/last"
: >"$out/rest"
: >"$out/times"
while IFS=$'\t' read -r exe dir; do
  n=$(name "$exe" "$dir")
  if in_list "$n" "${WAITING[@]}"; then
    lane_file=waiting
  elif in_list "$n" "${LAST[@]}"; then
    lane_file=last
  else
    lane_file=rest
  fi
  printf '%s\t%s\t%s\n' "$n" "$exe" "$dir" >>"$out/$lane_file"
done < <(sort -t $'\t' -k1,1 "$list")
for n in "${WAITING[@]}" "${LAST[@]}"; do
  grep -q "^$n"$'\t' "$out/waiting" "$out/last" ||
    echo "run-tests.sh: no test binary $n: update the lists at the top of scripts/run-tests.sh" >&2
done

# The waiting lane in a shell of its own, which stops its binary when stopped.
export -f run lane stop
export out
bash -c 'waiting_lane= current=; trap stop EXIT; trap "exit 143" TERM; lane "$@"' lane "$out/waiting" "$@" &
waiting_lane=$!
lane "$out/rest" "$@"
wait "$waiting_lane"
rc=$?
waiting_lane=
[ "$rc" = 0 ] || echo "the waiting lane (exit $rc)" >>"$out/failed"
lane "$out/last" "$@"

echo "slowest test binaries (wall seconds):"
sort -k2 -n -r "$out/times" | head -8 | awk '{ printf "  %-28s %7.1f\n", $1, $2 }'
if [ -s "$out/failed" ]; then
  echo "FAILED test binaries: $(tr '\n' ' ' <"$out/failed")" >&2
  exit 1
fi
