#!/usr/bin/env bash
# The Debian package, made by cargo-deb from crates/cli/Cargo.toml's [package.metadata.deb]:
#
#     scripts/package.sh            # builds the dist profile, writes target/debian/metronome_*.deb
#     sudo apt install ./target/debian/metronome_*.deb
#
#     scripts/package.sh --check    # (root) packages the binary the tests built, installs the
#                                   # package, and starts it as its systemd unit would
#
# The check, which the test command runs: the package installs with dpkg (its dependencies are
# found: dpkg-shlibdeps computed them), /usr/bin/metronome runs, the config is a conffile, the
# unit passes `systemd-analyze verify` against the installed files; then the unit's ExecStart
# runs (on loopback ports, with a token file of its own), answers RTSP, reloads on the unit's
# ExecReload signal (SIGHUP), and stops on its KillSignal (SIGTERM) within TimeoutStopSec with
# its summary. These machines run no systemd, so systemd does not start it; `systemctl` in the
# maintainer scripts is skipped as Debian's scripts skip it in a chroot. The package is purged
# at the end, also on failure. A machine that already has a metronome package is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."

version=3.8.0
if ! cargo deb --version 2>/dev/null | grep -qF "$version"; then
  echo "package: installing cargo-deb $version (once; about 3 minutes)"
  cargo install cargo-deb --version "$version" --locked -q
fi

# The man pages and shell completions the binary writes, gzipped as Debian keeps them, where
# [package.metadata.deb]'s assets take them from (packaging/generated, not kept in git).
generate_assets() {
  local bin=$1 out=packaging/generated
  rm -rf "$out"
  mkdir -p "$out/man" "$out/completions"
  "$bin" man "$out/man" 2>/dev/null
  gzip -9n "$out"/man/*.1
  "$bin" completions bash >"$out/completions/metronome"
  "$bin" completions zsh >"$out/completions/_metronome"
  "$bin" completions fish >"$out/completions/metronome.fish"
}

if [ "${1:-}" != "--check" ]; then
  cargo build -p metronome --profile dist
  generate_assets "$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)/dist/metronome"
  exec cargo deb -p metronome --profile dist --no-build
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "package: --check installs the package: run it as root" >&2
  exit 1
fi
# In any state (installed, or removed with its config kept): the check's purge would take the
# operator's config with it.
if dpkg-query -W metronome >/dev/null 2>&1; then
  echo "package: NOT checked: a metronome package is on this machine already (dpkg -l metronome)" >&2
  exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/metronome-package.XXXXXX")
server=
cleanup() {
  [ -n "$server" ] && kill -KILL "$server" 2>/dev/null || true
  dpkg --purge metronome >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "package: $*" >&2
  [ -f "$work/err" ] && sed 's/^/  server: /' "$work/err" >&2
  exit 1
}

# The binary the tests ran, packaged as is (cargo-deb warns that the dev profile is not for
# releases: this package is only checked, never shipped; `--fast` compresses lightly).
deb=$work/metronome.deb
generate_assets "$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)/debug/metronome"
cargo deb -p metronome --no-build --profile dev --fast --output "$deb" >"$work/deb.log" 2>&1 ||
  { cat "$work/deb.log" >&2; fail "cargo deb failed"; }

control=$(dpkg-deb --field "$deb")
grep -q '^Depends:.*libavcodec' <<<"$control" || fail "Depends lacks FFmpeg's libraries: $control"
contents=$(dpkg-deb --contents "$deb")
for f in ./usr/bin/metronome ./etc/metronome/metronome.toml metronome.service \
  ./usr/share/doc/metronome/copyright ./usr/share/doc/metronome/config.md \
  ./usr/share/man/man1/metronome.1.gz ./usr/share/man/man1/metronome-serve.1.gz \
  ./usr/share/bash-completion/completions/metronome \
  ./usr/share/zsh/vendor-completions/_metronome \
  ./usr/share/fish/vendor_completions.d/metronome.fish; do
  grep -qF "$f" <<<"$contents" || fail "the package lacks $f"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/metronome/metronome.toml ||
  fail "/etc/metronome/metronome.toml is not a conffile (an upgrade would overwrite the operator's)"

dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -i failed"; }
/usr/bin/metronome --version >/dev/null || fail "/usr/bin/metronome does not run"
zcat /usr/share/man/man1/metronome-serve.1.gz | grep -q '^\.TH' || fail "metronome-serve.1 is no man page"
bash -c 'source /usr/share/bash-completion/completions/metronome && complete -p metronome' \
  >/dev/null 2>&1 || fail "the bash completion does not load"
unit=$(dpkg -L metronome | grep '/metronome\.service$') || fail "no unit installed"
systemd-analyze verify "$unit" 2>"$work/verify.log" ||
  { cat "$work/verify.log" >&2; fail "systemd-analyze verify $unit"; }

# Started as the unit starts it: ExecStart's command line, on loopback ports.
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
stop_secs=$(sed -n 's/^TimeoutStopSec=//p' "$unit")
read -r -a argv <<<"$exec_start"
"${argv[@]}" --rtsp 127.0.0.1:0 --control 127.0.0.1:0 --control-token-file "$work/token" \
  --duration 60 >"$work/out" 2>"$work/err" &
server=$!
wait_log() {
  for _ in $(seq 1 300); do
    grep -q "$1" "$work/err" && return 0
    kill -0 "$server" 2>/dev/null || { server=; fail "the server ended before it said '$1'"; }
    sleep 0.1
  done
  fail "the server did not say '$1' within 30 s"
}
wait_log "serving rtsp://127.0.0.1:"
addr=$(grep -o 'serving rtsp://127.0.0.1:[0-9]*' "$work/err" | head -1 | sed 's#serving rtsp://##')
answer=$(printf 'OPTIONS rtsp://%s/test RTSP/1.0\r\nCSeq: 1\r\n\r\n' "$addr" |
  timeout 5 bash -c "exec 3<>/dev/tcp/${addr%:*}/${addr#*:}; cat >&3; head -1 <&3") ||
  fail "RTSP OPTIONS to $addr got no answer"
grep -q "RTSP/1.0 200" <<<"$answer" || fail "OPTIONS answered '$answer'"
kill -HUP "$server"
wait_log "reloading /etc/metronome/metronome.toml"
start=$(date +%s)
kill -TERM "$server"
status=0
wait "$server" || status=$?
server=
took=$(($(date +%s) - start))
[ "$status" = 0 ] || fail "SIGTERM: it exited with $status"
[ "$took" -le "${stop_secs:-15}" ] || fail "SIGTERM: it took ${took} s, over TimeoutStopSec"
[ -s "$work/out" ] || fail "no summary on stdout after SIGTERM"
echo "package: $(dpkg-deb --field "$deb" Package Version Architecture | tr '\n' ' ')installs," \
  "verifies and serves as its unit ($(du -h "$deb" | cut -f1))"
