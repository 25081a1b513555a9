"""What each install puts on disk: the agent (a GPU VM) and the central service, in fresh venvs.

Builds the wheel from this checkout, installs it into fresh virtual environments under a temporary
directory with pip's real dependency resolution (torch first, `pip install torch==2.13.0`, as the
Makefile does), and sums each installed distribution's files (its RECORD), pip and setuptools left
out. Writes benchmarks/results/install_size.json, which README.md quotes. Takes a few minutes and
the package index (here: the configured wheel-house).

    python benchmarks/install_size.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _machine import describe

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "install_size.json"
TORCH = "torch==2.13.0"
BASELINE = {"pip", "setuptools"}
TORCH_DEPS = {"torch", "sympy", "mpmath", "networkx", "jinja2", "markupsafe", "fsspec", "filelock"}
PLOT_DEPS = {"matplotlib", "contourpy", "cycler", "fonttools", "kiwisolver", "packaging", "pillow", "pyparsing"}
SIZES = """
import json, sys
from importlib.metadata import distributions
from pathlib import Path
site = Path(sys.argv[1])
print(json.dumps({d.metadata["Name"].lower(): sum((site / f).stat().st_size for f in d.files or [] if (site / f).is_file())
                  for d in distributions(path=[str(site)])}))
"""


def pip(venv: Path, *args: str) -> None:
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *args], check=True)


def sizes(venv: Path) -> dict[str, int]:
    site = next((venv / "lib").glob("python3*/site-packages"))
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", SIZES, str(site)], capture_output=True, text=True, check=True
    )
    return {k: v for k, v in json.loads(done.stdout).items() if k not in BASELINE}


def mb(sizes: dict[str, int], names: set[str] | None = None) -> float:
    return round(sum(v for k, v in sizes.items() if names is None or k in names) / 2**20, 1)


def venv(tmp: Path, name: str) -> Path:
    path = tmp / name
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    pip(path, "--upgrade", "pip")
    return path


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="igniter-install-size-") as tmp_name:
        tmp = Path(tmp_name)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "-q",
                "-w",
                str(tmp),
                str(ROOT),
            ],
            check=True,
        )
        (wheel,) = tmp.glob("*.whl")
        agent = venv(tmp, "agent")
        pip(agent, TORCH)
        pip(agent, f"{wheel}[agent]")
        service = venv(tmp, "service")
        pip(service, f"{wheel}[service]")
        a, s = sizes(agent), sizes(service)
        pip(service, f"{wheel}[plot]")
        plot = {k: v for k, v in sizes(service).items() if k not in s}
    result = {
        "machine": describe(),
        "torch": TORCH,
        "agent": {
            "total_mb": mb(a),
            "torch_and_its_deps_mb": mb(a, TORCH_DEPS),
            "without_torch_mb": round(mb(a) - mb(a, TORCH_DEPS), 1),
            "distributions": len(a),
            "names": sorted(a),
        },
        "service": {"total_mb": mb(s), "distributions": len(s), "names": sorted(s)},
        "plot_adds_mb": mb(plot),
    }
    assert not PLOT_DEPS - set(plot) - {"packaging"}, "the plot set changed: update PLOT_DEPS"
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"agent: {result['agent']['total_mb']} MB ({result['agent']['torch_and_its_deps_mb']} MB torch and its deps)")
    print(f"service: {result['service']['total_mb']} MB, [plot] adds {result['plot_adds_mb']} MB; wrote {OUT}")


if __name__ == "__main__":
    main()
