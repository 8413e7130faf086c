#!/usr/bin/env bash
# Install everything gpucluster needs on Debian 12, as root: the Debian packages listed in
# scripts/debian-packages.txt and a virtualenv (.venv) holding the project and its tools.
# Quiet on success: one line per long step; the full output of a failed step is shown.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root (it installs Debian packages)" >&2
  exit 1
fi

log=$(mktemp -t gpucluster-setup.XXXXXX)
trap 'rm -f "$log"' EXIT

# step DESCRIPTION CMD...: run CMD with its output in $log; print it only if CMD fails.
step() {
  local what=$1
  shift
  local started=$SECONDS
  echo "setup.sh: $what ..."
  if ! "$@" >"$log" 2>&1; then
    echo "setup.sh: FAILED: $what; its output:" >&2
    cat "$log" >&2
    exit 1
  fi
  echo "setup.sh: $what: done in $((SECONDS - started)) s"
}

export DEBIAN_FRONTEND=noninteractive
mapfile -t packages < <(grep -Ev '^\s*(#|$)' scripts/debian-packages.txt)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  step "apt-get update" apt-get update
  step "installing ${#missing[@]} Debian package(s): ${missing[*]}" \
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

# Debian's interpreter, whatever else PATH holds (pyenv, conda): python3-venv above is for it.
if [ ! -x .venv/bin/python ]; then
  step "creating .venv" /usr/bin/python3 -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# A rerun with the same pyproject.toml leaves .venv alone: reinstalling would rewrite the
# programs in .venv/bin while a lab or a test run may be using them.
stamp=.venv/.gpucluster-installed
wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ] || [ ! -x .venv/bin/gpucluster ]; then
  step "upgrading pip in .venv" .venv/bin/python -m pip install --upgrade pip
  step "installing gpucluster and its tools into .venv (Ansible, Molecule, Pulumi SDKs, linters; a few minutes the first time)" \
    .venv/bin/python -m pip install -e ".[dev,cloud,burst]"
  echo "$wanted" > "$stamp"
fi
# promtool for the tests (monitoring configs and rule unit tests): taken from the suite's
# `prometheus` package (the version the suite serves) into .venv/bin, never installed as a service.
fetch_promtool() {
  local dir
  dir=$(mktemp -d)
  (cd "$dir" && apt-get download prometheus)
  dpkg-deb -x "$dir"/prometheus_*.deb "$dir/root"
  install -m 0755 "$dir/root/usr/bin/promtool" .venv/bin/promtool
  rm -rf "$dir"
}
wanted_promtool=$(apt-cache policy prometheus | sed -n 's/^  Candidate: //p')
if [ ! -x .venv/bin/promtool ] || [ "$(cat .venv/.promtool-version 2>/dev/null)" != "$wanted_promtool" ]; then
  step "fetching promtool $wanted_promtool (Debian's prometheus package) into .venv/bin" fetch_promtool
  echo "$wanted_promtool" > .venv/.promtool-version
fi
echo "setup.sh: ready (.venv/bin/gpucluster)"
