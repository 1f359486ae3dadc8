"""The loopback TCP proxy lives with the chaos scenario, which cuts AMQP links with it too."""

from benchmarks.chaos.tcp_proxy import TcpProxy

__all__ = ["TcpProxy"]
