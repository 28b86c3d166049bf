#!/usr/bin/env python3
"""Execute every notebook in this folder headless (used by .ci/run).

Each notebook finds the CLI through the PCPMODEL environment variable (the release binary CI
builds); without it, notebooks fall back to `cargo run --release --quiet --`.
Executed copies are written to notebooks/out/ so the committed notebooks stay clean.
"""
import pathlib
import sys

import nbformat
from nbclient import NotebookClient

here = pathlib.Path(__file__).resolve().parent
out = here / "out"
out.mkdir(exist_ok=True)
failed = []
for path in sorted(here.glob("*.ipynb")):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(here)}})
    try:
        client.execute()
        nbformat.write(nb, out / path.name)
        print(f"ok      {path.name}")
    except Exception as e:  # report every failing notebook, then fail
        print(f"FAILED  {path.name}: {e}", file=sys.stderr)
        failed.append(path.name)
if failed:
    sys.exit(f"{len(failed)} notebook(s) failed: {', '.join(failed)}")
print(f"{len(list(here.glob('*.ipynb')))} passed, 0 failed")
