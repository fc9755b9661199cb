#!/usr/bin/env bash
# The test command: sets up both environments if needed, then runs the suite under the
# newest supported JAX (.venv) and under the oldest, JAX 0.4.35 (.venv-jax0435).
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

ensure_env() {  # ensure_env DIR CONSTRAINTS
  local dir=$1 constraints=$2 stamp="$1/.installed-$(sha1sum "$2" pyproject.toml | sha1sum | cut -c1-12)"
  if [ ! -f "$stamp" ]; then
    [ -x "$dir/bin/python" ] || "$PYTHON" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --upgrade pip
    "$dir/bin/python" -m pip install -q -c "$constraints" -e ".[test]"
    touch "$stamp"
  fi
}

ensure_env .venv constraints.txt
ensure_env .venv-jax0435 constraints-jax0435.txt

JOBS=${JOBS:-$(nproc)}
echo "== jax 0.4.35 (.venv-jax0435)"
.venv-jax0435/bin/python -m pytest -q -n "$JOBS" -p no:cacheprovider "$@"
echo "== newest jax (.venv)"
.venv/bin/python -m pytest -q -n "$JOBS" -p no:cacheprovider "$@"
