#!/bin/sh
# Installs the Debian packages memshim's build, tests and demo need, only those missing.
set -eu
need="build-essential pkg-config check libncurses-dev tmux libunwind-dev libjansson-dev libcairo2-dev libexpat1-dev libdw-dev fonts-dejavu-core python3-torch python3-psutil clang libclang-rt-dev valgrind gdb heaptrack cppcheck clang-tidy clang-format libpython3.11-testsuite sqlite3 xz-utils libjemalloc2 libgoogle-perftools4 golang-go nodejs default-jdk-headless"
[ $# -gt 0 ] && need="$*"
missing=""
for p in $need; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "memshim: installing missing Debian packages:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
