"""optuna-dashboard in a real headless browser (Debian's chromium): what a user sees of a search.

The screenshots go to a temporary folder; with OPTUNA_WPCA_SCREENSHOTS=DIR they are also copied
there (``docs/screenshots/`` holds the committed ones).
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import optuna
import pytest

from optuna_wpca.cli import main

TINY_SPACE = '{"type": "wpca", "num_layers": 6, "hidden_size": 128, "bert_heads": 4, "mobilebert_heads": 2}'
PAGES = {  # name: (path, window height; the trial page is tall enough to show the picture's thumbnail)
    "study-list": ("dashboard", 700),
    "trial": ("dashboard/studies/{single}/trials", 1700),
    "pareto": ("dashboard/studies/{pareto}", 1100),
}


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise RuntimeError("these tests need Debian's chromium (apt-get install chromium); .ci/run installs it")
    return found


def _browser(url: str, *args: str, height: int = 1100) -> subprocess.CompletedProcess:
    return subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--window-size=1400,{height}", "--virtual-time-budget=15000", *args, url],
                          capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    from test_dashboard import running_dashboard

    tmp = tmp_path_factory.mktemp("browser")
    space = tmp / "space.json"
    space.write_text(TINY_SPACE)
    url, art = f"sqlite:///{tmp / 'nas.db'}", str(tmp / "artifacts")
    common = ["--space", str(space), "--storage", url, "--batch-size", "8", "--seq-len", "64", "--quiet",
              "--artifact-dir", art, "--sampler-seed", "0"]
    assert main(["search", *common, "--study-name", "wpca", "--n-trials", "10", "--population-size", "5"]) == 0
    assert main(["search", *common, "--study-name", "wpca-latency", "--n-trials", "16", "--population-size", "8",
                 "--proxy", "wpca", "--proxy", "latency"]) == 0
    ids = {s.study_name: s._study_id for s in optuna.get_all_study_summaries(url)}
    with running_dashboard(url, art) as base:
        yield base, {"single": ids["wpca"], "pareto": ids["wpca-latency"]}, tmp


def _text(base: str, page: str) -> str:
    dom = _browser(f"{base}/{page}", "--dump-dom").stdout.decode()
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))


def test_the_trial_page_shows_the_note_the_picture_and_short_attributes(dashboard):
    base, ids, _ = dashboard
    text = _text(base, PAGES["trial"][0].format(**ids))
    assert "Export it as a transformers directory" in text and "optuna-wpca export --storage sqlite:///" in text
    assert "PCA dim" in text and "wpca" in text and "trial-00000-architecture.svg" in text
    assert re.search(r"architecture ([BM]\d+ ){5}[BM]\d+", text)  # one short line, not one row per layer
    assert "Objective 0" not in text


def test_the_pareto_page_names_its_axes_after_the_proxies(dashboard):
    base, ids, _ = dashboard
    text = _text(base, PAGES["pareto"][0].format(**ids))
    assert "Pareto Front" in text and "latency" in text and "wpca" in text
    assert "Objective 0" not in text and "Objective 1" not in text


def test_screenshots_of_the_study_list_the_trial_and_the_pareto_front(dashboard):
    from PIL import Image

    base, ids, tmp = dashboard
    keep = os.environ.get("OPTUNA_WPCA_SCREENSHOTS")
    for name, (page, height) in PAGES.items():
        path = tmp / f"dashboard-{name}.png"
        result = _browser(f"{base}/{page.format(**ids)}", f"--screenshot={path}", height=height)
        assert path.is_file(), result.stderr.decode()[-2000:]
        with Image.open(path) as image:
            assert image.size == (1400, height)
            colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
            assert colours is not None and len(colours) > 50, f"{name}: a blank page"
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(keep) / path.name)


def test_two_trials_side_by_side_share_one_scale(dashboard):
    """Two trials' pages next to each other (``dashboard-two-trials.png``): their architecture
    thumbnails are drawn on the space's scale, so bars of equal FFN width are equally long."""
    from PIL import Image

    base, ids, tmp = dashboard
    page, height = PAGES["trial"]
    shots = []
    for number in (0, 1):
        path = tmp / f"trial-{number}.png"
        _browser(f"{base}/{page.format(**ids)}?numbers={number}", f"--screenshot={path}", height=height)
        assert path.is_file()
        shots.append(Image.open(path).convert("RGB"))
    assert shots[0].tobytes() != shots[1].tobytes()  # two different trials were shown
    pair = Image.new("RGB", (shots[0].width * 2, height), "white")
    pair.paste(shots[0], (0, 0))
    pair.paste(shots[1], (shots[0].width, 0))
    path = tmp / "dashboard-two-trials.png"
    pair.save(path)
    keep = os.environ.get("OPTUNA_WPCA_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)
