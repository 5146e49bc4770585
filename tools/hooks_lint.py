#!/usr/bin/env python3
"""Every upward hook has exactly one setter (shim/hooks.def, doc/architecture.md#layers).

usage: hooks_lint.py [SHIM_DIR]   (default: shim)

For each MS_UPWARD_HOOK(name, offered_by, set_by, what) row of SHIM_DIR/hooks.def:
- a function pointer: the sites that assign it (`name = ...`, `__atomic_store_n(&name, ...)`, an
  exchange) in SHIM_DIR's .c and .h files must be exactly one, in SET_BY;
- a setter function (defined in OFFERED_BY, no pointer of that name): the sites that call it must
  be exactly one, in SET_BY;
and NAME must be defined in OFFERED_BY.  A function pointer declared `extern` in a header and
assigned outside the file that defines it is a hook: it must have a row.  Comments and strings are
not read.  Exit 1 with one line per finding.
"""
import os
import re
import sys

ROW = re.compile(r"^MS_UPWARD_HOOK\(\s*(\w+)\s*,\s*([\w./]+)\s*,\s*([\w./]+)\s*,", re.M)
EXTERN_FN_POINTER = re.compile(r"\bextern\b[^;{}]*\(\s*\*\s*(\w+)\s*\)\s*\(")


def strip(text):
    """TEXT without comments and string or character literals, newlines kept (line numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def sources(shim):
    found = {}
    for folder, _, files in os.walk(shim):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                path = os.path.join(folder, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    found[os.path.relpath(path, shim)] = strip(fh.read())
    return found


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


def assignments(files, name):
    """(file, line) of every store into the pointer NAME."""
    store = re.compile(
        r"\b%s\s*=(?!=)|__atomic_(?:store|exchange|compare_exchange)\w*\s*\(\s*(?:\([^()]*\)\s*)?&\s*%s\b"
        % (name, name))
    return [(f, line_of(t, m.start())) for f, t in files.items() for m in store.finditer(t)]


def calls(files, name):
    """(file, line) of every call of the function NAME (its prototypes and definition are not)."""
    found = []
    for f, t in files.items():
        for m in re.finditer(r"\b%s\s*\(" % name, t):
            before = t[t.rfind("\n", 0, m.start()) + 1:m.start()].rstrip()
            if before and (before[-1].isalnum() or before[-1] in "_*") and not before.endswith("return"):
                continue  # a type before the name: a declaration
            found.append((f, line_of(t, m.start())))
    return found


def defines(text, name):
    """Whether TEXT defines NAME at file scope: a pointer without extern, or a function's body."""
    pointer = re.search(r"^(?!\s*extern\b)[^\n;]*\(\s*\*\s*%s\s*\)\s*\([^;{]*\)\s*(=[^;]*)?;" % name, text, re.M)
    function = re.search(r"^\w[^\n;]*\b%s\s*\([^;{]*\)\s*\{" % name, text, re.M)
    return bool(pointer or function), bool(pointer)


def main():
    shim = sys.argv[1] if len(sys.argv) > 1 else "shim"
    with open(os.path.join(shim, "hooks.def"), encoding="utf-8") as fh:
        rows = ROW.findall(strip(fh.read()))
    files = sources(shim)
    problems = []
    listed = set()
    for name, offered_by, set_by in rows:
        listed.add(name)
        text = files.get(offered_by)
        if text is None:
            problems.append("%s: offered by %s, which is not in %s" % (name, offered_by, shim))
            continue
        defined, is_pointer = defines(text, name)
        if not defined:
            problems.append("%s: not defined in %s, which hooks.def says offers it" % (name, offered_by))
            continue
        sites = assignments(files, name) if is_pointer else calls(files, name)
        what = "assigned" if is_pointer else "called"
        elsewhere = ["%s:%d" % s for s in sites if s[0] != set_by]
        if elsewhere:
            problems.append("%s: %s outside %s, its one setter in hooks.def: %s"
                            % (name, what, set_by, ", ".join(elsewhere)))
        mine = [s for s in sites if s[0] == set_by]
        if len(mine) != 1:
            problems.append("%s: %s %d times in %s, its setter; a hook has exactly one setter%s"
                            % (name, what, len(mine), set_by,
                               (": " + ", ".join("%s:%d" % s for s in mine)) if mine else ""))
    # A pointer a header declares and another file assigns is a hook: it needs a row.
    for header, text in files.items():
        if not header.endswith(".h"):
            continue
        for name in EXTERN_FN_POINTER.findall(text):
            if name in listed:
                continue
            home = [f for f, t in files.items() if f.endswith(".c") and defines(t, name)[1]]
            outside = ["%s:%d" % s for s in assignments(files, name) if s[0] not in home]
            if outside:
                problems.append("%s (%s): assigned outside the file that defines it (%s) but has no row in "
                                "hooks.def: %s" % (name, header, ", ".join(home) or "none", ", ".join(outside)))
    for p in problems:
        print("hooks lint: " + p, file=sys.stderr)
    if problems:
        return 1
    print("hooks lint: %d hooks, each with one setter" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
