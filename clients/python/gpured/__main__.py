# __main__.py: `python3 -m gpured` runs gpured-cli.
import sys

from .cli import main

sys.exit(main())
