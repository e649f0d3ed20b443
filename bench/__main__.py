"""Entry point of `python -m bench`."""

import sys

from bench.runner import main

sys.exit(main())
