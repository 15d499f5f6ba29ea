"""The incident reproductions of examples/incidents on a CUDA device: the real error each raises there, what
`ampdoctor run` reports for it, and what `ampdoctor explain` says about the real error text.

The scripts are written for the CPU (CI has no GPU). Each is copied with its tensors made on CUDA
(`torch.set_default_device("cuda")`) and its autocast/GradScaler device strings set to "cuda"; nothing else
changes. For each script the bench runs it three ways, in fresh processes:
1. plain `python script.py`: exit status and the last line of the error (the text a user would paste);
2. `ampdoctor run --format json script.py`: exit status, error/warning findings with rule and line;
3. `ampdoctor explain` on the plain run's error text: the first candidate and whether it is a guess.

    python bench/cuda_incidents.py [--json OUT.json]

Needs a CUDA device (`--cpu` runs the scripts as written, a check of the bench itself); prints a Markdown table
with the run-time rule each reproduction is about (`EXPECTED`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "examples" / "incidents"
# The run-time rule each reproduction is about (incident 1: the promotion that feeds the failing bmm); None: a correct script.
EXPECTED = {
    "incident1_neox_rotary.py": "AMP201",
    "incident3_grad_precision.py": "AMP003",
    "incident4_gradscaler_bf16.py": "AMP004",
    "incident5_rotary_dtype.py": "AMP005",
    "correct_bf16_mixed.py": None,
}


def cuda_copy(source: Path, folder: Path, cuda: bool = True) -> Path:
    """The script copied into `folder`, its tensors and autocast/GradScaler devices on CUDA (as written with `cuda` False)."""
    text = source.read_text()
    if cuda:
        text = re.sub(r"""(autocast|GradScaler)\(\s*(["'])cpu\2""", r"\1(\2cuda\2", text)
        # After the first `import torch` line: every tensor and module the script makes lands on the GPU.
        text = re.sub(r"^import torch$", 'import torch\ntorch.set_default_device("cuda")', text, count=1, flags=re.M)
    out = folder / source.name
    out.write_text(text)
    return out


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def last_error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def one(name: str, folder: Path, cuda: bool) -> dict:
    script = cuda_copy(INCIDENTS / name, folder, cuda)
    plain = run([sys.executable, str(script)], folder)
    error = last_error_line(plain.stderr) if plain.returncode else ""
    report_path = folder / (script.stem + ".json")
    audited = run([sys.executable, "-m", "ampdoctor", "run", "--format", "json", "-o", str(report_path), str(script)], folder)
    findings, messages = [], []
    if report_path.exists():
        report = json.loads(report_path.read_text())
        for f in report.get("findings", []):
            if f.get("severity") in ("error", "warning"):
                loc = f.get("location") or {}
                findings.append(f"{f.get('id')} {f['severity']} @{loc.get('line', '?')}")
                messages.append(f"{f.get('id')} {loc.get('op')}: {f.get('message', '')[:300]}")
    explained = None
    if error:
        text_file = folder / (script.stem + ".err")
        text_file.write_text(plain.stderr)
        answer = run([sys.executable, "-m", "ampdoctor", "explain", "--format", "json", "--file", str(text_file)], folder)
        try:
            cands = json.loads(answer.stdout).get("candidates", [])
            explained = (cands[0].get("id"), bool(cands[0].get("guess"))) if cands else ("-", False)
        except (json.JSONDecodeError, AttributeError):
            explained = ("unreadable: " + answer.stdout[:80], False)
    return {"script": name, "expected": EXPECTED[name], "plain_rc": plain.returncode, "error": error,
            "audit_rc": audited.returncode, "audit_findings": findings, "audit_messages": messages, "audit_stderr_tail": audited.stderr[-400:],
            "explain": explained}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--cpu", action="store_true", help="run the scripts as written, on the CPU (a check of this bench)")
    args = parser.parse_args(argv)
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("cuda_incidents: no CUDA device", file=sys.stderr)
        return 2
    print(f"{'cpu' if args.cpu else torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in EXPECTED:
            rows.append(one(name, Path(tmp), not args.cpu))
    print("| script | expected | plain run | real error (last line) | audit exit | audit warnings/errors | explain first |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ex = f"{r['explain'][0]}{' (guess)' if r['explain'][1] else ''}" if r["explain"] else "-"
        print(f"| {r['script']} | {r['expected'] or '-'} | exit {r['plain_rc']} | {r['error'][:160] or '-'} | {r['audit_rc']} | "
              f"{'; '.join(r['audit_findings']) or '-'} | {ex} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
