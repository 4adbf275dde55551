"""``python -m synclab``: the lab's command line (:mod:`synclab.lab.cli`)."""

import os
import signal
import sys

from synclab.lab.cli import CHAPTERS, main  # noqa: F401  (CHAPTERS: the chapters by name)

if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # its reader went away (`check --json | head`): end as a shell's pipe ends a command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to say, nowhere to say it
        code = 128 + signal.SIGPIPE
    sys.exit(code)
