"""checks.py: what the tests/check_*.py scripts share: the list of failed checks and check(),
which adds one (and prints it at once, so that a slow script's log shows a failure when it
happens). A script imports both (its own folder is on Python's path when it runs as a file), runs
every check instead of stopping at the first, and exits with status(): 1 where any failed."""
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
