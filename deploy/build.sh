#!/bin/sh
# The image's build (deploy/Dockerfile), also run by tests/test_wheel.py where Docker is
# absent, so what the image installs is what the tests install and serve from.
#   build.sh wheel SRC WHEELS     the a2a_agent wheel (no dependencies) from the source tree
#   build.sh install WHEELS VENV  a virtual environment with that wheel and its dependencies
set -eu
case "${1:-}" in
  wheel)
    python3 -m pip wheel --quiet --no-deps --wheel-dir "$3" "$2" ;;
  install)
    # pip's cache is kept: the image's build stage is thrown away with it, and the wheel
    # test installs from it instead of downloading every dependency again (79 s a run).
    python3 -m venv "$3"
    "$3/bin/pip" install --quiet --upgrade pip
    "$3/bin/pip" install --quiet "$2"/a2a_agent-*.whl ;;
  *)
    echo "usage: build.sh wheel SRC WHEELS | install WHEELS VENV" >&2
    exit 2 ;;
esac
