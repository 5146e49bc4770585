#!/usr/bin/env python3
"""layers.py BUILD [ALLOW]: the shim's layer rule, checked on what the compiler and linker know.

Layers (doc/architecture.md): core < intercept < cuda | python | native < sites < output < top
(api.c, lifecycle.c).  For every object under BUILD/shim:
  - includes, from the .d file -MMD wrote: a header of a higher layer, or of a sibling folder of
    the same layer (cuda, python, native), is a violation;
  - symbols, from nm: an undefined symbol another shim object defines must come from the same
    layer or a lower one (not from a sibling folder);
  - call cycles: the objects' symbol graph (listed exceptions included) may have no cycle through
    files of different folders.
ALLOW (default tools/layers.allow) lists exceptions, one per line: `OBJECT SYMBOL-or-HEADER  # why`.
An exception that no longer happens fails too, so the list only shrinks.  Exit 1 on any finding."""
import collections
import os
import re
import subprocess
import sys

LAYER = {"core": 0, "intercept": 1, "cuda": 2, "python": 2, "native": 2, "sites": 3, "output": 4, "top": 5}


def folder_of(path, shim):
    """Folder of PATH (an object under BUILD/shim or a source/header under shim/), "top" for the root."""
    rel = os.path.relpath(path, shim)
    d = os.path.dirname(rel)
    return d if d else "top"


def may_use(user, used):
    """Whether code in folder USER may use folder USED."""
    lu, ld = LAYER.get(user), LAYER.get(used)
    if lu is None or ld is None:
        return True
    if ld > lu:
        return False
    return not (ld == lu == 2 and user != used)


def read_allow(path):
    allow = {}
    if not os.path.exists(path):
        return allow
    for n, line in enumerate(open(path), 1):
        text = line.split("#", 1)[0].split()
        if not text:
            continue
        if len(text) != 2 or "#" not in line:
            sys.exit(f"{path}:{n}: expected `OBJECT NAME  # reason`")
        allow[(text[0], text[1])] = line.split("#", 1)[1].strip()
    return allow


def objects(build):
    shim = os.path.join(build, "shim")
    for root, _, files in os.walk(shim):
        for f in sorted(files):
            if f.endswith(".o"):
                yield os.path.join(root, f)


def headers_of(obj):
    """Headers of the shim a .d file lists for OBJ (paths as written, e.g. shim/core/ms.h)."""
    d = obj[:-2] + ".d"
    if not os.path.exists(d):
        return []
    text = open(d).read().replace("\\\n", " ")
    first = text.split("\n", 1)[0]
    deps = first.split(":", 1)[1].split() if ":" in first else []
    return [p for p in deps if p.endswith(".h") and re.match(r"^(\./)?shim/", p)]


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        if parts[1] == "U":
            undefined.add(parts[0])
        elif parts[1] in "TDBRVWGSC":
            defined.add(parts[0])
    return defined, undefined


def cross_folder_cycles(edges, folder):
    """Strongly connected components (Tarjan) holding files of more than one folder."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len({folder[c] for c in comp}) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    allow = read_allow(sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "layers.allow"))
    shim = os.path.join(build, "shim")
    objs = list(objects(build))
    if not objs:
        sys.exit(f"layers: no objects under {shim}: build first")
    folder = {o: folder_of(o, shim) for o in objs}
    name = {o: os.path.relpath(o, build) for o in objs}
    defs, uses = {}, {}
    for o in objs:
        d, u = symbols(o)
        uses[o] = u
        for s in d:
            defs[s] = o
    findings, used_allow = [], set()

    def finding(o, what, text):
        key = (name[o], what)
        if key in allow:
            used_allow.add(key)
        else:
            findings.append(text)

    for o in objs:
        for h in headers_of(o):
            hf = folder_of(h.lstrip("./"), "shim")
            if not may_use(folder[o], hf):
                finding(o, h.lstrip("./"), f"{name[o]} includes {h.lstrip('./')} ({hf}/ is not below {folder[o]}/)")
    edges = collections.defaultdict(set)
    for o in objs:
        for s in sorted(uses[o]):
            d = defs.get(s)
            if d is None or d == o:
                continue
            edges[o].add(d)  # an exception allows the use, never a cycle through it
            if (name[o], s) in allow:
                used_allow.add((name[o], s))
            elif not may_use(folder[o], folder[d]):
                findings.append(f"{name[o]} uses {s} from {name[d]} ({folder[d]}/ is not below {folder[o]}/)")
    for comp in cross_folder_cycles(edges, folder):
        findings.append("call cycle across folders: " + " <-> ".join(name[c] for c in comp))
    for key in sorted(set(allow) - used_allow):
        findings.append(f"{key[0]} {key[1]}: allowed in layers.allow but no longer used (remove the line)")
    for f in findings:
        print(f"layers: {f}", file=sys.stderr)
    if not findings:
        print(f"layers: {len(objs)} objects, {len(used_allow)} listed exceptions, no other upward use or cycle")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
