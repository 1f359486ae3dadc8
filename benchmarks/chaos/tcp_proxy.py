"""A loopback TCP proxy that a test can sever, restore, pause and resume.

Broker outages are simulated here rather than by stopping the shared RabbitMQ
(the broker fault tests and the chaos scenario, :mod:`benchmarks.chaos`):

* :meth:`TcpProxy.sever` resets every open connection and refuses new ones
  (accepted and closed at once) until :meth:`TcpProxy.restore` — a cut link;
* :meth:`TcpProxy.pause` stops forwarding bytes in both directions while the
  sockets stay open, until :meth:`TcpProxy.resume` — a black hole, in which a
  publisher waits for confirms that do not come.

Plain threads (one accept loop, two pumps per connection) so the proxy does not
depend on, or compete with, the test's event loop.
"""

from __future__ import annotations

import socket
import threading


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.1)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._severed = threading.Event()
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self.accepted = 0
        #: Bytes forwarded client → server since the last :meth:`sever_after`.
        self.upstream_bytes = 0
        self._sever_at: int | None = None
        self._thread = threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True)
        self._thread.start()

    def url(self, amqp_url: str) -> str:
        """``amqp_url`` rewritten to go through this proxy."""
        scheme, _, rest = amqp_url.partition("://")
        creds, _, hostpart = rest.rpartition("@")
        _, _, path = hostpart.partition("/")
        prefix = f"{creds}@" if creds else ""
        return f"{scheme}://{prefix}127.0.0.1:{self.port}/{path}"

    # ------------------------------------------------------------- controls
    def sever(self) -> None:
        self._severed.set()
        self._reset_all()

    def sever_after(self, upstream_bytes: int) -> None:
        """Cut every connection once ``upstream_bytes`` more went client → server,
        i.e. in the middle of whatever the client is sending then."""
        with self._lock:
            self.upstream_bytes = 0
            self._sever_at = upstream_bytes

    def restore(self) -> None:
        self._severed.clear()

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._reset_all()
        self._thread.join(timeout=2)
        self._listener.close()

    # ------------------------------------------------------------ internals
    def _cut_point(self, n: int) -> int | None:
        """Bytes of the next ``n`` to forward before a requested cut, or None."""
        with self._lock:
            if self._sever_at is not None and self.upstream_bytes + n >= self._sever_at:
                cut = self._sever_at - self.upstream_bytes
                self._sever_at = None
                self.upstream_bytes += cut
                return cut
            self.upstream_bytes += n
        return None

    def _reset_all(self) -> None:
        with self._lock:
            socks, self._sockets = self._sockets, set()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._severed.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=2)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            self.accepted += 1
            with self._lock:
                self._sockets.update((client, upstream))
            for src, dst, up in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, up), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self._flowing.wait()
                if self._severed.is_set() or self._closed.is_set():
                    break
                cut = self._cut_point(len(data)) if upstream else None
                dst.sendall(data if cut is None else data[:cut])
                if cut is not None:  # mid-frame, as a real cable cut would be
                    self.sever()
                    break
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
