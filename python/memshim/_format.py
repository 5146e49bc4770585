"""The `memshim-format` command of a pip installation: the formatter program inside the package
(memshim/_bin/memshim-format), run in this process's place with the same arguments."""
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    prog = os.path.join(here, "_bin", "memshim-format")
    if not os.path.isfile(prog):
        sys.stderr.write("memshim: memshim-format is missing from this installation (%s)\n" % prog)
        return 125
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(prog, ["memshim-format"] + sys.argv[1:])
    return 125


if __name__ == "__main__":
    sys.exit(main())
