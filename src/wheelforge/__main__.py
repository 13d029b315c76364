import sys

from wheelforge.interface.cli import main

sys.exit(main())
