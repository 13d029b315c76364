import sys

from wheelforge.interface.entry import main

sys.exit(main())
