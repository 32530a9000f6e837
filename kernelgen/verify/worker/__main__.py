"""`python -m kernelgen.verify.worker`: the sandboxed worker's entry point (the judge starts it)."""

import sys

from kernelgen.verify.worker.server import main

sys.exit(main())
