import sys

from paperlib.core.cli import main

sys.exit(main())
