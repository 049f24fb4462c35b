"""Headless Chromium driven through chromedriver's W3C WebDriver HTTP protocol with the standard library only
(urllib, no selenium), and a small PNG reader for screenshots. Used by test_html_report.py and by
scripts/screenshot-report.

Every wait is bounded: chromedriver must answer /status within DRIVER_START_SECONDS, every WebDriver
request within REQUEST_TIMEOUT_SECONDS, and the driver must exit within its shutdown timeout or is killed.
Chromium runs with --no-sandbox (the tests run as root) and a temporary profile directory.
"""

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import zlib

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
DRIVER_START_SECONDS = 20
REQUEST_TIMEOUT_SECONDS = 60
SHUTDOWN_SECONDS = 10
# The W3C name of an element reference in WebDriver answers.
ELEMENT_KEY = "element-6066-11e4-a52e-4f735466cecf"


class WebDriverError(RuntimeError):
    pass


def available():
    """Why headless Chromium cannot run here, or None when it can."""
    for tool in (CHROMIUM, CHROMEDRIVER):
        if not os.access(tool, os.X_OK):
            return f"{tool} is not installed (scripts/install-deps installs chromium and chromium-driver)"
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Chromium:
    """One headless Chromium session; use as a context manager so the browser and driver always end."""

    def __init__(self, width=1280, height=1000):
        self._profile = tempfile.mkdtemp(prefix="heapscope-chromium-")
        self._port = _free_port()
        self._log = open(os.path.join(self._profile, "chromedriver.log"), "w+")
        self._driver = subprocess.Popen([CHROMEDRIVER, f"--port={self._port}"], stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        self.session = None
        try:
            self._wait_for_driver()
            options = {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-first-run", "--disable-extensions", "--disable-background-networking",
                         "--hide-scrollbars", f"--window-size={width},{height}",
                         f"--user-data-dir={os.path.join(self._profile, 'profile')}"],
            }
            answer = self._request("POST", "/session", {"capabilities": {"alwaysMatch": {
                "browserName": "chrome", "goog:chromeOptions": options, "goog:loggingPrefs": {"browser": "ALL"}}}})
            self.session = answer["sessionId"]
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- the protocol ----

    def _request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self._port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
                answer = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as e:
            answer = json.loads(e.read() or b"{}")
        value = answer.get("value")
        if isinstance(value, dict) and "error" in value:
            raise WebDriverError(f"{method} {path}: {value['error']}: {value.get('message', '')[:500]}")
        return value

    def _wait_for_driver(self):
        deadline = time.monotonic() + DRIVER_START_SECONDS
        while time.monotonic() < deadline:
            if self._driver.poll() is not None:
                raise WebDriverError(f"chromedriver exited with {self._driver.returncode}: {self._driver_log()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self._port}/status", timeout=2) as response:
                    if json.loads(response.read())["value"].get("ready"):
                        return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        raise WebDriverError(f"chromedriver did not become ready within {DRIVER_START_SECONDS} s: {self._driver_log()}")

    def _driver_log(self):
        self._log.flush()
        self._log.seek(0)
        return self._log.read()[-2000:]

    def _session_path(self, tail):
        return f"/session/{self.session}{tail}"

    # ---- what the tests use ----

    def open(self, url):
        self._request("POST", self._session_path("/url"), {"url": url})

    def run_script(self, script, *args):
        """Runs `script` (a function body; `arguments` holds args) in the page and returns its value."""
        return self._request("POST", self._session_path("/execute/sync"), {"script": script, "args": list(args)})

    def find(self, css):
        return self._request("POST", self._session_path("/element"), {"using": "css selector", "value": css})

    def click(self, element):
        self._request("POST", self._session_path(f"/element/{element[ELEMENT_KEY]}/click"), {})

    def browser_log(self):
        """The console and page errors since the last call: [{level, message, source, timestamp}]."""
        return self._request("POST", self._session_path("/se/log"), {"type": "browser"})

    def screenshot_png(self):
        return base64.b64decode(self._request("GET", self._session_path("/screenshot")))

    def set_window_size(self, width, height):
        self._request("POST", self._session_path("/window/rect"), {"width": width, "height": height})

    def close(self):
        try:
            if self.session:
                self._request("DELETE", self._session_path(""))
        except (OSError, WebDriverError):
            pass
        self.session = None
        if self._driver.poll() is None:
            self._driver.terminate()
            try:
                self._driver.wait(timeout=SHUTDOWN_SECONDS)
            except subprocess.TimeoutExpired:
                self._driver.kill()
                self._driver.wait(timeout=SHUTDOWN_SECONDS)
        self._log.close()
        shutil.rmtree(self._profile, ignore_errors=True)


# ---- PNG ----

def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def png_pixels(png):
    """(width, height, rows) of an 8-bit RGB or RGBA PNG, each row a bytes object of unfiltered pixels."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    position, idat, header = 8, b"", None
    while position < len(png):
        length, kind = struct.unpack(">I4s", png[position:position + 8])
        chunk = png[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        position += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    pixel = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * pixel
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(pixel, stride):
                line[i] = (line[i] + line[i - pixel]) & 0xFF
        elif kind == 2:
            for i in range(stride):
                line[i] = (line[i] + previous[i]) & 0xFF
        elif kind == 3:
            for i in range(stride):
                left = line[i - pixel] if i >= pixel else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                left = line[i - pixel] if i >= pixel else 0
                upper_left = previous[i - pixel] if i >= pixel else 0
                line[i] = (line[i] + _paeth(left, previous[i], upper_left)) & 0xFF
        elif kind != 0:
            raise ValueError(f"bad PNG filter {kind} in row {y}")
        rows.append(bytes(line))
        previous = line
    return width, height, rows, pixel


def distinct_colours(png):
    """How many different pixel values a PNG holds (a blank page has one)."""
    width, _, rows, pixel = png_pixels(png)
    colours = set()
    for row in rows:
        colours.update(row[i:i + pixel] for i in range(0, width * pixel, pixel))
    return len(colours)
