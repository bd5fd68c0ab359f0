"""``python -m gramagent.testing --script FILE [--port N] [--loop]``: serve a script."""

import sys

from gramagent.testing._scripted import main

sys.exit(main())
