"""A headless Chromium driven over the Chrome DevTools Protocol (CDP) on a pipe: what
`geomech.plot.export_frames` renders frames with and what the tests look at animations with.

Chromium is started with `--remote-debugging-pipe`: it reads commands from its file descriptor 3
and writes replies and events to 4, as NUL-terminated JSON messages, so no network port is opened
and nothing beyond the standard library is needed (POSIX: Linux, macOS). The browser is the
system's (Debian's `chromium` package, or `$GEOMECH_CHROMIUM`); none is downloaded.
"""

import base64
import json
import os
import pathlib
import select
import shutil
import signal
import tempfile
import time

ENV = "GEOMECH_CHROMIUM"
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--use-angle=swiftshader",  # WebGL on the CPU (SwiftShader), the same on every machine
    "--enable-unsafe-swiftshader",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


def _above(fd: int, low: int) -> int:
    """`fd` moved to the lowest free descriptor >= `low` (the old one closed)."""
    import fcntl  # POSIX: imported here so that `geomech.plot` imports everywhere

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
    os.close(fd)
    return moved


class BrowserError(RuntimeError):
    """Chromium could not be started or did not answer as expected."""


def find_chromium() -> str | None:
    """The Chromium (or Chrome) executable: `$GEOMECH_CHROMIUM`, else the first of `NAMES` on
    the `PATH`; `None` if there is none."""
    if os.environ.get(ENV):
        return shutil.which(os.environ[ENV]) or None
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Chromium:
    """A headless Chromium with one page of `width` × `height` CSS pixels; use as a context
    manager (`with Chromium() as browser: page = browser.open(url)`).

    The page's console errors, uncaught exceptions and failed loads are collected in `errors`,
    every URL it requests in `requests`."""

    def __init__(
        self,
        executable: str | None = None,
        *,
        width: int = 960,
        height: int = 600,
        timeout: float = 60.0,
    ):
        executable = executable or find_chromium()
        if executable is None:
            raise BrowserError(
                "no Chromium found: install Debian's `chromium` package (or Chrome), or set "
                f"${ENV} to its executable."
            )
        self.timeout = timeout
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.requests: list[str] = []
        self._events: list[dict] = []
        self._buffer = b""
        self._next_id = 0
        self._profile = tempfile.mkdtemp(prefix="geomech-chromium-")
        self._log = open(pathlib.Path(self._profile) / "stderr.log", "wb")  # noqa: SIM115
        to_chromium, self._write = os.pipe()
        self._read, from_chromium = os.pipe()
        # the child gets the two pipes as its descriptors 3 and 4: both moved above 4 first (so
        # that making one of them 3 or 4 overwrites nothing), closed on exec, copied by
        # posix_spawn (no Python code runs in the child: safe in a process with threads)
        to_chromium, from_chromium = (_above(fd, 5) for fd in (to_chromium, from_chromium))
        args = [*FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}"]
        log = self._log.fileno()
        try:
            self._pid = os.posix_spawn(
                executable,
                [executable, *args, "about:blank"],
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, log, 1),
                    (os.POSIX_SPAWN_DUP2, log, 2),
                    (os.POSIX_SPAWN_DUP2, to_chromium, 3),
                    (os.POSIX_SPAWN_DUP2, from_chromium, 4),
                ],
            )
        finally:
            os.close(to_chromium)
            os.close(from_chromium)
        try:
            target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self.send(
                "Target.attachToTarget", {"targetId": target, "flatten": True}
            )["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.send(f"{domain}.enable", session=True)
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                session=True,
            )
        except BaseException:
            self.close()
            raise

    # -- the protocol ---------------------------------------------------------------------------

    def _stderr(self) -> str:
        self._log.flush()
        text = (pathlib.Path(self._profile) / "stderr.log").read_text(errors="replace")
        return "\n".join(text.strip().splitlines()[-15:])

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"Chromium did not answer within {self.timeout:g} s.")
            ready, _, _ = select.select([self._read], [], [], left)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise BrowserError(f"Chromium exited; its last messages:\n{self._stderr()}")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message = json.loads(raw)
        if "method" in message:
            self._event(message)
        return message

    def _event(self, message: dict) -> None:
        method, params = message["method"], message.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            self.errors.append(d.get("exception", {}).get("description") or d.get("text", ""))
        elif method == "Runtime.consoleAPICalled" and params["type"] in (
            "error",
            "assert",
            "warning",
        ):
            text = " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])
            )
            (self.warnings if params["type"] == "warning" else self.errors).append(text)
        elif method == "Log.entryAdded":
            entry = params["entry"]
            text = f"{entry.get('source', '')}: {entry.get('text', '')} {entry.get('url', '')}"
            if entry.get("level") == "error":
                self.errors.append(text.strip())
            elif entry.get("level") == "warning":
                self.warnings.append(text.strip())
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Inspector.targetCrashed":
            self.errors.append("the page crashed")
        self._events.append(message)

    def send(self, method: str, params: dict | None = None, *, session: bool = False) -> dict:
        """Send one CDP command (to the page when `session`) and return its result."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._write, data) :]
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message', reply['error'])}")
                return reply.get("result", {})

    def wait_for(self, method: str) -> dict:
        """Wait for the page's next event `method` (one that already arrived counts)."""
        deadline = time.monotonic() + self.timeout
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method and event.get("sessionId") == self._session:
                    del self._events[: i + 1]
                    return event.get("params", {})
            self._events.clear()
            self._message(deadline)

    # -- what a user of the page needs ------------------------------------------------------------

    def open(self, url: str) -> None:
        """Load `url` (e.g. `path.as_uri()`) and wait for its load event."""
        self._events.clear()
        result = self.send("Page.navigate", {"url": url}, session=True)
        if result.get("errorText"):
            raise BrowserError(f"cannot open {url}: {result['errorText']}")
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session=True,
        )
        if "exceptionDetails" in result:
            d = result["exceptionDetails"]
            raise BrowserError(d.get("exception", {}).get("description") or d.get("text"))
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        """The page as it is drawn now, a PNG."""
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        return base64.b64decode(data)

    def close(self) -> None:
        """End Chromium and remove its profile."""
        if getattr(self, "_pid", None) is not None:
            try:
                message = json.dumps({"id": self._next_id + 1, "method": "Browser.close"})
                os.write(self._write, message.encode() + b"\0")
            except OSError:
                pass
            if not self._wait(10.0):
                os.kill(self._pid, signal.SIGKILL)
                self._wait(None)
            self._pid = None
        for fd in ("_read", "_write"):
            if getattr(self, fd, None) is not None:
                os.close(getattr(self, fd))
                setattr(self, fd, None)
        self._log.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _wait(self, timeout: float | None) -> bool:
        """Reap the browser process; `False` if it still runs after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pid, _ = os.waitpid(self._pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
