"""What the entry scripts share: user errors become one line on stderr and exit code 2."""

import sys
from collections.abc import Callable
from typing import NoReturn

from .loader import InputError

BAD_INPUT = 2
"""Exit status for a bad input file, an unwritable output, or bad arguments (as argparse)."""


def run_tool(prog: str, main: Callable[[], int]) -> NoReturn:
    """Exit with ``main()``'s status. An ``InputError`` (a missing or malformed input) or an
    ``OSError`` (say, an output folder that cannot be created) prints
    ``'<prog>: <message>'`` on stderr, without a traceback, and exits with ``BAD_INPUT``."""
    try:
        status = main()
    except InputError as error:
        status = _fail(prog, str(error))
    except OSError as error:
        where = f"{error.filename}: {error.strerror}" if error.filename else str(error)
        status = _fail(prog, where)
    sys.exit(status)


def _fail(prog: str, message: str) -> int:
    """Print the one-line error; return ``BAD_INPUT``."""
    print(f"{prog}: {message}", file=sys.stderr)
    return BAD_INPUT
