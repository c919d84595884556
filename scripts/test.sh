#!/usr/bin/env bash
# The project's test command (README, .ci/run): build, Rust tests, then the end-to-end suite
# with real Kafka clients (confluent-kafka/librdkafka and kafka-python) against the release
# broker binary.
#
# Runs from a fresh clone on a fresh machine: needs cargo and python3 (with venv); the Python
# dependencies (tests/e2e/requirements.txt) go into target/venv, re-installed only when that
# file changes; kcat is installed with apt-get when missing. Checks formatting (cargo fmt) and
# lints (cargo clippy -D warnings) first.
#
# Environment:
#   E2E_ONLY=1          skip `cargo test` (still builds the broker)
#   PYTEST_ADDOPTS="..." extra pytest arguments (pytest's own variable), e.g. "-k restart -vv"
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)

section() {
    printf '\n==================== %s ====================\n' "$*"
}

start_all=$(date +%s)

section "cargo fmt --check"
cargo fmt --all --check

section "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --release --workspace --all-targets -- -D warnings

section "cargo build --release -p broker"
cargo build --release -p broker

if [[ "${E2E_ONLY:-0}" != "1" ]]; then
    section "cargo test --workspace --release"
    cargo test --workspace --release
fi

section "python virtualenv (target/venv)"
VENV="$ROOT/target/venv"
REQ="$ROOT/tests/e2e/requirements.txt"
PY=${PYTHON:-python3}
want="$(sha256sum "$REQ" | cut -d' ' -f1) $("$PY" --version 2>&1)"
have=$(cat "$VENV/.requirements-stamp" 2>/dev/null || true)
if [[ -x "$VENV/bin/python" && "$have" == "$want" ]]; then
    echo "up to date ($want)"
else
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$REQ"
    echo "$want" > "$VENV/.requirements-stamp"
    echo "installed: $(tr '\n' ' ' < <(grep -v '^#' "$REQ"))"
fi

section "kcat"
# The end-to-end suite drives kcat as users do; install it where it is missing (Debian).
if ! command -v kcat >/dev/null && ! command -v kafkacat >/dev/null; then
    SUDO=$([[ $(id -u) == 0 ]] && echo "" || echo sudo)
    $SUDO apt-get install -y -q kcat >/dev/null || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q kcat >/dev/null; }
fi
kcat -V 2>/dev/null | head -1 || kafkacat -V | head -1

section "end-to-end tests (pytest tests/e2e)"
export BROKER_BIN="$ROOT/target/release/broker"
export PYTHONDONTWRITEBYTECODE=1
"$VENV/bin/python" -m pytest -x -q tests/e2e

section "done in $(( $(date +%s) - start_all )) s"
