"""``python -m synclab``: the lab's command line (:mod:`synclab.lab.cli`)."""

import signal
import sys

from synclab.lab.check_server import flush_what_is_read
from synclab.lab.cli import CHAPTERS, main  # noqa: F401  (CHAPTERS: the chapters by name)

if __name__ == "__main__":
    try:
        code = main()
    except BrokenPipeError:  # its reader went away (`check --json | head`): end as a shell's pipe ends a command
        code = 128 + signal.SIGPIPE
    flush_what_is_read()
    sys.exit(code)
