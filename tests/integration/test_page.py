"""The page at / in a real browser: Debian's chromium, headless, driven through its chromedriver
(selenium; scripts/setup installs both), against a real `wanjax serve` with a token
(tests/serving.py: the demo model at 48x32, 5 frames, 2 steps). A missing browser fails the
test with the command that installs it."""

import shutil

import pytest
from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait
from serving import TOKEN, Server

CHROMIUM, CHROMEDRIVER = "chromium", "chromedriver"
WAIT = 120  # seconds a test waits for the page before it fails (never reached when all is well)


@pytest.fixture(scope="module")
def server(demo_cache, tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("page") / "out", demo_cache.parent).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser():
    missing = [name for name in (CHROMIUM, CHROMEDRIVER) if shutil.which(name) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: run scripts/setup as root, or apt-get install chromium chromium-driver")
    options = Options()
    options.binary_location = shutil.which(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1000,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page(browser, server):
    """The page, past its token prompt."""
    browser.get(f"{server.url}/")
    token = _wait(browser, lambda: _visible(browser, "token"))
    token.send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    _wait(browser, lambda: _visible(browser, "prompt"))
    return browser


def _wait(browser, condition):
    return WebDriverWait(browser, WAIT).until(lambda _: condition())


def _visible(browser, element_id: str) -> WebElement | None:
    element = browser.find_element(By.ID, element_id)
    return element if element.is_displayed() else None


def _make(page, prompt: str, **fields: str) -> WebElement:
    """Fills the form (by element id), submits it and returns the new video's card."""
    for element_id, value in {"prompt": prompt, **fields}.items():
        element = page.find_element(By.ID, element_id)
        element.clear()
        element.send_keys(value)
    page.find_element(By.ID, "submit").click()
    return _wait(page, lambda: next(
        (card for card in page.find_elements(By.CSS_SELECTOR, "#jobs .job")
         if card.find_element(By.CLASS_NAME, "prompt").text == prompt), None))  # fmt: skip


def test_a_video_made_in_the_page_plays_there_at_the_asked_size_and_length(page, server):
    card = _make(page, "a lighthouse at dusk", size="48x32", length="0.3", steps="2")  # 0.3 s at 16 fps: 5 frames
    _wait(page, lambda: card.get_attribute("data-status") == "completed")
    video = card.find_element(By.TAG_NAME, "video")
    _wait(page, lambda: page.execute_script("return arguments[0].readyState >= 1", video))  # its metadata loaded
    width, height, duration = page.execute_script("const v = arguments[0]; return [v.videoWidth, v.videoHeight, v.duration]", video)
    assert (width, height) == (48, 32) and duration == pytest.approx(5 / 16, abs=1 / 16)
    resources = page.execute_script("return performance.getEntriesByType('resource').map(r => r.name)")
    assert resources and all(name.startswith((server.url, "blob:")) for name in resources)  # nothing from elsewhere


def test_a_video_cancelled_in_the_page_shows_as_cancelled(page):
    card = _make(page, "a long walk", steps="100", length="")
    _wait(page, lambda: card.get_attribute("data-status") in ("queued", "in_progress"))
    card.find_element(By.CLASS_NAME, "cancel").click()
    _wait(page, lambda: card.get_attribute("data-status") == "cancelled")
    assert card.find_element(By.CLASS_NAME, "status").text == "cancelled"
    assert not card.find_element(By.TAG_NAME, "video").is_displayed()


def test_a_first_frame_reaches_the_server_and_its_refusal_shows_in_the_page(page, tmp_path):
    """The demo is a text-to-video model: the uploaded image is sent, and refused by name."""
    first = tmp_path / "first.png"
    Image.new("RGB", (48, 32), (200, 120, 40)).save(first)
    page.find_element(By.ID, "image").send_keys(str(first))
    prompt = page.find_element(By.ID, "prompt")
    prompt.clear()
    prompt.send_keys("a fox from this frame")
    page.find_element(By.ID, "submit").click()
    _wait(page, lambda: "takes no image" in page.find_element(By.ID, "form-error").text)
    assert "a fox from this frame" not in [card.text for card in page.find_elements(By.CSS_SELECTOR, "#jobs .prompt")]


def test_the_page_offers_every_step_cache_and_makes_a_video_with_dbcache_and_taylorseer(page, server):
    offered = server.client.get("/v1/models").json()["data"][0]["cache_policies"]
    policy = Select(page.find_element(By.ID, "cache_policy"))
    assert [option.get_attribute("value") for option in policy.options] == ["", *offered]
    assert "dbcache" in offered and policy.first_selected_option.text == "server's (none)"
    policy.select_by_value("dbcache")
    page.execute_script("document.getElementById('image').value = ''")  # an earlier test's first frame
    try:
        # cache-dit's default 8 first blocks: more than the demo's 2, refused by name in the page
        prompt = page.find_element(By.ID, "prompt")
        prompt.clear()
        prompt.send_keys("a fox, cached")
        page.find_element(By.ID, "submit").click()
        _wait(page, lambda: "Fn_compute_blocks=8: this transformer has 2 blocks" in page.find_element(By.ID, "form-error").text)
        page.find_element(By.ID, "cache-enable_taylorseer").click()
        keys = {"cache-Fn_compute_blocks": "1", "cache-max_warmup_steps": "1", "cache-residual_diff_threshold": "1",
                "cache-taylorseer_order": "2"}  # fmt: skip
        card = _make(page, "a fox, cached", size="48x32", length="0.3", steps="2", **keys)
        _wait(page, lambda: card.get_attribute("data-status") == "completed")
        assert "step cache dbcache" in card.find_element(By.CLASS_NAME, "meta").text
        cache = server.client.get(f"/v1/videos/{card.get_attribute('data-id')}").json()["cache"]
        assert {key: cache[key] for key in ("Fn_compute_blocks", "max_warmup_steps", "residual_diff_threshold",
                                            "enable_taylorseer", "taylorseer_order")} == {
            "Fn_compute_blocks": 1, "max_warmup_steps": 1, "residual_diff_threshold": 1.0, "enable_taylorseer": True,
            "taylorseer_order": 2}  # fmt: skip
    finally:
        policy.select_by_value("")  # the module's other tests use the server's cache
