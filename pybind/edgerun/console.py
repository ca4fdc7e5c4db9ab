"""The terminal: progress bars and tables, drawn with rich, and only on a terminal.

    from edgerun import console
    with console.progress("converting", total=n_bytes) as bar:
        for name, nbytes in work:
            bar.advance(nbytes, name)
    if console.is_terminal(sys.stdout):
        console.table(["board", "arch"], rows)
    else:
        print(plain_text)                       # what scripts and tests read

Piped output, logs and --json stay exactly as they were before this module:
a bar on a pipe is noise in a log, and the text there is what scripts parse.
So every function here does nothing (progress) or is not called (tables)
unless its stream is a terminal; rich itself is imported only then, which
also keeps it off the import path of `edgerun convert` and of the board.

EDGERUN_PLAIN=1 turns the terminal drawing off (a terminal that cannot show
it, or a screen recording that should look like a log).
"""
import os
import sys


def is_terminal(stream=None):
    stream = sys.stdout if stream is None else stream
    if os.environ.get("EDGERUN_PLAIN"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):     # no isatty, or a closed file
        return False


def _console(stream):
    from rich.console import Console
    return Console(file=stream, highlight=False, soft_wrap=False)


class _Quiet:
    """The progress object off a terminal: every call does nothing."""
    on = False

    def update(self, completed=None, total=None, description=None):
        pass

    def advance(self, amount=1, description=None):
        pass

    def note(self, line):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# The one live display: rich draws one at a time, so a bar opened while
# another shows (a build inside a board test) becomes a second line of it.
_live = {"progress": None, "users": 0}


def _count_column():
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Count(ProgressColumn):
        """n/m for steps, sizes for bytes."""

        def render(self, task):
            if task.fields.get("unit") == "bytes":
                done, total = _size(task.completed), _size(task.total) if task.total else "?"
            else:
                done, total = f"{task.completed:.0f}", f"{task.total:.0f}" if task.total else "?"
            return Text(f"{done}/{total}")
    return Count()


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


class _Bar(_Quiet):
    """One bar on `stream`, shown from `with` to its end and then removed (a
    finished bar says nothing the summary line after it does not)."""
    on = True

    def __init__(self, description, total, stream, unit):
        self._label, self._total, self._stream, self._unit = description, total, stream, unit
        self._p = self._task = None

    def __enter__(self):
        if _live["progress"] is None:
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn
            _live["progress"] = Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
                                         _count_column(), TimeElapsedColumn(), console=_console(self._stream),
                                         transient=True)
            _live["progress"].start()
        _live["users"] += 1
        self._p = _live["progress"]
        self._task = self._p.add_task(self._label, total=self._total, unit=self._unit)
        return self

    def _describe(self, description):
        return self._label if description is None else f"{self._label}: {description}"

    def update(self, completed=None, total=None, description=None):
        if self._p is None:
            return
        kw = {"description": self._describe(description)} if description is not None else {}
        if total is not None:
            kw["total"] = total
        if completed is not None:
            kw["completed"] = completed
        self._p.update(self._task, **kw)

    def advance(self, amount=1, description=None):
        if self._p is None:
            return
        if description is not None:
            self._p.update(self._task, description=self._describe(description))
        self._p.advance(self._task, amount)

    def note(self, line):
        """A line that stays, printed above the bar."""
        if self._p is None:
            print(line, file=self._stream)
        else:
            self._p.console.print(line, markup=False, highlight=False)

    def close(self):
        if self._p is None:
            return
        self._p.remove_task(self._task)
        self._p = None
        _live["users"] -= 1
        if _live["users"] == 0:
            _live["progress"].stop()
            _live["progress"] = None


def quiet():
    """A progress object that shows nothing (for a caller that asked for no output)."""
    return _Quiet()


def progress(description, total=None, stream=None, unit=None):
    """A progress bar on `stream` (default stderr) when it is a terminal, else an
    object whose calls do nothing. It shows inside `with`; `total` may come
    later through update(total=); unit="bytes" shows sizes instead of counts."""
    stream = sys.stderr if stream is None else stream
    if not is_terminal(stream):
        return _Quiet()
    return _Bar(description, total, stream, unit)


def table(columns, rows, title=None, stream=None, right=()):
    """Prints `rows` (sequences of str) under `columns` as a rich table. Call it
    only where is_terminal(stream): off a terminal the caller prints its plain
    text, which is what is pinned. `right`: the columns to align right (numbers)."""
    from rich.table import Table
    stream = sys.stdout if stream is None else stream
    t = Table(title=title, title_justify="left", header_style="bold", box=_box())
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left", no_wrap=c in right, overflow="fold")
    for r in rows:
        t.add_row(*(str(x) for x in r))
    _console(stream).print(t)


def _box():
    from rich import box
    return box.SIMPLE_HEAD


def rule(text, stream=None):
    """A heading line between a table's sections."""
    stream = sys.stdout if stream is None else stream
    _console(stream).rule(text, align="left")
