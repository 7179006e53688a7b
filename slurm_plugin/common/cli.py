"""Shared behaviour of every tiresias-slurm command line (dlsubmit, dlqueue, dlprio, dlgres,
dlcluster): a reader that closes stdout early (``dlprio simulate | head -1``) is not an error,
one argument parser for all of them (:class:`ArgumentParser`), and the one way user text
(a file name, a job name, a Slurm message) is made safe to print (:func:`visible`).

The recipe is the one in Python's documentation (``signal`` module, "Note on SIGPIPE"): catch
:class:`BrokenPipeError`, point file descriptor 1 at ``/dev/null`` so the interpreter's final
flush cannot fail again, and exit. The exit status is **0**, not 141 (128 + SIGPIPE): the
command did what the reader asked for, and ``set -o pipefail`` scripts that stop reading early
should not see a failure (this matches what ``dlqueue`` always did). Nothing is printed. A
stdout that cannot be written otherwise (``> /dev/full``, an I/O error, closed before the
command started) is a failure: one line ``PROG: cannot write to stdout: REASON`` and exit 1.

:class:`ArgumentParser` mends one CPython bug: Python before 3.11.9 / 3.12.3 (Debian 12 ships
3.11.2) drops an explicit option value ``--``: ``--node=--`` parses to the empty list ``[]``
instead of the string ``"--"`` (CPython issue gh-109475, fixed upstream by gh-114814), so the
value reaches the command as a list and crashes it with a TypeError instead of a clear error
naming the option. Here it is the string ``"--"`` again and goes through the option's ``type``
and ``choices`` like any other value, so each command's own validation names the option.
``--`` alone (not after ``=``) keeps argparse's meaning: the end of the options.

It also holds the rule every command follows for an empty option value (``--ledger=``,
``-u ''``): it is a mistake (a variable that expanded to nothing), never read as "not given" nor
as "everybody", so the parse stops with one line ``PROG: --opt: empty value; give a value or
leave the option out`` and exit status 2 (:data:`EXIT_USAGE`). An option whose ``add_argument``
passes ``allow_empty=True`` takes ``""`` as its value.

A value that starts with ``-`` given as a separate word (``dlqueue -u -x``, ``dlsubmit --param
-a``, also ``--`` itself: ``dlqueue -u -- x``) is taken by argparse for an option, and its error is
the multi-line usage text; here it is one line naming the option and the fix: ``PROG:
-u/--user: expected a value, got the option-like word -x; a value that starts with '-' is joined
to its option: --user=-x``, exit 2. An option that is the last word (``dlqueue -u``, which is
what ``-u''`` and ``-u $UNSET`` become in a shell) is one line too: ``PROG: -u/--user: expected a
value, got the end of the command line; give a value or leave the option out``.

Every other usage error argparse finds (an unknown option, a missing argument, a bad
``choices`` or ``type`` value, and the ``parser.error`` calls of the commands themselves) is one
line too, without the usage block: ``PROG: OPTION: reason``, e.g. ``dlsubmit:
--container-runtime: invalid choice 'docker' (choose from none, pyxis, apptainer)``, exit 2
(:meth:`ArgumentParser.error`); ``PROG --help`` shows the usage.

Part of :mod:`slurm_plugin.common` (where it sits and why: its package doc).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import re
import sys
import unicodedata
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

EXIT_CLOSED_STDOUT = 0
EXIT_USAGE = 2
EXIT_STDOUT_FAILED = 1
"""A stdout that cannot be written (disk full, an I/O error, closed before the command started):
:attr:`slurm_plugin.common.exits.Exit.FAILED`, a write that failed."""
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

class Main(Protocol):
    """A command's ``main(argv=None) -> int`` (argv None: ``sys.argv[1:]``)."""

    def __call__(self, argv: list[str] | None = None) -> int: ...


class StdoutError(OSError):
    """Writing or flushing stdout failed with an error other than a closed pipe."""


class _GuardedStdout:
    """stdout as the command sees it: every write and flush that fails with an ``OSError``
    other than :class:`BrokenPipeError` raises :class:`StdoutError` instead, so the wrapper can
    tell a failed stdout from any other ``OSError`` of the command; the rest is the stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.errno, exc.strerror) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _quiet(stream: Any) -> None:
    """Point ``stream``'s file descriptor at /dev/null, so the interpreter's final flush cannot
    fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def quiet_on_closed_stdout(main: Main) -> Main:
    """Wrap a ``main(argv) -> int`` so a closed stdout ends it quietly with status 0, and a
    stdout that cannot be written ends it with one line and status 1.

    stdout is flushed inside the wrapper, so a pipe closed before the buffered output was written
    is caught here too rather than at interpreter exit. A write that fails otherwise (``>
    /dev/full``: ENOSPC; an I/O error) prints ``PROG: cannot write to stdout: REASON`` on stderr
    and returns :data:`EXIT_STDOUT_FAILED`; so does a command started with stdout closed
    (``>&-``), before it does anything, since what it would print (job ids, figures) would be
    lost. Other exceptions pass through unchanged.
    """

    @functools.wraps(main)
    def wrapper(argv: list[str] | None = None) -> int:
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "command"
        real = sys.stdout
        if real is None:
            print(f"{prog}: cannot write to stdout: it is closed; run it with stdout open "
                  "(> /dev/null to discard what it prints)", file=sys.stderr)
            return EXIT_STDOUT_FAILED
        sys.stdout = _GuardedStdout(real)
        try:
            rc = main(argv)
            sys.stdout.flush()
            return rc
        except BrokenPipeError:
            _quiet(real)
            return EXIT_CLOSED_STDOUT
        except StdoutError as exc:
            _quiet(real)
            print(f"{prog}: cannot write to stdout: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_STDOUT_FAILED
        finally:
            if isinstance(sys.stdout, _GuardedStdout):
                sys.stdout = real
            with contextlib.suppress(OSError, ValueError):
                real.flush()

    return wrapper


def visible(text: object) -> str:
    """``str(text)`` with characters that would hide, move or restyle output written as escapes:
    the one escaping of every table cell and every message that quotes a user's text.

    Newline, CR and tab become ``\\n``, ``\\r``, ``\\t``; other control characters (ESC, DEL,
    C1) ``\\xNN``; invisible format characters (bidi overrides, zero-width, U+2028/9)
    ``\\uXXXX``; a lone surrogate (a file name's undecodable byte, which a UTF-8 stream cannot
    even encode) ``\\udcNN``. Everything else, rich markup and backslashes included, stays as
    typed, so ``[red]x[/red]`` is shown as those 14 characters. Backslashes are not doubled: a
    name that literally contains ``\\n`` looks like one with a newline (``--json`` has the exact
    text).
    """
    if not isinstance(text, str):
        text = str(text)
    if text.isprintable():   # no Cc/Cf/Cs/Zl/Zp character (str.isprintable): nothing to escape
        return text
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif cat == "Cc":
            out.append(f"\\x{ord(ch):02x}")
        elif cat in ("Cf", "Cs", "Zl", "Zp"):
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    return "".join(out)


_CHOICE_RE = re.compile(r"invalid choice: (?P<value>.*) \(choose from (?P<choices>.*)\)$", re.S)


def one_line_usage_error(message: str) -> str:
    """argparse's error ``message`` in this project's form: ``OPTION: reason`` (argparse's
    ``argument `` prefix dropped), the allowed choices listed without their quotes."""
    message = message.removeprefix("argument ")
    m = _CHOICE_RE.search(message)
    if m:
        choices = ", ".join(c.strip().strip("'") for c in m["choices"].split(","))
        message = f"{message[:m.start()]}invalid choice {m['value']} (choose from {choices})"
    return message


class ArgumentParser(argparse.ArgumentParser):
    """:class:`argparse.ArgumentParser` where ``--opt=--`` gives ``opt == "--"``, an empty
    option value is refused unless the option allows it, and an option followed by a word
    that starts with ``-`` is a one-line error (see module doc). Sub-parsers made by
    :meth:`add_subparsers` are of the same class."""

    def add_argument(self, *args: Any, allow_empty: bool = False, **kwargs: Any) -> argparse.Action:
        """:meth:`argparse.ArgumentParser.add_argument`, plus ``allow_empty``: whether the option
        takes ``""`` as a value (default False: ``--opt=`` is exit 2)."""
        action = super().add_argument(*args, **kwargs)
        action.allow_empty = allow_empty   # type: ignore[attr-defined]
        return action

    def fail(self, message: str) -> NoReturn:
        """Stop the parse with the one-line error ``PROG: message`` on stderr and exit status
        :data:`EXIT_USAGE` (2); ``PROG`` is the command (``dlprio``, not ``dlprio status``).
        Raises SystemExit."""
        print(f"{self.prog.split()[0]}: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)

    def error(self, message: str) -> NoReturn:
        """argparse's usage error as one line (:meth:`fail`), without the usage block:
        ``argument -u/--user: x`` becomes ``-u/--user: x`` and argparse's ``invalid choice:
        'docker' (choose from 'none', 'pyxis')`` becomes ``invalid choice 'docker' (choose from
        none, pyxis)``. A missing argument of a command line that also holds an unknown
        option (``dlprio simulate --trase t.csv``, ``dlprio explain -x``) is reported as that
        option (``unrecognized arguments: --trase``), the mistake to fix, not as the argument
        it hid. Raises SystemExit (status 2)."""
        if message.startswith("the following arguments are required"):
            unknown = self._unknown_options()
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        self.fail(visible(one_line_usage_error(message)))

    def _unknown_options(self) -> list[str]:
        """The option-like words of the parse (up to ``--``) that name none of this parser's
        options, its unambiguous ``--`` abbreviations or a short option with its value joined
        (``-j5``)."""
        known = self._option_string_actions
        longs = [o for o in known if o.startswith("--")]
        out = []
        for word in getattr(self, "_words", []):
            if word == "--":
                break
            # argparse takes these for values: no leading '-', '-' alone, a negative number,
            # a word with a space (``--jobs-csv '-o x.csv'``)
            if (not word.startswith("-") or word == "-" or " " in word
                    or self._negative_number_matcher.match(word)):
                continue
            name = word.split("=", 1)[0]
            if name in known or (not word.startswith("--") and word[:2] in known):
                continue
            if word.startswith("--") and self.allow_abbrev and any(o.startswith(name) for o in longs):
                continue
            out.append(word)
        return out

    def _parse_known_args(self, arg_strings: list[str], *args: Any, **kwargs: Any) -> Any:
        self._words = list(arg_strings)   # what _match_argument's pattern is made of
        return super()._parse_known_args(arg_strings, *args, **kwargs)

    def _match_argument(self, action: argparse.Action, arg_strings_pattern: str) -> int:
        try:
            return super()._match_argument(action, arg_strings_pattern)
        except argparse.ArgumentError:
            words = getattr(self, "_words", [])
            at = len(words) - len(arg_strings_pattern)   # one pattern letter per word
            if not action.option_strings:
                raise
            options = "/".join(action.option_strings)
            if arg_strings_pattern[:1] in ("O", "-") and 0 <= at < len(words):  # -x, --
                word = visible(words[at])
                name = next((o for o in action.option_strings if o.startswith("--")),
                            action.option_strings[0])
                self.fail(f"{options}: expected a value, got the option-like word {word}; a "
                          f"value that starts with '-' is joined to its option: {name}={word}")
            if not arg_strings_pattern:   # the last word (what -o'' or -o "$UNSET" becomes)
                self.fail(f"{options}: expected a value, got the end of the command line; "
                          "give a value or leave the option out")
            raise

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        if (action.option_strings and "" in arg_strings
                and not getattr(action, "allow_empty", False)):
            self.fail(f"{'/'.join(action.option_strings)}: empty value; give a value or leave "
                      "the option out")
        if (action.option_strings and arg_strings == ["--"]
                and action.nargs in (None, argparse.OPTIONAL)):
            value = self._get_value(action, "--")
            self._check_value(action, value)
            return value
        return super()._get_values(action, arg_strings)
