#!/usr/bin/env bash
# One entry point for a fresh machine (the README's two commands):
#   ./deploy/run.sh demo    set up the runtime (no torch), start the stack, run `mathsearch demo`
#   ./deploy/run.sh test    set everything up, run lint and the stack-free tests, start the
#                              stack, run the live tests (then a smoke subset on the other
#                              OpenSearch version), stop the stack; exits non-zero on any
#                              failure (no tests = failure); arguments go to one pytest run
#                              with the stack up
#   ./deploy/run.sh shell   set everything up and open a shell with the full venv active
#   ./deploy/run.sh mathsearch ARGS...   any mathsearch command in the runtime venv, e.g.
#                              `./deploy/run.sh mathsearch stack down`
# Caches live outside the clone (MATHSEARCH_CACHE_DIR, default /var/cache/mathsearch as root,
# ~/.cache/mathsearch otherwise): the dependencies' venv is keyed by pyproject.toml's dependency
# tables, the Python version and the flavour, each clone's overlay venv (its own editable
# mathsearch) by the clone's path and pyproject.toml; the assembled OpenSearch by its artifact lock; pip and Maven keep their own caches.
set -euo pipefail

mode="${1:-}"
case "$mode" in
  demo|test|shell|mathsearch) shift ;;
  *) echo "usage: ./deploy/run.sh demo|test|shell|mathsearch [args...]" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

if [ "$(id -u)" = 0 ]; then default_cache=/var/cache/mathsearch; else default_cache="${XDG_CACHE_HOME:-$HOME/.cache}/mathsearch"; fi
export MATHSEARCH_CACHE_DIR="${MATHSEARCH_CACHE_DIR:-$default_cache}"

python=""
for candidate in "${MATHSEARCH_PYTHON:-}" python3.13 python3.12 python3.11 python3; do
  [ -n "$candidate" ] || continue
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python="$(command -v "$candidate")"; break
  fi
done
[ -n "$python" ] || { echo "deploy/run.sh: Python >= 3.11 is required" >&2; exit 1; }

pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# Two environments: `demo` (and `mathsearch ...`) get the runtime alone - onnxruntime (CPU),
# lxml, opensearch-py, celery, redis, fastapi; no torch - `test` and `shell` the full one
# (training, benchmarks and test tools: `.[dev,train]`).
case "$mode" in
  demo|mathsearch) flavour=runtime ;;
  *) flavour=full ;;
esac
# Two layers, so that no clone ever re-points another's environment and nothing is installed
# again until the dependencies change:
# - the dependencies, in a venv shared by every clone with the same dependency tables (keyed by
#   them, the Python version and the flavour); mathsearch itself is not installed there;
# - this clone's mathsearch, in a small overlay venv keyed by the clone's path, that key and
#   pyproject.toml: it
#   sees the shared venv's packages through a .pth file and holds only the editable install of
#   this clone (and the `mathsearch` command). Overlays of clones that no longer exist are removed.
# The key reads only what the installed packages depend on: pyproject.toml's build system,
# requires-python, dependencies and extras (not the package list, not the tool settings).
deps="$("$python" -c 'import json, sys, tomllib
meta = tomllib.load(open("pyproject.toml", "rb"))
project = meta["project"]
keep = [meta.get("build-system"), project.get("requires-python"), project.get("dependencies"),
        project.get("optional-dependencies")]
sys.stdout.write(json.dumps(keep, sort_keys=True))')"
key="$( (echo "$deps"; echo "$pyver $flavour dependencies-only") | sha256sum | cut -c1-16)"
venv="$MATHSEARCH_CACHE_DIR/venv/py$pyver-$flavour-$key"
# The overlay's editable install maps the packages pyproject.toml lists: redone when it changes.
clone_key="$( (echo "$repo"; echo "$key"; cat pyproject.toml) | sha256sum | cut -c1-16)"
overlay="$MATHSEARCH_CACHE_DIR/venv/clones/$clone_key"
mkdir -p "$MATHSEARCH_CACHE_DIR/venv/clones"

if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  echo "==> creating the $flavour virtualenv $venv (first run for this pyproject.toml)"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  # The requirements of pyproject.toml (the build system's too: the editable install of each
  # clone builds without isolation), not the project.
  "$python" - "$flavour" >"$venv/requirements.txt" <<'PY'
import sys
import tomllib

with open("pyproject.toml", "rb") as handle:
    meta = tomllib.load(handle)
extras = ["dev", "train"] if sys.argv[1] == "full" else []
requirements = [*meta["build-system"]["requires"], *meta["project"]["dependencies"]]
for extra in extras:
    requirements += meta["project"]["optional-dependencies"][extra]
print("\n".join(dict.fromkeys(requirements)))
PY
  # pip's own output only when it fails
  if ! out="$("$venv/bin/pip" install -q --upgrade pip 2>&1 &&
    "$venv/bin/pip" install -q -r "$venv/requirements.txt" 2>&1)"; then
    echo "$out" >&2; exit 1
  fi
  touch "$venv/.complete"
fi

for stale in "$MATHSEARCH_CACHE_DIR"/venv/clones/*/; do
  if [ -f "$stale.clone" ] && [ ! -d "$(cat "$stale.clone")" ]; then rm -rf "$stale"; fi
done
if [ ! -x "$overlay/bin/mathsearch" ] || [ ! -f "$overlay/.complete" ]; then
  echo "==> installing this clone's mathsearch into $overlay"
  rm -rf "$overlay"
  "$python" -m venv --without-pip "$overlay"
  site="$("$overlay/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  shared="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # addsitedir, not a bare path: the shared venv's own .pth files are read too
  echo "import site; site.addsitedir('$shared')" >"$site/zz_mathsearch_dependencies.pth"
  if ! out="$("$overlay/bin/python" -m pip install -q --no-deps --no-build-isolation -e . 2>&1)"; then
    echo "$out" >&2; exit 1
  fi
  # The dependencies' commands (pytest, celery, uvicorn, ...) run this overlay's Python, which
  # sees this clone's mathsearch: copies with the shebang changed, as a venv of its own has.
  for tool in "$venv"/bin/*; do
    name="${tool##*/}"
    [ -e "$overlay/bin/$name" ] && continue
    if head -n 1 "$tool" 2>/dev/null | grep -qE "^#!$venv/bin/python[0-9.]*$"; then
      { echo "#!$overlay/bin/python"; tail -n +2 "$tool"; } >"$overlay/bin/$name"
      chmod +x "$overlay/bin/$name"
    fi
  done
  echo "$repo" >"$overlay/.clone"
  touch "$overlay/.complete"
fi
# The overlay first (python, mathsearch, the Python tools), then the shared venv (ruff's binary).
export PATH="$overlay/bin:$venv/bin:$PATH"
export VIRTUAL_ENV="$overlay"

case "$mode" in
  demo)
    exec mathsearch demo "$@"
    ;;
  shell)
    exec "${SHELL:-bash}" "$@"
    ;;
  mathsearch)
    exec mathsearch "$@"
    ;;
  test)
    # The search page is tested in Debian's headless chromium, driven by its chromedriver.
    if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "==> installing Debian's chromium and chromium-driver (the search page test)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q chromium chromium-driver >/dev/null \
          || { apt-get update -q >/dev/null && apt-get install -y -q chromium chromium-driver >/dev/null; }
      else
        echo "deploy/run.sh: chromium and chromedriver are missing; install Debian's chromium" \
          "and chromium-driver (as root) so the search page test can run" >&2
      fi
    fi
    # PDF and EPS figures are rasterised with poppler's pdftoppm and ghostscript (figure tests).
    if ! command -v pdftoppm >/dev/null 2>&1 || ! command -v gs >/dev/null 2>&1; then
      if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "==> installing Debian's poppler-utils and ghostscript (PDF/EPS figure images)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q poppler-utils ghostscript >/dev/null \
          || { apt-get update -q >/dev/null && apt-get install -y -q poppler-utils ghostscript >/dev/null; }
      else
        echo "deploy/run.sh: pdftoppm / gs are missing; PDF and EPS figures will count as" \
          "having no image (install Debian's poppler-utils and ghostscript)" >&2
      fi
    fi
    echo "==> ruff"
    ruff check .
    ruff format --check .
    echo "==> mypy (deploy/typecheck.py: the whole package, [tool.mypy] in pyproject.toml)"
    python deploy/typecheck.py
    status=0
    if [ "$#" = 0 ]; then
      # The stack-free part first (minutes, no OpenSearch or Redis started): every test without
      # the `services` or `cluster` marker; tests/conftest.py fails one that connects anyway.
      echo "==> pytest, the stack-free part (-m 'not services and not cluster')"
      started=$SECONDS
      set +e
      python -m pytest -m "not services and not cluster"
      status=$?
      set -e
      echo "==> the stack-free part: exit $status in $((SECONDS - started)) s"
      if [ "$status" = 5 ]; then echo "deploy/run.sh: pytest collected no tests" >&2; fi
    fi
    echo "==> starting the stack"
    mathsearch stack up
    trap 'echo "==> stopping the stack"; mathsearch stack down || true' EXIT
    started=$SECONDS
    set +e
    if [ "$#" = 0 ]; then
      echo "==> pytest, the live part (-m 'services or cluster')"
      python -m pytest -m "services or cluster"
    else
      echo "==> pytest $*"
      python -m pytest "$@"
    fi
    live=$?
    set -e
    echo "==> the live part: exit $live in $((SECONDS - started)) s"
    if [ "$live" = 5 ]; then echo "deploy/run.sh: pytest collected no tests" >&2; fi
    if [ "$status" = 0 ]; then status=$live; fi
    # The whole suite ran on the default OpenSearch; a smoke subset (the plugins, indexing
    # through the workers, every mode, enrichment, re-embedding, the server-vs-client fusion
    # golden tests) runs on the other supported version too (docs/opensearch.md). Only after a
    # full, green run; MATHSEARCH_TEST_OTHER_VERSION= (empty) skips it.
    other="${MATHSEARCH_TEST_OTHER_VERSION-3.6.0}"
    if [ "$status" = 0 ] && [ "$#" = 0 ] && [ -n "$other" ]; then
      set +e
      # exit 3 with a message when no JDK fits that version: the subset is skipped
      python - "$other" <<'PY'
import sys
from mathsearch.core.errors import StackError
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.stack.artifacts import ArtifactLock
from mathsearch.stack.java import find_java_home
lock = ArtifactLock.load(sys.argv[1])
try:
    find_java_home(lock.java_min, lock.java_max, OpenSearchSettings.from_env().java_home)
except StackError as exc:
    print(f"==> skipping the OpenSearch {sys.argv[1]} smoke subset: {exc}")
    sys.exit(3)
PY
      status=$?
      if [ "$status" = 0 ]; then
        echo "==> OpenSearch $other: the smoke subset"
        mathsearch stack up --version "$other" && python -m pytest -m services -p no:cacheprovider \
          tests/opensearch/test_plugins_smoke.py tests/opensearch/test_cluster_capabilities.py \
          tests/workers/test_pipeline.py tests/opensearch/test_searcher.py \
          tests/opensearch/test_fusion.py tests/opensearch/test_enrichment.py \
          tests/opensearch/test_vector_fields.py tests/opensearch/test_schema.py
        status=$?
      elif [ "$status" = 3 ]; then
        status=0
      fi
      set -e
    fi
    exit "$status"
    ;;
esac
