#!/usr/bin/env bash
# cargo deny against deny.toml: licenses, a second version of a crate, sources, and the
# RustSec advisories. The test command runs it; run it alone the same way:
#
#     scripts/deny.sh
#
# The advisory database is a git repository on GitHub. Where GitHub cannot be reached, a copy
# of that repository is used instead: METRONOME_ADVISORY_DB names one (any git URL or path, a
# mirror of https://github.com/RustSec/advisory-db), else the lab machines' mirror if it is
# there. With neither, the advisories are reported as NOT checked and the other checks still
# decide.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.20.2
if ! cargo deny --version 2>/dev/null | grep -qF "$version"; then
  echo "deny: installing cargo-deny $version (once; about 5 minutes)"
  cargo install cargo-deny --version "$version" --locked -q
fi

cargo deny check bans licenses sources

url=https://github.com/RustSec/advisory-db
if timeout 30 git ls-remote "$url" HEAD >/dev/null 2>&1; then
  cargo deny check advisories
  exit 0
fi

# cargo deny keeps the database under a directory named after its URL's hash; this is the
# directory for the default URL, $url.
db=${CARGO_HOME:-$HOME/.cargo}/advisory-dbs/advisory-db-3157b0e258782691
copy=${METRONOME_ADVISORY_DB:-}
lab_mirror=/work/.mirror/RustSec+advisory-db/repo
[ -z "$copy" ] && [ -d "$lab_mirror" ] && copy=$lab_mirror
if [ -n "$copy" ]; then
  rm -rf "$db"
  git clone -q "$copy" "$db"
fi
if [ ! -d "$db/crates" ]; then
  echo "deny: advisories NOT checked: GitHub is unreachable and there is no copy of the" \
    "advisory database (set METRONOME_ADVISORY_DB to a clone or mirror of RustSec/advisory-db)" >&2
  exit 0
fi
echo "deny: GitHub unreachable; advisories from ${copy:-the copy already in $db}," \
  "as of $(git -C "$db" log -1 --format=%cs)"
cargo deny --offline check advisories
