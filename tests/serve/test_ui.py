"""The /ui page in headless Chromium (Debian package `chromium`; skipped where it is not installed)."""
from __future__ import annotations

import re
import shutil
import subprocess
import urllib.parse

import pytest

CHROMIUM = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)")

TEXT = "Mary Smith finds Anna in New York ."


def chromium(tmp_path, url: str, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--window-size=1200,900", "--virtual-time-budget=10000", *args, url],
        capture_output=True, text=True, timeout=120)


def page_url(server, token: int) -> str:
    return f"{server.url}/ui?" + urllib.parse.urlencode({"text": TEXT, "autorun": "1", "token": str(token)})


def test_page_shows_tags_entities_and_attention(ner_server, tmp_path):
    dom = chromium(tmp_path, page_url(ner_server, 5), "--dump-dom").stdout
    shown = dom[dom.index('<div id="tokens">'):dom.index('<div id="attn"')]  # not the <script>'s templates
    tokens = re.findall(r'<span class="w">([^<]*)</span><span class="t">([^<]*)</span>', shown)
    assert [w for w, _ in tokens] == TEXT.split(), dom[dom.index('<div id="error">'):][:500]
    assert {t for _, t in tokens} <= {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"}
    entities = dom[dom.index('<div id="entities">'):dom.index('<div id="tokens">')]
    marked = re.findall(r"<mark[^>]*>([^<]*)<sub>(\w+)</sub>", entities)  # entities highlighted in the text
    assert marked and all(text in TEXT and label in ("PER", "LOC") for text, label in marked)
    assert re.search(r'id="attn" style="display: block;?"', dom), "attention panel not shown"
    assert "New" in re.search(r'id="attn-token">([^<]*)<', dom).group(1)
    assert 'class="tok sel"' in dom


def test_screenshot_shows_a_heatmap(pos_server, tmp_path):
    import matplotlib.image

    png = tmp_path / "ui.png"
    chromium(tmp_path, page_url(pos_server, 2), f"--screenshot={png}")
    assert png.is_file() and png.stat().st_size > 10_000
    rgb = matplotlib.image.imread(str(png))[..., :3]
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    heat = (b - r > 0.15) & (b - g > 0.1)  # the heatmap's blue cells
    assert heat.sum() > 5_000, "no heatmap drawn"
