"""`hpctrain` and `python -m hpctrain`: the command line, in a process of its own."""

import gc


def main() -> None:
    # Before the commands' modules are imported, so that their dataclasses use it; not in
    # cli.main, which tests call in their own process (hpctrain/startup/codecache.py says why).
    import sys

    from hpctrain.startup import codecache

    codecache.install(sys.argv[1:])
    from hpctrain.cli import main as run

    try:
        run()
    finally:
        # The process ends next, and Python's shutdown would search every object it holds for
        # reference cycles once more: 10 ms of a 90 ms submit, for memory the exit frees anyway.
        # Frozen objects are left out of that search; everything else of the shutdown (atexit,
        # flushing, closing) is as before, and Python never promised __del__ at exit.
        gc.freeze()


if __name__ == "__main__":
    main()
