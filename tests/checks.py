"""checks.py: what the tests/check_*.py scripts share: the list of failed checks and check(),
which adds one (and prints it at once, so that a slow script's log shows a failure when it
happens). A script imports both (its own folder is on Python's path when it runs as a file), runs
every check instead of stopping at the first, and exits with status(): 1 where any failed."""
import os

failures = []


def check(cond, what):
    """Records `what` as failed unless cond holds; returns cond, so a later check may depend on it."""
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def status():
    """The script's exit status: 1 where a check failed, else 0."""
    return 1 if failures else 0


def closed_reader():
    """The write end of a pipe whose read end is already closed, for a child's stdout (close it in
    the parent once the child has started): the child's first write fails with EPIPE whenever it
    comes. Closing a subprocess.PIPE's reader after the start instead races with a quick first
    write, which the pipe's buffer would take."""
    r, w = os.pipe()
    os.close(r)
    return w
