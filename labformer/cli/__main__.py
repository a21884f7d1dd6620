"""``python -m labformer.cli`` (and ``torchrun -m labformer.cli``): the labformer command."""

import sys

from . import main

sys.exit(main())
