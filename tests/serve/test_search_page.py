"""The search page of ``mathsearch serve`` end to end: a real server over the 206 sample equations,
driven in Debian's headless Chromium through selenium and the system chromedriver.

The page must fetch nothing outside the server's origin (no CDN, no web font): the browser's
performance log lists every request it sent, and the three static files carry no URL at all.
A screenshot is kept in ``test-artifacts/search-page.png`` (``MATHSEARCH_TEST_ARTIFACTS`` moves it).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.services

REPO = Path(__file__).resolve().parents[2]
WEB = REPO / "mathsearch" / "serve" / "web"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 30.0

if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
    pytest.skip(
        "Debian's chromium and chromedriver are not installed (apt-get install chromium "
        "chromium-driver)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from mathsearch.opensearch.modes import MODES  # noqa: E402
from mathsearch.opensearch.queries import Mode  # noqa: E402
from mathsearch.opensearch.search_profile import SearchProfile  # noqa: E402

#: The width and height of an element as laid out (MathML elements included).
RECT_JS = "const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


@contextlib.contextmanager
def _serve(alias: str, log: Path, **extra_env: str) -> Iterator[str]:
    """``mathsearch serve`` over ``alias`` in a subprocess; its base URL."""
    port = _free_port()
    env = dict(os.environ, **extra_env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    args = [sys.executable, "-m", "mathsearch", "serve", "--index", alias]
    args += ["--host", "127.0.0.1", "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"mathsearch serve exited with {proc.returncode}:\n{_log_tail(log)}")
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"mathsearch serve never became healthy:\n{_log_tail(log)}")
            time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture(scope="module")
def server(equation_alias: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``mathsearch serve`` over the sample index, no API keys."""
    with _serve(equation_alias, tmp_path_factory.mktemp("serve") / "serve.log") as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """Headless Chromium with its performance (network) and console logs on."""
    options = Options()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,1600",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-sync",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.set_page_load_timeout(WAIT_S)
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def query_equation(demo_dicts: list[dict[str, Any]]) -> dict[str, Any]:
    """A real sample equation whose LaTeX is unique in the index and short enough to type."""
    counts = collections.Counter(d["latex"] for d in demo_dicts)
    return next(
        d
        for d in sorted(demo_dicts, key=lambda d: (d["doc_id"], d["position"]))
        if 40 <= len(d["latex"]) <= 100 and counts[d["latex"]] == 1 and not d.get("unknown_macros")
    )


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(os.environ.get("MATHSEARCH_TEST_ARTIFACTS") or REPO / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _wait(driver: WebDriver, condition: Any, what: str) -> Any:
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(
        condition, message=f"timed out waiting for {what}"
    )


def _status(driver: WebDriver) -> str:
    return driver.find_element(By.ID, "status").text


def _rendered(driver: WebDriver, element: WebElement) -> bool:
    width, height = driver.execute_script(RECT_JS, element)
    return width > 0 and height > 0


def _open(driver: WebDriver, base: str) -> None:
    driver.get(f"{base}/")
    _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#mode option"), "the modes")


def _type_query(driver: WebDriver, latex: str) -> WebElement:
    box = driver.find_element(By.ID, "latex")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE)
    box.send_keys(latex)
    return box


def _preview_math(driver: WebDriver) -> WebElement | bool:
    found = driver.find_elements(By.CSS_SELECTOR, "#preview math")
    return found[0] if found and _rendered(driver, found[0]) else False


def _requests(driver: WebDriver) -> list[str]:
    """The URLs the page asked for since the last call (the performance log drains)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _assert_same_origin(driver: WebDriver, base: str) -> None:
    urls = _requests(driver)
    assert any(url.startswith(f"{base}/search") for url in urls), urls
    foreign = [
        url
        for url in urls
        if not (url == base or url.startswith(f"{base}/") or url.startswith(("data:", "blob:")))
    ]
    assert not foreign, f"the page fetched from outside {base}: {foreign}"


def _script_errors(driver: WebDriver) -> list[str]:
    """Console errors, leaving out the server's Content-Security-Policy blocking an inline
    handler of hostile MathML (the sanitiser test feeds some): the policy working, not a bug."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE"
        and entry.get("source") != "network"
        and "Content Security Policy" not in entry["message"]
    ]


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) >= (800, 600) and len(data) > 20_000, (width, height, len(data))


def test_static_files_fetch_nothing_from_outside() -> None:
    for name in ("index.html", "app.js", "style.css"):
        text = (WEB / name).read_text(encoding="utf-8")
        for needle in ("http://", "https://", "//cdn"):
            assert needle not in text, f"{name} mentions {needle!r}"
        assert "@import" not in text and "url(" not in text, f"{name} loads a resource"


def test_search_shows_rendered_results_grouped_with_breakdowns(
    server: str, browser: WebDriver, query_equation: dict[str, Any], artifacts: Path
) -> None:
    _open(browser, server)
    latex = query_equation["latex"]
    box = _type_query(browser, latex)
    preview = _wait(browser, _preview_math, "the preview's rendered <math>")
    assert preview.tag_name == "math"
    assert not browser.find_element(By.ID, "preview-error").is_displayed()

    # fusion: Ctrl+Enter in the box searches
    Select(browser.find_element(By.ID, "mode")).select_by_value("fusion")
    assert browser.find_element(By.ID, "normalization").is_displayed()
    box.send_keys(Keys.CONTROL, Keys.ENTER)
    _wait(browser, lambda d: "mode fusion" in _status(d), "the fusion results")
    status = _status(browser)
    assert " equation" in status and " document" in status and " ms" in status, status
    maths = browser.find_elements(By.CSS_SELECTOR, ".group .hit .hit-math math")
    assert maths and all(_rendered(browser, m) for m in maths if m.is_displayed())
    top = browser.find_elements(By.CSS_SELECTOR, ".group")[0]
    assert top.find_element(By.CSS_SELECTOR, ".group-doc").text == query_equation["doc_id"]
    ids = [e.get_attribute("textContent") for e in top.find_elements(By.CSS_SELECTOR, ".hit-id")]
    assert query_equation["eq_id"] in ids, ids
    assert ids[0] == query_equation["eq_id"], ids
    first = top.find_elements(By.CSS_SELECTOR, ".hit")[0]
    breakdown = first.find_element(By.CSS_SELECTOR, ".breakdown").text
    assert "bm25" in breakdown and "knn" in breakdown and "→" in breakdown, breakdown
    assert float(first.find_element(By.CSS_SELECTOR, ".hit-score").text) > 0
    source = first.find_element(By.CSS_SELECTOR, "details.hit-source")
    assert source.get_attribute("open") is None
    assert source.find_element(By.TAG_NAME, "code").get_attribute("textContent") == latex
    assert "mode=fusion" in browser.current_url and "q=" in browser.current_url
    browser.save_screenshot(str(artifacts / "search-page-fusion.png"))

    # bm25: the breakdown has no vector side any more
    Select(browser.find_element(By.ID, "mode")).select_by_value("bm25")
    assert not browser.find_element(By.ID, "normalization").is_displayed()
    # the hint is the registry's summary of the mode (GET /config's mode_info)
    assert browser.find_element(By.ID, "mode-hint").text == MODES[Mode.BM25].summary
    browser.find_element(By.ID, "search").click()
    _wait(browser, lambda d: "mode bm25" in _status(d), "the bm25 results")
    breakdowns = [b.text for b in browser.find_elements(By.CSS_SELECTOR, ".breakdown") if b.text]
    assert breakdowns and all("bm25" in b and "knn" not in b for b in breakdowns), breakdowns
    top = browser.find_elements(By.CSS_SELECTOR, ".group")[0]
    first_id = top.find_element(By.CSS_SELECTOR, ".hit-id").text
    assert first_id == query_equation["eq_id"]
    assert "mode=bm25" in browser.current_url

    shot = artifacts / "search-page.png"
    assert browser.save_screenshot(str(shot))
    _assert_png(shot)

    # the URL keeps the query: opening it again runs the same search
    browser.get(browser.current_url)
    _wait(browser, lambda d: "mode bm25" in _status(d), "the linked search")
    assert browser.find_element(By.ID, "latex").get_attribute("value") == latex
    assert Select(browser.find_element(By.ID, "mode")).first_selected_option.text == "bm25"

    _assert_same_origin(browser, server)
    assert not _script_errors(browser)


def test_mathml_from_the_server_is_rebuilt_from_an_allow_list(
    server: str, browser: WebDriver
) -> None:
    """Scripts, handlers, links and styles in a MathML string never reach the page."""
    _open(browser, server)
    hostile = (
        '<math xmlns="http://www.w3.org/1998/Math/MathML" onload="window.pwned=1">'
        '<mi mathvariant="bold" onclick="window.pwned=2" href="javascript:alert(1)" style="x">'
        "x</mi>"
        '<mo>-</mo><script>window.pwned=3</script><mtext><img src="x" onerror="pwned=4"/></mtext>'
        '<annotation-xml encoding="text/html"><iframe src="javascript:1"/></annotation-xml>'
        "<mfrac><mn>1</mn><mn>2</mn></mfrac></math>"
    )
    markup = browser.execute_script(
        "const m = window.mathsearchPage.mathElement(arguments[0], 'q');"
        "document.getElementById('results').replaceChildren(m); return m.outerHTML;",
        hostile,
    )
    for needle in ("onload", "onclick", "href", "style", "script", "img", "iframe", "annotation"):
        assert needle not in markup, markup
    assert "<mfrac><mn>1</mn><mn>2</mn></mfrac>" in markup
    assert "\U0001d431" in markup and "\u2212" in markup  # bold x, minus sign
    assert browser.execute_script("return window.pwned === undefined;")
    # not XML: read by the HTML parser, through the same allow-list
    markup = browser.execute_script(
        "return window.mathsearchPage.mathElement(arguments[0]).outerHTML;",
        "<math><mi>a</mi><mo>&nbsp;&lt;</mo><mi onmouseover=pwned=5>b<img src=x onerror=pwned=6>",
    )
    assert "<mi>a</mi>" in markup and "&lt;" in markup, markup
    assert "onmouseover" not in markup and "img" not in markup, markup
    garbage = browser.execute_script("return window.mathsearchPage.mathElement('<b>x</b>');")
    assert garbage is None
    assert browser.execute_script("return window.pwned === undefined;")


def test_malformed_latex_shows_the_reason_and_the_page_still_works(
    server: str, browser: WebDriver, query_equation: dict[str, Any]
) -> None:
    _open(browser, server)
    box = _type_query(browser, r"\frac{1}{x")
    error = _wait(
        browser,
        lambda d: (e := d.find_element(By.ID, "preview-error")).is_displayed() and e,
        "the preview's error",
    )
    assert "brace" in error.text, error.text
    assert box.get_attribute("aria-invalid") == "true"
    assert not browser.find_elements(By.CSS_SELECTOR, "#preview math")

    box.send_keys(Keys.CONTROL, Keys.ENTER)
    _wait(browser, lambda d: "brace" in _status(d), "the search's error in the status")
    assert "error" in browser.find_element(By.ID, "status").get_attribute("class")
    assert not browser.find_elements(By.CSS_SELECTOR, "#results .group")

    _type_query(browser, query_equation["latex"])
    _wait(browser, _preview_math, "the preview after the fix")
    _wait(browser, lambda d: not d.find_element(By.ID, "preview-error").is_displayed(), "no error")
    browser.find_element(By.ID, "search").click()
    # the page starts from the server's profile: without --profile, the shipped default one
    mode = SearchProfile.default().mode.value
    _wait(browser, lambda d: f"mode {mode}" in _status(d), "results after the fix")
    assert browser.find_elements(By.CSS_SELECTOR, ".group .hit .hit-math math")

    _assert_same_origin(browser, server)
    assert not _script_errors(browser)


def test_with_api_keys_on_the_page_asks_for_the_key_and_sends_it(
    equation_alias: str,
    browser: WebDriver,
    query_equation: dict[str, Any],
    tmp_path: Path,
) -> None:
    key = "page-test-key-0123456789"
    with _serve(equation_alias, tmp_path / "serve.log", MATHSEARCH_SERVE_API_KEY=key) as base:
        assert httpx.get(f"{base}/config", timeout=10).status_code == 401
        browser.get(f"{base}/")
        form = _wait(
            browser,
            lambda d: d.find_element(By.ID, "key-form").is_displayed() and d,
            "the key form",
        ).find_element(By.ID, "key-form")
        assert "API key" in _status(browser), _status(browser)
        assert browser.find_element(By.ID, "index-name").text == ""
        form.find_element(By.ID, "api-key").send_keys(key, Keys.ENTER)
        _wait(
            browser, lambda d: equation_alias in d.find_element(By.ID, "index-name").text, "config"
        )
        assert not browser.find_element(By.ID, "key-form").is_displayed()
        _type_query(browser, query_equation["latex"])
        browser.find_element(By.ID, "search").click()
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".group .hit"), "the results")
        ids = [
            e.get_attribute("textContent")
            for e in browser.find_elements(By.CSS_SELECTOR, ".hit-id")
        ]
        assert query_equation["eq_id"] in ids
        # the key stays for this tab: a reload searches without asking again
        browser.get(browser.current_url)
        _wait(
            browser, lambda d: equation_alias in d.find_element(By.ID, "index-name").text, "reload"
        )
        assert not browser.find_element(By.ID, "key-form").is_displayed()
        browser.execute_script("window.sessionStorage.clear()")


def _bm25_search(driver: WebDriver, base: str, latex: str, k: int | None = None) -> None:
    """Open the page and search ``latex`` in bm25 (``k`` documents when given)."""
    _open(driver, base)
    _type_query(driver, latex)
    Select(driver.find_element(By.ID, "mode")).select_by_value("bm25")
    if k is not None:
        box = driver.find_element(By.ID, "k")
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(str(k))
    driver.find_element(By.ID, "search").click()
    _wait(driver, lambda d: "mode bm25" in _status(d), "the bm25 results")


def test_more_documents_loads_the_next_pages_of_the_same_ranking(
    server: str, browser: WebDriver, query_equation: dict[str, Any]
) -> None:
    _bm25_search(browser, server, query_equation["latex"], k=3)

    def docs(driver: WebDriver) -> list[str]:
        return [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".group .group-doc")]

    assert len(docs(browser)) == 3
    browser.find_element(By.ID, "more-pages").click()
    _wait(browser, lambda d: len(docs(d)) == 6, "the second page")
    # the whole ranking at once, from the API: the pages are its slices
    whole = httpx.post(
        f"{server}/search",
        json={"latex": query_equation["latex"], "mode": "bm25", "k": 20, "group": True},
        timeout=WAIT_S,
    ).json()
    expected = [group["doc_id"] for group in whole["groups"]]
    assert docs(browser) == expected[:6]
    ranks = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".group .group-rank")]
    assert ranks == [f"{i}." for i in range(1, 7)]
    if len(expected) > 6:  # the sample's papers run out on the third page
        browser.find_element(By.ID, "more-pages").click()
        _wait(browser, lambda d: "no more results" in _status(d), "the last page")
        assert docs(browser) == expected
        assert not browser.find_elements(By.ID, "more-pages")
    assert not _script_errors(browser)


def test_similar_equations_searches_like_a_hit_without_it(
    server: str, browser: WebDriver, query_equation: dict[str, Any]
) -> None:
    _bm25_search(browser, server, query_equation["latex"])
    first = browser.find_elements(By.CSS_SELECTOR, ".group .hit")[0]
    assert first.find_element(By.CSS_SELECTOR, ".hit-id").text == query_equation["eq_id"]
    first.find_element(By.CSS_SELECTOR, "button.similar").click()
    like = f"similar to {query_equation['eq_id']}"
    _wait(browser, lambda d: like in _status(d), "the similar equations")

    def shown(driver: WebDriver) -> list[str]:
        found = driver.find_elements(By.CSS_SELECTOR, ".group .hit-id")
        return [e.get_attribute("textContent") for e in found]

    assert query_equation["eq_id"] not in shown(browser)
    api = httpx.post(
        f"{server}/search",
        json={"like": query_equation["eq_id"], "mode": "bm25", "k": 10, "group": True},
        timeout=WAIT_S,
    ).json()
    expected = [hit["eq_id"] for group in api["groups"] for hit in group["hits"]]
    assert shown(browser) == expected
    assert "like=" in browser.current_url
    # the link runs the same search; editing the box makes it a plain query again
    browser.get(browser.current_url)
    _wait(browser, lambda d: like in _status(d), "the linked similar search")
    box = browser.find_element(By.ID, "latex")
    box.send_keys(" ")
    browser.find_element(By.ID, "search").click()
    _wait(browser, lambda d: "mode bm25" in _status(d) and like not in _status(d), "a plain query")
    assert shown(browser)[0] == query_equation["eq_id"]
    assert not _script_errors(browser)


def test_search_in_a_served_library_index_ranks_its_documents(
    browser: WebDriver, library_index: tuple[str, str], tmp_path: Path
) -> None:
    """``serve --library``: "Search in" offers the library; an equation of a paper finds it."""
    from opensearchpy import OpenSearch

    from mathsearch.opensearch import OpenSearchSettings, connect

    library, alias = library_index
    client: OpenSearch = connect(OpenSearchSettings.from_env())
    body = {"size": 10, "query": {"term": {"doc_id": "0301085"}}, "sort": [{"position": "asc"}]}
    hits = client.search(index=alias, body=body)["hits"]["hits"]
    latex = max((h["_source"]["latex"] for h in hits), key=len)
    with _serve(alias, tmp_path / "serve.log", MATHSEARCH_SERVE_LIBRARIES=library) as base:
        _open(browser, base)
        assert browser.find_element(By.ID, "index-field").is_displayed()
        Select(browser.find_element(By.ID, "index")).select_by_value(library)
        _type_query(browser, latex)
        browser.find_element(By.ID, "text").send_keys("BRST constraints")
        browser.find_element(By.ID, "search").click()
        _wait(browser, lambda d: f"of {library}" in _status(d), "the library's documents")
        first = browser.find_elements(By.CSS_SELECTOR, ".library-hit")[0]
        assert first.get_attribute("data-doc-id") == "0301085"
        assert first.find_element(By.CSS_SELECTOR, ".library-title").text.startswith("BRST")
        assert first.find_elements(By.CSS_SELECTOR, ".library-equations .hit")
        assert f"index={library}" in browser.current_url  # the URL keeps the choice
        assert not _script_errors(browser)
