"""`auditwheel repair` for memshim's wheel, also grafting the X11 libraries that cairo pulls in
(libX11, libXext, libXrender), which manylinux lets a wheel take from the system.

manylinux policies assume a desktop has them; memshim runs where there is none (slim containers,
compute nodes), and memshim-format would not start there, so they are bundled like jansson and
cairo.  libz and libexpat stay the system's, as manylinux allows: every Python has them, and the
bundled expat would raise the glibc floor.  Everything else is auditwheel's own (the version
pinned in packaging/requirements-tools.txt), arguments included."""
import sys
from dataclasses import replace

from auditwheel import main
from auditwheel.policy import WheelPolicies

GRAFT_TOO = frozenset({"libX11.so.6", "libXext.so.6", "libXrender.so.1"})
_init = WheelPolicies.__init__


def _init_bundling_more(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    self._policies = [replace(p, whitelist=p.whitelist - GRAFT_TOO) for p in self._policies]


WheelPolicies.__init__ = _init_bundling_more
sys.exit(main.main())
