#!/usr/bin/env bash
# The test command. Creates the test environments if needed (each from its own constraints
# file, stamped so an unchanged one is not reinstalled), then runs the suite in each:
#
#   main     .venv          Python 3.12,     JAX 0.12.0.1 + libtpu + CUDA plugin  constraints.txt
#   jax010   .venv-jax010   default python3, JAX 0.10.2 + libtpu + CUDA plugin    constraints-jax010.txt
#   jax062   .venv-jax062   default python3, JAX 0.6.2 + libtpu                   constraints-jax062.txt
#   jax0435  .venv-jax0435  default python3, JAX 0.4.35 (oldest supported)        constraints-jax0435.txt
#   remat3   .venv again, with JAX's new remat implementation (JAX_REMAT3=1), over the tests of
#            what it changes: the analysis, the compilers' probes and the fidelity corpora
#
# Before the suites, the type checker (mypy) and the linter (ruff check) run once, in .venv
# (which has the `lint` extra), with the settings in pyproject.toml.
#
# Every environment runs even when an earlier one fails, so one run reports them all; the
# script fails if any did, or if mypy or ruff did. Usage: scripts/test.sh [pytest args...]
# TEST_ENVS="main jax0435" runs only those; PYTHON312 / PYTHON choose the interpreters (the
# main environment's Python 3.12, the others' default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_ENVS="main jax010 jax062 jax0435 remat3"
ENVS=${TEST_ENVS:-$ALL_ENVS}
JOBS=${JOBS:-$(nproc)}

# A lane runs in another environment with settings of its own: remat3 is the main environment
# under JAX_REMAT3=1 (remat_lane).
env_base() { case $1 in remat3) echo main ;; *) echo "$1" ;; esac; }
env_dir() { case $(env_base "$1") in main) echo .venv ;; *) echo ".venv-$(env_base "$1")" ;; esac; }
env_constraints() { case $(env_base "$1") in main) echo constraints.txt ;; *) echo "constraints-$(env_base "$1").txt" ;; esac; }
# The released compilers, for compile-only use (no NVIDIA libraries; the tests run JAX itself
# on the CPU, tests/conftest.py). JAX 0.4.35 has no libtpu on the registry; the 0.6.2 CUDA
# plugin checks for the NVIDIA libraries at every JAX start, whatever JAX_PLATFORMS says, and
# logs a traceback to stderr when they are missing, so that environment has libtpu only.
env_requirements() {
  case $(env_base "$1") in
    jax0435) ;;
    jax062) echo "jax[tpu]" ;;
    *) echo "jax[tpu] jax-cuda12-plugin" ;;
  esac
}

# The compilers each environment must have (tests/xla/conftest.py fails, not skips, a test
# that needs one of these and finds it missing). jaxlib 0.6.2 has no compile-only CUDA
# topology, and JAX 0.4.35 no libtpu on the registry.
env_required_compilers() {
  case $(env_base "$1") in
    jax0435) ;;
    jax062) echo tpu ;;
    *) echo tpu,gpu ;;
  esac
}

find_python312() {  # prints a working Python 3.12 interpreter, or fails naming what to install
  local root candidate
  root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
  for candidate in ${PYTHON312:-} $(ls -d "$root"/versions/3.12.*/bin/python3.12 2>/dev/null | sort -rV) python3.12; do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo "scripts/test.sh: the main environment's JAX 0.12 needs Python 3.12 and none was found (looked for" \
    "\$PYTHON312, $root/versions/3.12.*/bin/python3.12 and python3.12 on PATH)." \
    "Install it with 'pyenv install 3.12' (or your system's python3.12 package)," \
    "or set PYTHON312=/path/to/python3.12." >&2
  return 1
}

# The main environment also type-checks and lints the code: the `lint` extra.
env_extras() { case $(env_base "$1") in main) echo test,lint ;; *) echo test ;; esac; }

env_python() {
  case $(env_base "$1") in main) find_python312 ;; *) echo "${PYTHON:-python3}" ;; esac
}

# The installer: uv (pinned) installs the same pins as pip, faster (an environment with JAX,
# libtpu and the CUDA plugin, its bytecode compiled as pip compiles it, in about 25 s instead
# of 60): most of a clean clone's set-up. It lives in .venv-tools; where it cannot be installed
# (no registry), pip does the work.
UV_VERSION=0.13.9
TOOLS=.venv-tools
find_uv() {  # prints the uv to install with, or nothing (then pip installs)
  if ! "$TOOLS/bin/uv" --version 2>/dev/null | grep -qx "uv $UV_VERSION"; then
    { "${PYTHON:-python3}" -m venv --clear "$TOOLS" && "$TOOLS/bin/python" -m pip install -q "uv==$UV_VERSION"; } \
      >"$TOOLS.log" 2>&1 || { echo "scripts/test.sh: uv $UV_VERSION could not be installed (log in $TOOLS.log); pip installs instead" >&2; return 0; }
  fi
  echo "$TOOLS/bin/uv"
}

install_into() {  # install_into DIR ARGS...: pip's arguments, run by uv when there is one
  local dir=$1
  shift
  if [ -n "$UV" ]; then
    "$UV" pip install -q --compile-bytecode --python "$dir/bin/python" "$@"  # as pip does
  else
    "$dir/bin/python" -m pip install -q "$@"
  fi
}

ensure_env() {  # ensure_env NAME PYTHON: (re)create the environment unless its stamp is current
  local dir constraints stamp
  dir=$(env_dir "$1")
  constraints=$(env_constraints "$1")
  stamp="$dir/.installed-$( (cat "$constraints" pyproject.toml; "$2" --version; env_requirements "$1"; env_extras "$1") | sha1sum | cut -c1-12)"
  [ -f "$stamp" ] && return
  [ -n "${UV+set}" ] || UV=$(find_uv)  # once per run, and only when something is installed
  # A fresh environment each time its inputs change: nothing left over from the old pins.
  "$2" -m venv --clear "$dir"
  # The installer's output goes to a log, shown only when an install fails.
  if ! install_env "$1" "$dir" "$constraints" >"$dir/install.log" 2>&1 && {
    [ -z "$UV" ] || {
      # uv failed where pip may not (a proxy's certificates, say): pip installs it afresh
      mv "$dir/install.log" "$TOOLS.$1.log"
      echo "scripts/test.sh: uv could not install $dir (log in $TOOLS.$1.log); pip installs it instead" >&2
      "$2" -m venv --clear "$dir"
      ! UV="" install_env "$1" "$dir" "$constraints" >"$dir/install.log" 2>&1
    }
  }; then
    cat "$dir/install.log" >&2
    echo "scripts/test.sh: installing $dir from $constraints failed (log above, kept in $dir/install.log)" >&2
    exit 1
  fi
  touch "$stamp"
}

install_env() {  # install_env NAME DIR CONSTRAINTS: pip, then the package and its requirements
  # shellcheck disable=SC2046  # the requirement list is split on purpose
  install_into "$2" --upgrade pip &&
    install_into "$2" -c "$3" -e ".[$(env_extras "$1")]" $(env_requirements "$1")
}

declare -A PYTHONS
for name in $ENVS; do
  case " $ALL_ENVS " in *" $name "*) ;; *) echo "scripts/test.sh: unknown environment '$name' (known: $ALL_ENVS)" >&2; exit 2 ;; esac
  PYTHONS[$name]=$(env_python "$name")
done

start=$SECONDS
declare -A SET_UP  # a lane's environment is set up once
for name in $ENVS; do
  [ -z "${SET_UP[$(env_dir "$name")]:-}" ] || continue
  SET_UP[$(env_dir "$name")]=1
  echo "== setting up $(env_dir "$name") ($(env_constraints "$name"))"
  ensure_env "$name" "${PYTHONS[$name]}"
done
install_seconds=$((SECONDS - start))

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=""
summary=()

# Type check and lint, once, in .venv (only where this run sets it up).
lint_summary=()
case " $ENVS " in
  *" main "*)
    for check in "mypy" "ruff check"; do
      echo "== $check"
      status=0
      # shellcheck disable=SC2086  # "ruff check" is the command and its subcommand
      .venv/bin/$check 2>&1 | tee "$logs/lint" || status=$?
      if [ "$status" -eq 0 ]; then
        lint_summary+=("$(printf '%-14s ok' "$check")")
      else
        failed="$failed ${check// /-}"
        lint_summary+=("$(printf '%-14s %s  (exit %d)' "$check" "$(grep -E '^Found [0-9]+ error' "$logs/lint" | tail -1)" "$status")")
      fi
    done
    ;;
  *) lint_summary+=("mypy, ruff     not run (TEST_ENVS has no main environment)") ;;
esac
# Tests marked `once` (tests/conftest.py ONCE: file handling, packaging, the package's own
# structure) do not depend on the installed JAX: they run in the main environment, and in the
# others only when this run has no main environment. Tests marked `jax_independent`
# (JAX_INDEPENDENT: the static check, the codemods, reading source, the language server: they
# run no JAX) depend on Python, and on the installed JAX only through the rules of its version:
# they run once per Python version, in the main environment (3.12) and in the first of jax062,
# jax0435 and jax010 in the run (3.11). jax062 first: its rules are those of 0.4.29 - 0.7.0,
# the same for the static check as 0.4.35's, where main's are the same as 0.10.2's.
MESH_FLAG=--xla_force_host_platform_device_count=8  # tests/xla/probes.DEVICE_COUNT_FLAG
MESH_TESTS=(tests/xla/test_probes.py tests/xla/test_fidelity.py)
# JAX 0.4.35's and 0.6.2's CPU backend has no pinned_host: their probes run over compile-only
# TPU devices in the main pass (tests/xla/probes.TOPOLOGY), or not at all, so 8 CPU devices
# change nothing. The remat3 lane keeps to its own tests.
cpu_mesh_pass() { case $1 in jax0435 | jax062 | remat3) return 1 ;; esac; }
# The remat3 lane: jax_remat3 changes how jax.checkpoint and its offload policies are traced
# (docs/jax-versions.md), so the lane runs what reads traced programs: the analysis, its
# trigger catalogue and the examples' expected findings, the remat policies read from the
# jaxpr (jax_compat/policies.py), the compilers' probes, and the fidelity corpora, where the compilers judge only the modules remat3 changes (the others were
# judged in the main pass: tests/xla/corpora.lowered_alike_without_remat3). Its pytest
# arguments replace these.
REMAT3_TESTS=(tests/analysis tests/examples/test_examples_analysis.py tests/test_remat_policies.py tests/xla/test_probes.py tests/xla/test_fidelity.py)
lane_variables() { case $1 in remat3) echo JAX_REMAT3=1 ;; esac; }
independent_homes() {  # the environments of this run that run the jax_independent tests
  local homes=() name
  case " $ENVS " in *" main "*) homes+=(main) ;; esac
  for name in jax062 jax0435 jax010; do
    case " $ENVS " in *" $name "*) homes+=("$name") && break ;; esac
  done
  echo "${homes[*]}"
}
once_filter() {  # once_filter NAME: the pytest -m expression for that environment, if any
  local marks=()
  case " $ENVS " in *" main "*) [ "$1" = main ] || marks+=("not once") ;; esac
  case " $(independent_homes) " in *" $1 "*) ;; *) marks+=("not jax_independent") ;; esac
  local IFS="|"
  echo "${marks[*]}" | sed 's/|/ and /g'
}
for name in $ENVS; do
  dir=$(env_dir "$name")
  label=$dir  # what the summary calls it: the environment, and a lane's name
  [ "$(env_base "$name")" = "$name" ] || label="$dir $name"
  marks=$(once_filter "$name")
  tests=("$@")
  [ "$name" != remat3 ] || [ $# -gt 0 ] || tests=("${REMAT3_TESTS[@]}")
  jax=$("$dir/bin/python" -c 'import importlib.metadata as m; print(m.version("jax"))' || echo "?")
  python=$("$dir/bin/python" -c 'import platform; print(platform.python_version())' || echo "?")
  variables=$(lane_variables "$name")
  echo "== jax $jax, python $python ($dir)${variables:+ with $variables}"
  status=0
  # Wall and CPU seconds (user + system, the test processes' children included): on a shared
  # machine the CPU figure is the one that says what the suite costs.
  TIMEFORMAT='%R %U %S'
  { time (
    return_status=0
    # The repository's own modules compiled to bytecode once, for this interpreter (about 1 s):
    # where PYTHONDONTWRITEBYTECODE is set, every process the suite starts (the command under
    # test, the compiler workers, the example programs) would otherwise compile them from
    # source again, 0.4 s (Python 3.11) to 0.9 s (3.12) of CPU each. The processes still write
    # no bytecode of their own.
    "$dir/bin/python" -m compileall -q offload_fixer tests scripts examples >/dev/null || true
    # worksteal: a worker that runs out takes tests queued for the other, so a run does not
    # end on one worker finishing a long queue of slow tests (fixes that compile). The 15
    # slowest tests are listed: where the suite's minutes go, in every CI log.
    # shellcheck disable=SC2086  # a lane's variables are NAME=VALUE words
    env $variables OFFLOAD_FIXER_REQUIRE_COMPILERS="$(env_required_compilers "$name")" \
      "$dir/bin/python" -m pytest -q -n "$JOBS" --dist worksteal --durations=15 -p no:cacheprovider ${marks:+-m "$marks"} "${tests[@]}" 2>&1 | tee "$logs/$name" || return_status=$?
    # Exit 5 is pytest's "no tests ran": the tests named all run elsewhere (`once`, or
    # `jax_independent` outside its environments), which is this environment's share of them.
    [ "$return_status" -ne 5 ] || [ -z "$marks" ] || return_status=0
    # The mesh probes need 8 CPU devices, which would turn the examples (meshes over
    # jax.devices()) into 8-device programs: a pass of their own, on a full run only.
    if [ $# -eq 0 ] && cpu_mesh_pass "$name"; then
      XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }$MESH_FLAG" OFFLOAD_FIXER_REQUIRE_COMPILERS=$(env_required_compilers "$name") \
        "$dir/bin/python" -m pytest -q -n "$JOBS" -p no:cacheprovider -k mesh "${MESH_TESTS[@]}" 2>&1 | tee "$logs/$name.mesh" || return_status=$?
    fi
    exit "$return_status"
  ); } 2>"$logs/$name.time" || status=$?
  read -r wall user system <"$logs/$name.time"
  wall_total=$(awk -v a="${wall_total:-0}" -v b="$wall" 'BEGIN {print a + b}')
  cpu_total=$(awk -v a="${cpu_total:-0}" -v b="$user" -v c="$system" 'BEGIN {print a + b + c}')
  counts=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error|xfailed|deselected).* in [0-9.]+s' "$logs/$name" | tail -1 \
    | sed -E 's/^=+ //; s/ in [0-9.]+s.*//') || counts="no summary"
  if [ -f "$logs/$name.mesh" ]; then
    mesh=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error|deselected).* in [0-9.]+s' "$logs/$name.mesh" | tail -1 \
      | sed -E 's/^=+ //; s/ in [0-9.]+s.*//; s/, [0-9]+ deselected//') || mesh="no summary"
    counts="$counts; mesh probes: $mesh"
  fi
  [ "$status" -eq 0 ] || failed="$failed $name"
  summary+=("$(printf '%-14s jax %-9s python %-7s %4.0fs wall %4.0fs cpu  %s%s' "$label" "$jax" "$python" "$wall" \
    "$(awk -v b="$user" -v c="$system" 'BEGIN {print b + c}')" "$counts" "$([ "$status" -eq 0 ] || echo "  (exit $status)")")")
done

echo
printf '== summary (installs %ds; tests %.0fs wall, %.0fs cpu on %d cores)\n' "$install_seconds" "$wall_total" "$cpu_total" "$(nproc)"
printf '%s\n' "${lint_summary[@]}" "${summary[@]}"
total() { grep -ohE "[0-9]+ $1" <<<"${summary[*]}" | awk '{n += $1} END {print n + 0}'; }
echo "total: $(total passed) passed, $(( $(total failed) + $(total error) )) failed, $(total skipped) skipped, $(total xfailed) xfailed"
if [ -n "$failed" ]; then
  echo "scripts/test.sh: failed in:$failed" >&2
  exit 1
fi
