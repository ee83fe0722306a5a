#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need (Debian packages, as
# root), then checks formatting and lints, and runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

# Real peers and tools the tests use: ffprobe/ffmpeg read what Metronome writes and sends;
# nasm lets openh264 build its assembly (without it, a ~2.5x slower encoder); GStreamer and VLC
# play Metronome's RTSP mounts and send it RTP; headless Chromium renders the lab's reports;
# iperf3 measures the emulator's links from inside network namespaces.
# libav*-dev, pkg-config, clang and libclang-dev: the build links FFmpeg's libraries (decoding,
# the VBR ladder's encoders) and generates their bindings.
# g++, ns3, libns3-dev and libgsl-dev: `bench ns3` builds a small ns-3 program to compare the
# simulator with (libgsl-dev because ns-3's pkg-config files name libgsl, for a user who builds
# the program with pkg-config; the command itself links with -lns3-… flags).
# prometheus: its promtool checks what `GET /metrics` serves.
# srt-tools: `bench srt` runs srt-live-transmit beside Metronome's loss repair.
# openssl: the RTSPS tests make their certificate with it and speak TLS through s_client;
# ca-certificates: the system's CA bundle, which recv rtsps:// trusts by default.
# tcpdump reads the lab's pcap traces; jq and python3-jsonschema check every --json document
# against its schema; libjson-validator-perl checks the control API's OpenAPI description and
# its real answers against it. dpkg-dev: cargo-deb finds the package's dependencies with
# dpkg-shlibdeps; systemd: systemd-analyze verifies the packaged unit (no systemd runs here).
packages=(ffmpeg nasm libavcodec-dev libavformat-dev libavutil-dev libswscale-dev pkg-config clang libclang-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav
  vlc-bin vlc-plugin-base chromium iperf3 g++ ns3 libns3-dev libgsl-dev prometheus srt-tools slurm-wlm munge tcpdump jq python3-jsonschema libjson-validator-perl dpkg-dev systemd openssl ca-certificates)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "test.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # dpkg has been seen failing once with a transient temp-file error: try again before giving up.
  for attempt in 1 2 3; do
    apt-get install -y -qq "${missing[@]}" >/dev/null && break
    [ "$attempt" = 3 ] && { echo "test.sh: apt-get install failed" >&2; exit 1; }
    sleep 5
  done
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The API docs build without a broken or private link (what `cargo doc` shows a newcomer).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps -q
# Licenses, a second version of a crate, sources, RustSec advisories: deny.toml says which.
scripts/deny.sh
log=$(mktemp)
fuzz_log=$(mktemp)
binaries=$(mktemp)
# The tests' scratch files go to a directory of this run's own (TMPDIR), open to all like /tmp
# (VLC runs as nobody), removed at the end: a test that leaves files behind fails the suite,
# because a machine that runs it often would fill its disk.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/metronome-suite.XXXXXX")
chmod 1777 "$scratch"
fuzz_build=
trap '[ -n "$fuzz_build" ] && { kill -- -"$fuzz_build" 2>/dev/null || true; }; rm -f "$log" "$fuzz_log" "$binaries"; rm -rf "$scratch"' EXIT
target_dir=$(cargo metadata --format-version 1 --no-deps 2>/dev/null | jq -r .target_directory) || target_dir=target
# Every test binary first (the fuzz runner, target/debug/fuzz, among them), and where each is:
# its path and its package's directory, for scripts/run-tests.sh.
cargo test --workspace --no-run --message-format=json-render-diagnostics |
  jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
    | "\(.executable)\t\(.manifest_path | sub("/Cargo.toml$"; ""))"' >"$binaries"
# The fuzzers' harness is built while the tests run: AFL++ instruments every crate, so it is the
# whole dependency graph again (crates/fuzz, Cargo.toml's `fuzz` profile), and most tests wait on
# real time and real peers. At the lowest priority, in a session of its own (so the EXIT trap
# can stop all of it), it takes only what the tests leave: a new session is a new scheduler
# autogroup, whose own nice value (0) would otherwise weigh it as much as all the tests, so it
# is set to 19 too. cargo-afl builds its own AFL++ once (make and a C compiler).
setsid nice -n 19 bash -c '
  echo 19 >/proc/self/autogroup 2>/dev/null || true
  command -v cargo-afl >/dev/null 2>&1 || cargo install cargo-afl --version 0.18.2 --locked
  cargo afl config --build >/dev/null 2>&1 || true  # fails when AFL++ is already built: fine
  "$1/debug/fuzz" --build-only' fuzz-build "$target_dir" >"$fuzz_log" 2>&1 &
fuzz_build=$!
# Every test binary, as `cargo test --workspace --no-fail-fast` would run them (a failure in one
# must not hide the results of the others), but the few long ones that mostly wait beside the
# rest (scripts/run-tests.sh says which and why); then the documentation's examples.
status=0
TMPDIR=$scratch scripts/run-tests.sh "$binaries" 2>&1 | tee "$log" || status=$?
# Stopped (Ctrl-C, SIGTERM): nothing more.
case $status in 130 | 143) exit "$status" ;; esac
TMPDIR=$scratch cargo test --workspace --doc --no-fail-fast 2>&1 | tee -a "$log" || status=$?
left=$(find "$scratch" -mindepth 1 -maxdepth 1 -name 'metronome-*' -printf '%f ' | head -c 2000)
if [ -n "$left" ]; then
  echo "test.sh: tests left files behind in $scratch (each test must remove its own): $left" >&2
  status=1
fi
# One closing line for the whole suite (cargo prints one summary per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1); if ($i ~ /^ignored/) s += $(i-1) } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s; if (p == 0) exit 1 }' "$log"

# The Debian package (scripts/package.sh): made by cargo-deb from the binary the tests ran,
# installed, its unit verified, started as the unit starts it, reloaded and stopped; purged.
if [ "$(id -u)" -eq 0 ]; then
  scripts/package.sh --check || { [ "$status" = 0 ] && status=1; }
else
  echo "package: NOT checked: installing a package needs root"
fi

# The README's install, `cargo install --path crates/cli --locked`, into a root of its own: the
# debug profile and this target directory, so it reuses what the tests built (the README's
# `--profile dist` changes only the profile), after the package is made from the binary the
# tests ran. The installed binary must work from anywhere,
# without the source tree: it runs a built-in scenario from /.
install_root=$(mktemp -d "$scratch/install.XXXXXX")
if cargo install -q --path crates/cli --locked --debug --root "$install_root" --target-dir "$target_dir" &&
  (cd / && PATH="$install_root/bin:$PATH" metronome lab run seed001-udp --out "$install_root/lab" >"$install_root/log" 2>&1) &&
  [ -s "$install_root/lab/report.html" ]; then
  echo "install: cargo install --path crates/cli works ($(PATH="$install_root/bin" metronome --version))"
else
  echo "install: FAILED: cargo install --path crates/cli, or its binary run from /" >&2
  tail -5 "$install_root/log" 2>/dev/null >&2 || true
  [ "$status" = 0 ] && status=1
fi
rm -rf "$install_root"

# Coverage-guided fuzzing of every parser that takes network or file input (crates/fuzz): AFL++
# through afl.rs, METRONOME_FUZZ_SECS (30) per target, two at a time, from the checked-in
# corpus, with the harness built beside the tests above.
fuzz=0
wait "$fuzz_build" || fuzz=$?
fuzz_build=
if [ "$fuzz" = 0 ]; then
  "$target_dir/debug/fuzz" --seconds "${METRONOME_FUZZ_SECS:-30}" --jobs 2 || fuzz=$?
else
  echo "fuzz: the harness did not build:" >&2
  tail -30 "$fuzz_log" >&2
fi
echo "fuzz: $([ "$fuzz" = 0 ] && echo "no findings" || echo "FAILED ($fuzz)")"
[ "$status" = 0 ] && status=$fuzz
exit "$status"
