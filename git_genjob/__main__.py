"""`python -m git_genjob`: the entry the hook scripts call."""

import sys

from git_genjob.entry import main

sys.exit(main())
