"""memshim's version, written in one place: shim/memshim.h's MEMSHIM_VERSION_MAJOR and _MINOR.

In a checkout this reads the header; every build of the package (setup.py for pip and the wheel,
`make install`) replaces this file with the number itself, as `__version__ = "X.Y"`."""
import os
import re


def _from_header():
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shim", "memshim.h")
    try:
        with open(header) as f:
            text = f.read()
    except OSError:
        return "0+unknown"
    parts = [re.search(r"#define MEMSHIM_VERSION_%s (\d+)" % k, text) for k in ("MAJOR", "MINOR")]
    return ".".join(m.group(1) for m in parts) if all(parts) else "0+unknown"


__version__ = _from_header()
