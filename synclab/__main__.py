"""``python -m synclab``: the lab's command line (:mod:`synclab.lab.cli`)."""

import sys

from synclab.lab.cli import CHAPTERS, main  # noqa: F401  (CHAPTERS: the chapters by name)

if __name__ == "__main__":
    sys.exit(main())
