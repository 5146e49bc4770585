"""python -m memshim: the same as the `memshim` command."""
import sys

from memshim.cli import main

sys.exit(main())
