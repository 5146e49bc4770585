#!/usr/bin/env bash
# Creates a project Python environment with CPython 3.11 (pyenv's, else python3.11 on PATH) when it
# is missing or its requirements changed.  Usage: setup-venv.sh DIR REQUIREMENTS [BASE]
# With BASE (another such environment), DIR sees BASE's packages and installs only REQUIREMENTS on
# top of them, without dependencies (an older transformers beside the same torch).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$1 requirements=$2 base=${3:-}
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$requirements" "$stamp"; then
	exit 0
fi
python=""
for p in /root/.pyenv/versions/3.11.*/bin/python3.11 "$(command -v python3.11 || true)"; do
	if [ -n "$p" ] && [ -x "$p" ]; then python=$p; break; fi
done
if [ -z "$python" ]; then
	echo "setup-venv: no CPython 3.11 found (pyenv or python3.11 on PATH)" >&2
	exit 1
fi
echo "setup-venv: $venv from $requirements with $python"
rm -rf "$venv"
"$python" -m venv "$venv"
# pip's complaints about index locations that lack a package say nothing about this install
quiet_pip() { "$venv/bin/python" -m pip install -q "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
if [ -n "$base" ]; then
	site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	"$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/memshim-base.pth"
	quiet_pip --no-deps -r "$requirements"
else
	quiet_pip -r "$requirements"
fi
cp "$requirements" "$stamp"
