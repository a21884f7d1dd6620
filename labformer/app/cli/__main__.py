"""``python -m labformer.app.cli`` (and ``torchrun -m labformer.app.cli``): the labformer
command."""

import sys

from labformer.app.cli import main

sys.exit(main())
