"""The command line's containment flags, and the lines that say what is in force."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..containment import Containment, ContainmentInForce

__all__ = ["add_containment_options", "containment_from", "containment_lines"]


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is out of range (1-65535)")
    return port


def add_containment_options(parser: argparse.ArgumentParser) -> None:
    """`--allow-read/--allow-write PATH`, `--allow-connect PORT`, `--allow-host HOST`,
    `--allow-socket PATH` (each repeatable) and `--no-containment`."""
    group = parser.add_argument_group(
        "containment",
        "the harness and every command it runs are bounded by the kernel (Linux Landlock "
        "and namespaces): writes only in the workspace and the harness's own state, no "
        "reading your credentials, the network only through the SDK's proxy to allowed hosts",
    )
    group.add_argument(
        "--allow-read", metavar="PATH", action="append", default=[], help="also readable"
    )
    group.add_argument(
        "--allow-write", metavar="PATH", action="append", default=[], help="also writable"
    )
    group.add_argument(
        "--allow-connect",
        metavar="PORT",
        action="append",
        default=[],
        type=_port,
        help="a port of this machine's loopback the agent may reach (forwarded)",
    )
    group.add_argument(
        "--allow-host",
        metavar="HOST",
        action="append",
        default=[],
        help="a host the agent may reach through the proxy (pypi.org, *.github.com)",
    )
    group.add_argument(
        "--allow-socket",
        metavar="PATH",
        action="append",
        default=[],
        help="a Unix socket outside the workspace the agent may reach",
    )
    group.add_argument("--no-containment", action="store_true", help="run the harness uncontained")


def containment_from(args: argparse.Namespace) -> Containment | None:
    """The `Containment` the flags ask for; None for `--no-containment`."""
    from ..containment import Containment

    if args.no_containment:
        return None
    return Containment(
        read=args.allow_read,
        write=args.allow_write,
        connect=args.allow_connect,
        hosts=args.allow_host,
        sockets=args.allow_socket,
    )


def containment_lines(contained: ContainmentInForce | None) -> list[str]:
    """What a person is shown at the start of chat and demo."""
    if contained is None:
        return ["containment: off: the harness and every command it runs can do what you can"]
    head, *rest = contained.describe()
    return [f"containment: {head}", *(f"  {line}" for line in rest)]
