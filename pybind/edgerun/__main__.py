"""`python -m edgerun ...` is the `edgerun` command."""
import sys

from .cli import main

sys.exit(main())
