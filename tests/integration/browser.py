"""Drive a real headless Chromium: --dump-dom, --screenshot, and the DevTools protocol over a pipe.

`--remote-debugging-pipe` makes Chromium read protocol commands from fd 3 and write replies to
fd 4 (NUL-terminated JSON), so scripted clicks and typing need no websocket library.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

BASE_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--disable-extensions",
)


def chromium() -> str:
    """The browser; CI installs it (.ci/run), so a missing one fails the test, never skips it."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "chromium is not installed (apt-get install chromium)"
    return path


def _profile_dir(tmp: Path) -> list[str]:
    return [f"--user-data-dir={tmp / 'chromium-profile'}", "--crash-dumps-dir=" + str(tmp)]


def dump_dom(
    url: str, tmp: Path, budget_ms: int = 3000, size: tuple[int, int] = (1400, 1000)
) -> str:
    """The DOM after the page's scripts ran."""
    out = subprocess.run(
        [
            chromium(),
            *BASE_FLAGS,
            *_profile_dir(tmp),
            f"--window-size={size[0]},{size[1]}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        timeout=90,
        check=True,
    )
    return out.stdout.decode("utf-8")


def screenshot(url: str, path: Path, tmp: Path, size: tuple[int, int] = (1400, 1000)) -> Path:
    subprocess.run(
        [
            chromium(),
            *BASE_FLAGS,
            *_profile_dir(tmp),
            f"--window-size={size[0]},{size[1]}",
            "--virtual-time-budget=3000",
            f"--screenshot={path}",
            url,
        ],
        capture_output=True,
        timeout=90,
        check=True,
    )
    assert path.is_file() and path.stat().st_size > 1000, path
    return path


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


class DevTools:
    """One page in a headless Chromium, driven by protocol commands."""

    def __init__(self, tmp: Path, size: tuple[int, int] = (1400, 1000)) -> None:
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()

        def child_fds() -> None:  # Chromium expects the pipe at fds 3 (commands) and 4 (replies)
            # via fresh copies: dup2 onto the same number would keep the close-on-exec flag
            commands, replies = os.dup(cmd_r), os.dup(res_w)
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        self.proc = subprocess.Popen(
            [
                chromium(),
                *BASE_FLAGS,
                *_profile_dir(tmp),
                "--remote-debugging-pipe",
                f"--window-size={size[0]},{size[1]}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_fds,
            close_fds=False,
        )
        os.close(cmd_r)
        os.close(res_w)
        self._buffer = b""
        self._next_id = 0
        self.session: str | None = None
        target = self.send("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.send(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, session=False
        )["sessionId"]
        self.send("Page.enable")
        self.resize(*size)

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: bool = True,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
        raise TimeoutError(method)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._res_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(raw)
        return parsed

    def resize(self, width: int, height: int) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def open(self, url: str, ready: str = "document.readyState === 'complete'") -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_for(ready)

    def eval(self, expression: str) -> Any:
        reply = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = self.eval(f"!!({expression})")
            except RuntimeError:
                value = None
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(expression)

    def center_of(self, selector: str) -> tuple[float, float]:
        rect = self.eval(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
            "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); "
            "return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        assert rect, selector
        return rect[0], rect[1]

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the element's centre."""
        x, y = self.center_of(selector)
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def hover(self, selector: str) -> None:
        x, y = self.center_of(selector)
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def type_into(self, selector: str, text: str) -> None:
        self.click(selector)
        self.send("Input.insertText", {"text": text})

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params)["data"]))
        return path

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close", session=False, timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)
        os.close(self._res_r)

    def __enter__(self) -> DevTools:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
