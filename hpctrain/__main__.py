"""`hpctrain` and `python -m hpctrain`: the command line, in a process of its own."""


def main() -> None:
    # Before the commands' modules are imported, so that their dataclasses use it; not in
    # cli.main, which tests call in their own process (hpctrain/codecache.py says why).
    from hpctrain import codecache

    codecache.install()
    from hpctrain.cli import main as run

    run()


if __name__ == "__main__":
    main()
