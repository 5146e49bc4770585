#!/usr/bin/env python3
"""layers.py BUILD [ALLOW]: the layer rules of the shim and of the formatter, checked on what the
compiler and linker know.

Layers (doc/architecture.md), lowest first:
  shim/:      core < intercept < cuda | python | native < sites < output < top (api.c, lifecycle.c)
  formatter/: base < model < input < plot < modes < cli < main (main.c; memshim-top's top/top.o)
For every object of a tree (BUILD/shim, BUILD/formatter/plain; a tree not built is skipped):
  - includes, from the .d file -MMD wrote: a header of a higher layer, or of a sibling folder of
    the same layer (cuda, python, native), is a violation;
  - symbols, from nm: an undefined symbol another object of the tree defines must come from the
    same layer or a lower one (not from a sibling folder);
  - call cycles: the objects' symbol graph (listed exceptions included) may have no cycle, neither
    through files of different folders nor among the files of one folder.
ALLOW (default tools/layers.allow) lists exceptions, one per line: `OBJECT SYMBOL-or-HEADER  # why`,
or `CYCLE OBJECT+OBJECT+...  # why` for a cycle inside one folder (its objects sorted).  An
exception that no longer happens fails too, so the list only shrinks.  Exit 1 on any finding."""
import collections
import os
import re
import subprocess
import sys

# One tree per program: where its objects are (under BUILD), its sources' folder, the name of its
# root folder, each folder's layer, and the layers whose folders are siblings that never use each other.
TREES = [
    {"objects": "shim", "sources": "shim", "root": "top", "siblings": {2},
     "layer": {"core": 0, "intercept": 1, "cuda": 2, "python": 2, "native": 2, "sites": 3, "output": 4, "top": 5}},
    {"objects": "formatter/plain", "sources": "formatter", "root": "main", "siblings": set(),
     "layer": {"base": 0, "model": 1, "input": 2, "plot": 3, "modes": 4, "cli": 5, "main": 6, "top": 6}},
]


def folder_of(path, base, root):
    """Folder of PATH (an object under BUILD/<objects> or a header under <sources>/), ROOT for the root."""
    rel = os.path.relpath(path, base)
    d = os.path.dirname(rel)
    return d if d else root


def may_use(tree, user, used):
    """Whether code in folder USER may use folder USED."""
    lu, ld = tree["layer"].get(user), tree["layer"].get(used)
    if lu is None or ld is None:
        return True
    if ld > lu:
        return False
    return not (ld == lu and ld in tree["siblings"] and user != used)


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


def objects(top):
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".o"):
                yield os.path.join(root, f)


def source_exists(obj, top, sources):
    """Whether OBJ's source is still there (<sources>/F.c, or F.c for another program's object
    built with the tree's flags, memshim-top's top/top.c): a stale object of a moved file is not
    checked."""
    rel = os.path.relpath(obj, top)[:-2] + ".c"
    return os.path.exists(os.path.join(sources, rel)) or os.path.exists(rel)


def headers_of(obj, sources):
    """Headers under SOURCES/ a .d file lists for OBJ (normalised, e.g. shim/core/ms.h)."""
    d = obj[:-2] + ".d"
    if not os.path.exists(d):
        return []
    text = open(d).read().replace("\\\n", " ")
    first = text.split("\n", 1)[0]
    deps = first.split(":", 1)[1].split() if ":" in first else []
    deps = [os.path.normpath(p) for p in deps if p.endswith(".h")]
    return [p for p in deps if p.startswith(sources + "/")]


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


def cycles(edges):
    """Strongly connected components (Tarjan) of more than one file."""
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
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def interposed(sources):
    """The C library functions the shim defines itself (intercept/libc.def): its own calls of them
    are calls of the C library's function, not uses of intercept/ (syscall() is one)."""
    path = os.path.join(sources, "intercept", "libc.def")
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        return set(re.findall(r"^MS_HOOK\w*\([^,]+,\s*(\w+)\s*,", f.read(), re.M))


def check_tree(build, tree, allow, used_allow, findings):
    """Findings of one tree into FINDINGS; returns how many objects it has (0: not built)."""
    top = os.path.join(build, tree["objects"])
    objs = [o for o in objects(top) if source_exists(o, top, tree["sources"])]
    root = tree["root"]
    folder = {o: folder_of(o, top, root) for o in objs}
    name = {o: os.path.relpath(o, build) for o in objs}
    defs, uses = {}, {}
    libc = interposed(tree["sources"])
    for o in objs:
        d, u = symbols(o)
        uses[o] = u - libc
        for s in d:
            defs[s] = o

    def finding(o, what, text):
        key = (name[o], what)
        if key in allow:
            used_allow.add(key)
        else:
            findings.append(text)

    for o in objs:
        for h in headers_of(o, tree["sources"]):
            hf = folder_of(h, tree["sources"], root)
            if not may_use(tree, folder[o], hf):
                finding(o, h, f"{name[o]} includes {h} ({hf}/ is not below {folder[o]}/)")
    edges = collections.defaultdict(set)
    for o in objs:
        for s in sorted(uses[o]):
            d = defs.get(s)
            if d is None or d == o:
                continue
            edges[o].add(d)  # an exception allows the use, never a cycle through it
            if (name[o], s) in allow:
                used_allow.add((name[o], s))
            elif not may_use(tree, folder[o], folder[d]):
                findings.append(f"{name[o]} uses {s} from {name[d]} ({folder[d]}/ is not below {folder[o]}/)")
    for comp in cycles(edges):
        names = [name[c] for c in comp]
        if len({folder[c] for c in comp}) > 1:
            findings.append("call cycle across folders: " + " <-> ".join(names))
            continue
        key = ("CYCLE", "+".join(names))
        if key in allow:
            used_allow.add(key)
        else:
            findings.append(f"call cycle inside {folder[comp[0]]}/: " + " <-> ".join(names))
    return len(objs)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    allow = read_allow(sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "layers.allow"))
    findings, used_allow, counted = [], set(), []
    for tree in TREES:
        n = check_tree(build, tree, allow, used_allow, findings)
        if n:
            counted.append(f"{n} {tree['sources']}")
    if not counted:
        sys.exit(f"layers: no objects under {build}/shim or {build}/formatter/plain: build first")
    for key in sorted(set(allow) - used_allow):
        findings.append(f"{key[0]} {key[1]}: allowed in layers.allow but no longer used (remove the line)")
    for f in findings:
        print(f"layers: {f}", file=sys.stderr)
    if not findings:
        print(f"layers: {' and '.join(counted)} objects, {len(used_allow)} listed exceptions, no other upward "
              "use or cycle")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
