"""``python -m hilbench`` is the ``hilbench`` command."""

import sys

from hilbench.cli import main

sys.exit(main())
