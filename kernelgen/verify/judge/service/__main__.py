"""`python -m kernelgen.verify.judge.service`: the KernelGen service's process (kernelgen.serve starts it)."""

import sys

from kernelgen.verify.judge.service.daemon import main

sys.exit(main())
