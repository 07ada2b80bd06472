#!/usr/bin/env bash
# The Python client's suite, against the package as `pip install` installs it.
#
#   IDCAR_BIN=/path/to/idcar bash clients/python/run-tests.sh      (from any directory)
#
# 1. (Re)creates the virtual environment target/test-tools/python-client-venv (removed first:
#    every run starts fresh) with $PYTHON (default python3; 3.11 or later).
# 2. Installs the pinned tools of requirements-test.txt from PyPI (pip's download cache:
#    target/test-tools/pip-cache), then this directory, not editable: `pip install
#    clients/python` (built with the pinned flit_core, so without build isolation).
# 3. `mypy --strict` on the installed package (`-p idcar` resolves to site-packages, which works
#    only because the wheel ships idcar/py.typed), the tests and the examples (as Python 3.11).
# 4. `python -m unittest discover` from tests/: neither the working directory nor anything on
#    sys.path holds the source idcar/, so `import idcar` is the installed copy (a test checks).
#
# The venv is left in place: examples/fetch.py runs with its python afterwards.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
tools="$repo/target/test-tools"
venv="$tools/python-client-venv"
python=${PYTHON:-python3}

# The tests run from tests/: a relative IDCAR_BIN would then point nowhere. (Unset, the tests
# fail and say so.)
if [ -n "${IDCAR_BIN:-}" ] && [[ "$IDCAR_BIN" != /* ]]; then
  IDCAR_BIN="$(cd "$(dirname "$IDCAR_BIN")" && pwd)/$(basename "$IDCAR_BIN")"
  export IDCAR_BIN
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PIP_CACHE_DIR="$tools/pip-cache"
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree

mkdir -p "$tools"
rm -rf "$venv"
"$python" -m venv "$venv"
py="$venv/bin/python"
"$py" -m pip install --quiet --no-compile --only-binary :all: -r "$here/requirements-test.txt"
"$py" -m pip install --quiet --no-compile --no-build-isolation --no-deps "$here"
echo "installed: $("$py" -c 'import idcar; print(idcar.__file__)')"

cd "$here/tests"
# What is under test is the installed copy: from here, `import idcar` must resolve into the
# venv's site-packages, not to the source tree.
"$py" - "$here" <<'PY'
import os, sys, sysconfig
import idcar
installed = os.path.realpath(idcar.__file__)
site = os.path.realpath(sysconfig.get_paths()["purelib"])
source = os.path.realpath(sys.argv[1])
assert installed.startswith(site + os.sep), f"idcar imported from {installed}, not from {site}"
assert not installed.startswith(source + os.sep), f"idcar imported from the source tree"
PY
# Modules by name: test_client from here, fetch and bench from ../examples (MYPYPATH), idcar
# from the venv's site-packages. Checked as Python 3.11 code, the oldest supported.
MYPYPATH="$here/examples" "$py" -m mypy --strict --python-version 3.11 \
  --cache-dir "$venv/mypy-cache" -p idcar -m test_client -m fetch -m bench
"$py" -m unittest discover --start-directory . --top-level-directory .
