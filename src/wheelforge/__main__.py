import sys

from wheelforge.cli.entry import main

sys.exit(main())
