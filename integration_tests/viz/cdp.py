"""A minimal headless-Chromium driver over the DevTools protocol on a pipe (no PyPI package).

``chromium --remote-debugging-pipe`` reads protocol commands from file descriptor 3 and writes
replies and events to file descriptor 4, each message one JSON object ended by a NUL byte.
That needs neither chromedriver nor a websocket client: only the ``chromium`` binary
(Debian: ``apt-get install chromium``). The browser runs with the network off: every host name
resolves to nothing and every proxied request goes to a closed port, and every request the page
makes is recorded so a test can assert there were none beyond ``file:`` / ``data:``.

Used by ``test_html_chromium.py`` and ``make_doc_images.py``; not a general-purpose driver.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def find_chromium() -> str | None:
    """Path of a Chromium / Chrome binary on ``PATH`` (``$CHROMIUM`` first), else ``None``."""
    env = os.environ.get("CHROMIUM")
    if env and shutil.which(env):
        return shutil.which(env)
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class CDPError(RuntimeError):
    """The browser answered a command with an error, died, or timed out."""


class Browser:
    """One headless Chromium with one page, driven over the DevTools pipe.

    Args:
        binary: the Chromium executable.
        width, height: viewport in CSS pixels.
        timeout: seconds to wait for any single reply or event.
    """

    def __init__(self, binary: str, width: int = 1440, height: int = 900, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.requests: list[str] = []  # every URL the page asked for
        self.exceptions: list[str] = []  # uncaught JavaScript exceptions
        self.console_errors: list[str] = []
        self._profile = tempfile.mkdtemp(prefix="gs-chromium-")
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        args = [
            binary,
            "--headless=new",
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--metrics-recording-only",
            "--hide-scrollbars",
            "--font-render-hinting=none",
            # network off: nothing resolves, and anything proxied goes to a closed port
            "--proxy-server=127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to sandbox as root (containers, CI)

        def _fds() -> None:  # in the child, before exec: protocol in on fd 3, out on fd 4
            hi_in, hi_out = os.dup(cmd_r), os.dup(res_w)  # copies, so 3 / 4 can be overwritten
            os.dup2(hi_in, 3)
            os.dup2(hi_out, 4)
            # a copy may already sit on 3 or 4 (dup2 onto itself is a no-op), close-on-exec
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)

        # close_fds=False: subprocess would close 3 and 4 again after preexec_fn; every other
        # descriptor Python opened is close-on-exec anyway (PEP 446)
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=_fds, close_fds=False,
        )
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._id = 0
        self._events: list[dict[str, Any]] = []
        try:
            targets = self.call("Target.getTargets")["targetInfos"]
            page = next((t for t in targets if t["type"] == "page"), None)
            target_id = page["targetId"] if page else self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target_id, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Network", "Log"):
                self.call(f"{domain}.enable", session=True)
            self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                      deviceScaleFactor=1, mobile=False)
        except Exception:
            self.close()
            raise

    # ---- protocol plumbing
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._res_r], [], [], left)
            if not ready:
                continue
            data = os.read(self._res_r, 1 << 20)
            if not data:
                raise CDPError(f"Chromium closed the DevTools pipe (exit {self.proc.poll()}): {self._stderr()}")
            self._buf += data
        raw, self._buf = self._buf.split(b"\0", 1)
        msg = json.loads(raw)
        self._note(msg)
        return msg

    def _stderr(self) -> str:
        """The end of Chromium's stderr (only once it has exited: reading blocks otherwise)."""
        if self.proc.stderr is None or self.proc.poll() is None:
            return ""
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def _note(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.exceptions.append(str(d.get("exception", {}).get("description") or d.get("text")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.console_errors.append(params["entry"].get("text", ""))

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and return its ``result`` (events seen meanwhile are kept)."""
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        try:
            os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError as exc:
            raise CDPError(f"Chromium is gone (exit {self.proc.wait(timeout=10)}): {self._stderr()}") from exc
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        """Wait for the next event ``method`` (one already received counts)."""
        for i, ev in enumerate(self._events):
            if ev["method"] == method:
                return self._events.pop(i)
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self._read_message(deadline)
            if msg.get("method") == method:
                return msg
            if "method" in msg:
                self._events.append(msg)

    # ---- page helpers
    def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self._events = [e for e in self._events if e["method"] != "Page.loadEventFired"]
        result = self.call("Page.navigate", session=True, url=url)
        if result.get("errorText"):
            raise CDPError(f"navigation to {url} failed: {result['errorText']}")
        self.wait_event("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        """Value of a JavaScript expression (JSON-serialisable), exceptions raised."""
        r = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise CDPError(f"{expression[:80]}: {r['exceptionDetails'].get('exception', r['exceptionDetails'])}")
        return r["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed and released) at the centre of the first element matching
        the CSS ``selector``, scrolled into view first."""
        rect = self.js(
            f"(function(){{var e=document.querySelector({json.dumps(selector)}); if(!e) return null;"
            "e.scrollIntoView({block:'center'}); var r=e.getBoundingClientRect();"
            "return {x:r.left+Math.min(r.width/2, 60), y:r.top+r.height/2, w:r.width, h:r.height};})()"
        )
        if not rect or rect["w"] == 0 or rect["h"] == 0:
            raise CDPError(f"no visible element matches {selector!r}")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=rect["x"], y=rect["y"],
                      button="left" if kind != "mouseMoved" else "none", clickCount=1)

    def screenshot(self, path: str | Path) -> Path:
        """PNG of the viewport, written to ``path``."""
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        p = Path(path)
        p.write_bytes(base64.b64decode(data))
        return p

    def close(self) -> None:
        """Close the browser (and its profile directory)."""
        try:
            if self.proc.poll() is None:
                try:
                    os.write(self._cmd_w, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                    self.proc.wait(timeout=5)
                except (OSError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait(timeout=5)
        finally:
            for fd in (self._cmd_w, self._res_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if self.proc.stderr:
                self.proc.stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
