"""The synthesis server: deterministic espeak-ng and Piper in any process.

espeak-ng keeps state between calls inside the C library (pitch flutter, its random
generator) and Piper's VITS graph samples noise from onnxruntime's generator, so the
same text would come out slightly different each time in one process. `server` starts,
once per process, a plain single-threaded subprocess (`python -c`, running `serve`)
that creates each engine on first use and synthesises every utterance in a child forked
from that pristine state: the same request always gives the same samples, whatever ran
before. Requests are (engine, args): ("espeak", (text, voice, seed)) for
`espeak.Espeak.synthesize`, ("piper:<model>", (sentences, voice)) for
`piper.Piper.synthesize`.
"""

from __future__ import annotations

import functools
import os
import pickle
import subprocess
import sys
import threading
from multiprocessing.connection import Connection

from speechkit.tts import espeak, piper


def _in_pristine_child(function, *args):
    """("ok", function(*args)) computed in a forked child, so this process never changes;
    ("error", (type name, message)) if it raised."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, exit without cleanup handlers
        os.close(read_end)
        try:
            payload = pickle.dumps(("ok", function(*args)))
        except BaseException as err:  # noqa: BLE001 - reported to the parent
            payload = pickle.dumps(("error", (type(err).__name__, str(err))))
        with os.fdopen(write_end, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as source:
        payload = source.read()
    os.waitpid(pid, 0)
    if not payload:
        return "error", ("RuntimeError", "the synthesis child died without an answer")
    return pickle.loads(payload)


def _engine(name: str):
    """A new engine for a request's engine name: "espeak" or "piper:<model>"."""
    return espeak.Espeak() if name == "espeak" else piper.Piper(name.split(":")[1])


def serve(read_fd: int, write_fd: int) -> None:
    """The synthesis server's loop (run as `python -c`, a single-threaded process).

    Requests are (engine, args); engines are created here on first use (never run
    here), every synthesis runs in a child forked from this pristine state."""
    engines = {}
    requests, replies = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    while True:
        try:
            engine, args = requests.recv()
        except EOFError:  # the client went away
            return
        try:
            if engine not in engines:
                engines[engine] = _engine(engine)
        except Exception as err:  # noqa: BLE001 - reported to the client
            replies.send(("error", (type(err).__name__, str(err))))
            continue
        replies.send(_in_pristine_child(engines[engine].synthesize, *args))


class Server:
    """Client side of the synthesis server; one per process, requests serialised.

    The server is a plain subprocess (not multiprocessing), so it never re-imports the
    caller's __main__: scripts need no `if __name__ == "__main__"` guard.
    """

    def __init__(self):
        to_server_read, to_server_write = os.pipe()
        from_server_read, from_server_write = os.pipe()
        code = (
            f"from {__name__} import serve; {serve.__name__}({to_server_read}, {from_server_write})"
        )
        # One BLAS thread: the server forks per utterance and should stay single-threaded.
        environment = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            pass_fds=(to_server_read, from_server_write),
            stdin=subprocess.DEVNULL,
            env=environment,
        )
        os.close(to_server_read)
        os.close(from_server_write)
        self.requests = Connection(to_server_write, readable=False)
        self.replies = Connection(from_server_read, writable=False)
        self.lock = threading.Lock()

    def synthesize(self, engine: str, *args):
        """What the engine's `synthesize(*args)` returned in the server's child; its
        ValueError as a ValueError, anything else as a RuntimeError."""
        with self.lock:
            try:
                self.requests.send((engine, args))
                status, value = self.replies.recv()
            except (EOFError, OSError) as err:
                raise RuntimeError(
                    f"the synthesis server stopped (exit code {self.process.poll()})"
                ) from err
        if status == "ok":
            return value
        kind, message = value
        raise (ValueError if kind == "ValueError" else RuntimeError)(message)


@functools.lru_cache(maxsize=1)
def server() -> Server:
    """This process's synthesis server, started on first use."""
    return Server()
