#!/usr/bin/env python3
"""Writes floats.txt: HEX REPR ROUND4-REPR per line, Python's own answers for the C tests."""
import os
import random
import struct

rng = random.Random(20261202)
vals = [0.0, -0.0, 1.0, 0.5, 2.3114, 24.6502, 1e-05, 0.0001, 0.00005, 1e16, 1e15,
        9999999999999998.0, 1e22, 1e-7, 123456789012345678.0, 5e-324, 1.7976931348623157e308,
        2.2250738585072014e-308, 0.1, 0.2, 0.30000000000000004, 1.03125, 2.5, 0.00015,
        1234.56785, 3.028, 25.467, 19.556, 2285698228224.0, 9007199254740993.0]
vals += [2.0 ** e for e in range(-1074, 1024, 7)]
vals += [rng.randint(0, 10 ** rng.randint(1, 17)) / 10 ** rng.randint(0, 20) for _ in range(800)]
vals += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(63)))[0] for _ in range(800)]
vals += [rng.uniform(-1e6, 1e6) for _ in range(400)]
vals += [-v for v in vals[:300]]
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "floats.txt"), "w") as f:
    for v in vals:
        if v != v or v in (float("inf"), float("-inf")):
            continue
        f.write("%s %r %r\n" % (v.hex(), v, round(v, 4)))
