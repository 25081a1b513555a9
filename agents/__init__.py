"""igniter-agent: runs MPS-partitioned inference servers on a GPU VM, keeps them alive, reports them."""

DIST = "igniter-autoscaler"  # the one distribution both commands ship in: pyproject.toml's version is the only one


def version() -> str:
    """The installed distribution's version (`igniter-agent --version`); a bare checkout says so.
    importlib.metadata is imported here, not with the package: it took 50 ms of every agent
    command's start (`igniter-agent apply` runs on the node at each new assignment)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _dist_version

    try:
        return _dist_version(DIST)
    except PackageNotFoundError:
        return "0+unknown (not installed: pip install -e .)"
