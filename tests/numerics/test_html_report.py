"""The HTML report of every kind (lint, audit, compare, rope) opened in headless Chromium: the page renders with its
title, table rows and SVG plots with non-empty paths, and the screenshot is not blank."""

import os
import re
import shutil
import subprocess
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from torch import nn

from ampdoctor import audit_step, compare
from ampdoctor.lint import lint_paths
from ampdoctor.numerics.rope import rope_report
from ampdoctor.numerics.views import rope_view
from ampdoctor.report import render_html

ROOT = Path(__file__).resolve().parents[2]


def reports():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 2))
    x = torch.randn(2, 8)
    return {
        "lint": lint_paths([str(ROOT / "examples" / "code")]).with_info(command="lint"),
        "audit": audit_step(model, (x,), loss_fn=lambda out, batch: out.float().square().mean(), policy="bf16-mixed").report,
        "compare": compare(model, (x,), policy="bf16-true").report,
        "rope": rope_view(rope_report(32, 10000.0, 2048, pairs=256, samples=64)),
    }


def browse(page: Path, shot: Path) -> str:
    """The DOM after the page ran, and a screenshot, from one headless Chromium run."""
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                               f"--screenshot={shot}", "--dump-dom", "--window-size=1200,900", page.as_uri()],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def png_is_not_blank(path: Path) -> bool:
    """A real page's screenshot: a valid PNG whose pixels are not all one colour."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    idat = b"".join(data[i + 8:i + 8 + int.from_bytes(data[i:i + 4], "big")] for i in (m.start() - 4 for m in re.finditer(b"IDAT", data)))
    pixels = zlib.decompress(idat)
    return len(set(pixels[1000:200000:7])) > 8


def require_chromium() -> None:
    """`make test` installs chromium where it can (root on Debian/Ubuntu). Elsewhere the test is reported as not run
    with the command that enables it; under AMPDOCTOR_REQUIRE_BROWSER=1 (set by .ci/run) a missing browser fails."""
    if shutil.which("chromium"):
        return
    message = "chromium is not installed: `sudo apt-get install chromium` (Debian/Ubuntu) runs this test"
    if os.environ.get("AMPDOCTOR_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


def test_every_report_kind_renders_in_headless_chromium(tmp_path):
    require_chromium()
    pages = {}
    for kind, report in reports().items():
        pages[kind] = tmp_path / f"{kind}.html"
        pages[kind].write_text(render_html(report), encoding="utf-8")
        assert "http://" not in pages[kind].read_text().replace("http://www.w3.org/2000/svg", "")  # self-contained
    with ThreadPoolExecutor(max_workers=4) as pool:
        doms = dict(zip(pages, pool.map(lambda k: browse(pages[k], tmp_path / f"{k}.png"), pages)))
    for kind, dom in doms.items():
        assert re.search(r"<title>ampdoctor [^<]+</title>", dom), kind
        assert len(re.findall(r"<tr>", dom)) >= 3, kind
        if kind in ("compare", "rope"):  # lint and audit reports carry no chart (an audit with value ranges would)
            paths = re.findall(r'<path d="([^"]*)"', dom)
            assert len([d for d in paths if len(d) > 10]) >= 3, kind
        assert png_is_not_blank(tmp_path / f"{kind}.png"), kind
    assert "AMP208" in doms["compare"] and "bf16-positions" in doms["rope"] and "AMP002" in doms["lint"]


def test_a_missing_browser_is_not_run_on_a_laptop_and_fails_in_ci(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("AMPDOCTOR_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="sudo apt-get install chromium"):
        require_chromium()
    monkeypatch.setenv("AMPDOCTOR_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed"):
        require_chromium()
