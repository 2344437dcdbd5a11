"""Headless Chromium (Debian's `chromium`, which .ci/run installs), driven
over the DevTools protocol with websocket-client: what a person's browser
shows of a page, for the tests that look at one (issue 34 §3).

No browser download, no playwright: one `chromium --headless=new` process
with `--remote-debugging-port`, one page, the protocol's own commands
(Page.navigate, Runtime.evaluate, Page.captureScreenshot) and the console
errors and uncaught exceptions it reports.
"""

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket

from tests.service import servers

WIDTH, HEIGHT = 1280, 800  # a laptop's viewport, CSS pixels


def chromium_binary():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise RuntimeError("Chromium is not installed (Debian: apt-get install chromium); "
                           ".ci/run installs it.")
    return found


class Page:
    """One tab: commands over its websocket, and what it reported."""

    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events = []
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                  deviceScaleFactor=1, mobile=False)

    def send(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method, timeout=90):
        """Waits for the event `method` (after those already seen are dropped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    del self.events[: i + 1]
                    return event
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                self.events.append(json.loads(self.ws.recv()))
            except websocket.WebSocketTimeoutException:
                break
        raise TimeoutError(f"no {method} within {timeout} s")

    def open(self, url):
        self.events = [e for e in self.events if e.get("method") != "Page.loadEventFired"]
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression, context_id=None, timeout=60):
        """The value of `expression` (awaited when a promise) in the page, or
        in the execution context `context_id` (a frame's)."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True,
                  "timeout": timeout * 1000}
        if context_id is not None:
            params["contextId"] = context_id
        result = self.send("Runtime.evaluate", **params)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_until(self, expression, context_id=None, timeout=90):
        """Polls `expression` until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(RuntimeError):  # a frame not there yet
                value = self.evaluate(expression, context_id)
                if value:
                    return value
            time.sleep(0.5)
        raise TimeoutError(f"{expression!r} not true within {timeout} s")

    def frame_context(self, url_prefix):
        """An execution context in the child frame whose URL starts with
        `url_prefix` (e.g. "blob:"): where the frame's DOM is evaluated."""
        def frames(node):
            yield node["frame"]
            for child in node.get("childFrames", []):
                yield from frames(child)

        tree = self.send("Page.getFrameTree")["frameTree"]
        (frame,) = [f for f in frames(tree) if f["url"].startswith(url_prefix)]
        world = self.send("Page.createIsolatedWorld", frameId=frame["id"],
                          worldName="kg-test")
        return world["executionContextId"]

    def errors(self):
        """The console errors and uncaught exceptions the page reported."""
        out = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
                out.append(" ".join(str(a.get("value", a.get("description")))
                                    for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                out.append(f"{params['entry'].get('url', '')}: {params['entry']['text']}")
        return out

    def screenshot(self, path, full_page=False):
        """A PNG of the viewport (full_page: the whole page's height)."""
        params = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={
                "x": 0, "y": 0, "width": WIDTH, "height": size["height"], "scale": 1})
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))


@contextlib.contextmanager
def chromium():
    """One headless Chromium at a laptop's viewport; yields a `Page`.

    Sandboxed iframes stay in the page's process
    (IsolateSandboxedIframes off), so a frame's DOM is one
    Runtime.evaluate away; that changes where the frame runs, not what it
    shows.
    """
    port = servers.free_port()
    profile = tempfile.mkdtemp(prefix="kg-chromium-")
    log = open(os.path.join(profile, "chromium.log"), "w")
    process = subprocess.Popen(
        [chromium_binary(), "--headless=new", f"--remote-debugging-port={port}",
         "--remote-allow-origins=*", f"--user-data-dir={profile}", "--no-sandbox",
         "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-features=IsolateSandboxedIframes,Translate,MediaRouter",
         "--disable-background-networking", "--disable-component-update",
         f"--window-size={WIDTH},{HEIGHT}", "--hide-scrollbars", "about:blank"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    page = None
    try:
        servers.wait_for_http(f"http://127.0.0.1:{port}/json/version", process, 60, log.name)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as response:
            (tab,) = [t for t in json.load(response) if t["type"] == "page"]
        page = Page(tab["webSocketDebuggerUrl"])
        yield page
    finally:
        if page is not None:
            page.ws.close()
        servers.stop(process)
        log.close()
        shutil.rmtree(profile, ignore_errors=True)
