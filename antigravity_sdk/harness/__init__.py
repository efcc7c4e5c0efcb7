"""The connection to the `localharness` binary: wire format, discovery, process and socket."""
