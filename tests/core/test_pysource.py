"""The chapter-source parser is safe to call from two threads at once (a Dask worker's two runs)."""
import gc
import threading

from paperlib.core.pysource import parse

SOURCE = "\n".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)]" for i in range(200))


class _SwitchThreads:
    """Garbage whose finalizer, run by the collector in the middle of a parse, lets another thread
    parse and waits (at most a second) for it: without the lock that thread's parse resets the
    shared recursion depth under the first one's feet."""
    fired = False

    def __init__(self, go, done):
        self.go, self.done, self.cycle = go, done, self

    def __del__(self):
        if not _SwitchThreads.fired:
            _SwitchThreads.fired = True
            self.go.set()
            self.done.wait(1)


def test_a_parse_interrupted_by_another_threads_parse_succeeds():
    go, done, errors = threading.Event(), threading.Event(), []

    def other():
        go.wait(5)
        try:
            parse(SOURCE)
        except SystemError as error:
            errors.append(error)
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    threshold = gc.get_threshold()
    _SwitchThreads.fired = False
    _SwitchThreads(go, done)  # unreachable at once: collected at the first allocation of the parse below
    gc.set_threshold(1)
    try:
        parse(SOURCE)
    except SystemError as error:
        errors.append(error)
    finally:
        gc.set_threshold(*threshold)
        go.set()
        thread.join()
    assert _SwitchThreads.fired, "the collector did not run during the parse: the test tested nothing"
    assert errors == []


def test_magics_and_shell_escapes_are_dropped():
    assert len(parse("%matplotlib inline\n!ls\nx = 1", drop_magics=True).body) == 1
