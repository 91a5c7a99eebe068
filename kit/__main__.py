"""`python -m kit`: the `kit` command."""
import sys

from kit.cli import main

sys.exit(main())
